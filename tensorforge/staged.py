"""StagedModel: an OnnxProgram compiled stretch by stretch, at call time, and cached.

A model whose shapes are not all static (symbolic input dimensions, shapes that are input
values, control flow, sequences, data-dependent shapes) runs as a loop over its nodes
(frontend/onnx_program.py): each static stretch is specialized on the concrete shapes it reads
(and the values it reads as shapes), compiled by `driver.compile` into an ordinary Model once
per specialization, and run; host ops (If, Loop, Scan, sequences, NonZero, ...) run in between.
Specializations are kept in an LRU cache of `max_specializations` entries, so a model called
with batch 1, 4 and 16 compiles three times and then runs each as fast as a model compiled for
that shape.  Compiled kernels are also cached on disk, so a new process recompiles nothing.
"""
from __future__ import annotations

import sys
import time
from collections import ChainMap, OrderedDict
from typing import Any

import numpy as np

from .errors import InputError
from .frontend import onnx as fe
from .frontend.onnx_host import HOST_OPS, HostContext, contiguous
from .frontend.onnx_program import OnnxProgram


class _Specializations:
    """A model's compiled specializations by key, the least recently used dropped beyond `limit`.
    `info` counts what was compiled (and how long it took) and what was evicted."""

    def __init__(self, name: str, options: dict, limit: int):
        if limit < 1:
            raise ValueError(f"max_specializations must be at least 1, got {limit}")
        self.name, self.options, self.limit = name, dict(options), limit
        self.entries: OrderedDict = OrderedDict()
        self.info: dict[str, Any] = {"specializations": 0, "compile_seconds": 0.0, "evicted": 0}

    def get(self, key) -> Any:
        value = self.entries.get(key)
        if value is not None:
            self.entries.move_to_end(key)
        return value

    def put(self, key, value) -> None:
        self.entries[key] = value
        if len(self.entries) > self.limit:
            self.entries.popitem(last=False)
            self.info["evicted"] += 1

    def compile(self, graph):
        """`graph` compiled with the model's options, counted."""
        from .driver import compile as compile_graph
        began = time.perf_counter()
        model = compile_graph(graph, **self.options)
        self.info["compile_seconds"] += time.perf_counter() - began
        self.info["specializations"] += 1
        if self.info["specializations"] == 2 * self.limit:
            print(f"tensorforge: model {self.name} has compiled {self.info['specializations']} "
                  "specializations; its inputs change shape often (see max_specializations)", file=sys.stderr)
        return model


class StagedModel:
    """`model(*inputs)` or `model.run(name=value)` -> list of outputs in graph order.  Inputs
    are NumPy arrays (lists of arrays for sequence inputs, None for an absent optional)."""

    def __init__(self, program: OnnxProgram, options: dict, max_specializations: int = 64):
        self.program = program
        self._compiled = _Specializations(program.name, options, max_specializations)
        self._signatures: dict[tuple, list] = {}
        self.info = self._compiled.info
        self.info.update(staged=program.reason, target=options.get("target", "c"))

    @property
    def input_names(self) -> list[str]:
        return [s.name for s in self.program.inputs]

    @property
    def output_names(self) -> list[str]:
        return list(self.program.output_names)

    def __repr__(self) -> str:
        return (f"StagedModel({self.program.name}, {len(self.program.inputs)} input(s), "
                f"{self.info['specializations']} specialization(s) compiled)")

    def __call__(self, *arrays) -> list:
        names = self.input_names
        if len(arrays) > len(names):
            raise TypeError(f"model {self.program.name} takes {len(names)} input(s) ({', '.join(names)}), "
                            f"got {len(arrays)}")
        return self._call(dict(zip(names, arrays)))

    def run(self, **named) -> list:
        unknown = sorted(set(named) - set(self.input_names))
        if unknown:
            raise TypeError(f"model {self.program.name}: unknown input(s) {unknown}; inputs are {self.input_names}")
        return self._call(named)

    def export(self, path: str) -> str:
        raise InputError(f"model {self.program.name} is compiled at call time ({self.program.reason}); "
                         "give every input's shape to from_onnx(..., shapes=...) to compile a static "
                         "model that can be exported")

    # -- running -------------------------------------------------------------------------------
    def _call(self, named: dict) -> list:
        env = self.program.bind_inputs(named)
        return self._execute(self.program, ChainMap(env))

    def _execute(self, program: OnnxProgram, env: ChainMap) -> list:
        local = env.maps[0]
        k, n = 0, len(program.nodes)
        while k < n:
            segment = None if program.is_host(k, env) else self._specialized(program, k, env)
            if segment is None:
                self._host(program, k, env)
                k += 1
            else:
                self._run_segment(segment, env)
                k = segment[0].end
            for name in [m for m in local if program.last_use.get(m, -1) < k]:
                del local[name]
        return [_lookup(program, env, name) for name in program.output_names]

    def _specialized(self, program: OnnxProgram, start: int, env: ChainMap):
        """(Segment, Model or None) for the stretch at `start` given the env, compiled on a miss;
        None when the node at `start` must run on the host."""
        signatures = self._signatures.setdefault((id(program), start), [])
        for sig in signatures:
            key = _key(program, start, sig, env)
            found = self._compiled.get(key) if key is not None else None
            if found is not None:
                return found
        bound = set(signatures[-1][1]) if signatures else set()
        segment = program.plan(start, env, bound)
        if segment is None:
            return None
        model = self._compiled.compile(segment.graph) if segment.graph is not None else None
        sig = (segment.inputs, segment.bound)
        if sig not in signatures:
            signatures.append(sig)
        self._compiled.put(_key(program, start, sig, env), (segment, model))
        return segment, model

    def _run_segment(self, compiled: tuple, env: ChainMap) -> None:
        segment, model = compiled
        local = env.maps[0]
        if model is not None:
            outs = model(*[contiguous(env[name]) for name in segment.inputs])
            local.update(zip(segment.outputs, outs))
        local.update(segment.consts)
        for name, source in segment.aliases.items():
            local[name] = env[source]

    def _host(self, program: OnnxProgram, k: int, env: ChainMap) -> None:
        node = program.nodes[k]
        key = fe.op_key(node.op_type, node.domain)
        label = node.name or f"{node.op_type}_{k}"
        fn = HOST_OPS.get(key)
        if fn is None:
            kinds = sorted({type(env[i]).__name__ for i in node.input if i and i in env and
                            not isinstance(env[i], np.ndarray)})
            raise NotImplementedError(f"node {label} ({node.op_type}) reads a value that is not a numeric tensor "
                                      f"({', '.join(kinds) or 'strings'}); only the sequence, optional and "
                                      "string ops take such values")
        inputs = [_lookup(program, env, name) if name else None for name in node.input]
        attrs = program.node_attrs(k)
        domain = "" if node.domain in fe.DEFAULT_DOMAINS else node.domain

        def run_graph(graph, values: list) -> list:
            body = program.subprogram(graph)
            local = {spec.name: v for spec, v in zip(body.inputs, values)}
            return self._execute(body, ChainMap(local, program.initializers, env))

        ctx = HostContext(label, node.op_type, program.opsets.get(domain, 1), run_graph)
        outs = list(fn(ctx, inputs, attrs))     # one value per node output
        for name, value in zip(node.output, outs):
            if name:
                env.maps[0][name] = np.asarray(value) if isinstance(value, np.generic) else value


def _lookup(program: OnnxProgram, env, name: str):
    if name in program.initializers:
        return program.initializers[name]
    if name in env:
        return env[name]
    raise KeyError(f"{program.name}: {name!r} is read before it is defined")


def _key(program: OnnxProgram, start: int, sig: tuple, env) -> tuple | None:
    """What a specialization depends on: the shapes and dtypes of the values it reads, and the
    contents of those it reads as constants.  None when the env does not hold them all."""
    reads, bound = sig
    parts: list = []
    for name in reads:
        a = env.get(name)
        if not isinstance(a, np.ndarray):
            return None
        parts.append((a.shape, a.dtype))
    for name in bound:
        a = env.get(name)
        if not isinstance(a, np.ndarray):
            return None
        parts.append((a.shape, a.dtype, a.tobytes()))
    return (id(program), start, sig, tuple(parts))


class ShapeSpecializedModel:
    """A program with symbolic input dimensions (frontend.torch.TorchProgram) compiled once per
    concrete input shapes: `program.graph_for(shapes)` gives the static Graph, compiled on the
    first call with those shapes and kept in an LRU cache of `max_specializations` models."""

    def __init__(self, program: Any, options: dict, max_specializations: int = 64):
        self.program = program
        self._compiled = _Specializations(program.name, options, max_specializations)
        self.info = self._compiled.info

    @property
    def input_names(self) -> list[str]:
        return list(self.program.input_names)

    def __repr__(self) -> str:
        return f"ShapeSpecializedModel({self.program!r}, {self.info['specializations']} specialization(s))"

    def __call__(self, *arrays) -> list:
        names = self.input_names
        if len(arrays) != len(names):
            raise TypeError(f"model {self.program.name} takes {len(names)} input(s) ({', '.join(names)}), "
                            f"got {len(arrays)}")
        arrays = tuple(a.detach().numpy() if hasattr(a, "detach") else a for a in arrays)
        key = tuple(np.shape(a) for a in arrays)
        model = self._compiled.get(key)
        if model is None:
            model = self._compiled.compile(self.program.graph_for(list(key)))
            self._compiled.put(key, model)
        return model(*arrays)

    def run(self, **named) -> list:
        missing = [n for n in self.input_names if n not in named]
        unknown = sorted(set(named) - set(self.input_names))
        if missing or unknown:
            raise TypeError(f"model {self.program.name}: unknown input(s) {unknown}, missing {missing}; "
                            f"inputs are {self.input_names}")
        return self(*[named[n] for n in self.input_names])
