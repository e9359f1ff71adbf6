"""StagedModel: an OnnxProgram compiled stretch by stretch, at call time, and cached.

A model whose shapes are not all static (symbolic input dimensions, shapes that are input
values, control flow, sequences, data-dependent shapes) runs as a loop over its nodes
(frontend/onnx_program.py): each static stretch is specialized on the concrete shapes it reads
(and the values it reads as shapes), compiled by `driver.compile` into an ordinary Model once
per specialization, and run; host ops (If, Loop, Scan, sequences, NonZero, ...) run in between.
Specializations are kept in an LRU cache of `max_specializations` entries, so a model called
with batch 1, 4 and 16 compiles three times and then runs each as fast as a model compiled for
that shape.  Compiled kernels are also cached on disk, so a new process recompiles nothing.

A symbolic batch (the one symbol that leads the inputs' shapes) is cut into batch buckets where
a stretch keeps batch rows apart (batch_buckets.py): batch 7 runs as 4 + 2 + 1 on the
specializations for 4, 2 and 1, so a new batch size compiles nothing once its buckets exist.
"""
from __future__ import annotations

import dataclasses
import sys
import time
from collections import ChainMap, OrderedDict
from typing import Any, Sequence

import numpy as np

from . import batch_buckets as buckets
from .batch_buckets import DEFAULT_BATCH_BUCKETS, BatchSplit
from .errors import InputError
from .frontend import onnx as fe
from .frontend.onnx_host import HOST_OPS, HostContext, contiguous
from .frontend.onnx_program import OnnxProgram
from .frontend.torch_staged import host_calls, host_value
from .graph.passes.share_equal_params import SharedParams
from .sequence_buckets import SequencePadding, run_padded
from .target import Target


class _Specializations:
    """A model's compiled specializations by key, the least recently used dropped beyond `limit`.
    `info` counts what was compiled (and how long it took) and what was evicted."""

    def __init__(self, name: str, options: dict, limit: int):
        if limit < 1:
            raise ValueError(f"max_specializations must be at least 1, got {limit}")
        self.name, self.options, self.limit = name, dict(options), limit
        self.entries: OrderedDict = OrderedDict()
        self.info: dict[str, Any] = {"specializations": 0, "compile_seconds": 0.0, "evicted": 0}
        self.params = SharedParams()

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
        from .driver import sharing_params
        began = time.perf_counter()
        with sharing_params(self.params):          # equal weights held once across specializations
            model = compile_graph(graph, **self.options)
        self.info["compile_seconds"] += time.perf_counter() - began
        self.info["specializations"] += 1
        if self.info["specializations"] == 2 * self.limit:
            print(f"tensorforge: model {self.name} has compiled {self.info['specializations']} "
                  "specializations; its inputs change shape often (see max_specializations)", file=sys.stderr)
        return model


class _GenericStretches:
    """The stretches of a staged model that run on shape-generic kernels (shape_generic.py):
    a stretch compiled for one shape that meets another of the same structure, made of
    injective ops and reductions only, is compiled once more with shape variables for the
    dimensions that differ, and serves every later shape that fits it."""

    SEEN = 8       # shapes remembered per stretch and structure

    def __init__(self, target, enabled: bool = True):
        self.target, self.enabled = target, enabled
        self.seen: dict[tuple, list] = {}          # where -> [(structure, input shapes, bound values)]
        self.runners: dict[tuple, list] = {}       # where -> [(segment, GenericStretch, bound values)]
        self.refused: set = set()                  # (where, structure) that cannot run generic
        self.info: dict[str, Any] = {"enabled": enabled, "stretches": 0, "calls": 0, "not_generic": {}}

    def find(self, where: tuple, env) -> tuple | None:
        for segment, runner, bound in self.runners.get(where, ()):
            arrays = [env.get(name) for name in segment.inputs]
            if runner.accepts(arrays) and _same_arrays({name: env.get(name) for name in bound}, bound):
                self.info["calls"] += 1
                return segment, runner
        return None

    def make(self, where: tuple, segment, env, label: str) -> tuple | None:
        """(segment, GenericStretch) when `segment` (just planned, not compiled) has a generic
        form; otherwise None, after remembering its shapes for a later call.  `label` names the
        stretch in info["not_generic"] when it is refused."""
        from . import shape_generic
        if not self.enabled or segment.graph is None or segment.consts or not shape_generic.candidate(segment.graph):
            return None
        if Target.parse(self.target).template_suffix != "cpu":
            return None          # the generic schedule is for CPU kernels; GPU stretches stay specialized
        structure = shape_generic.structure_key(segment.graph)
        if (where, structure) in self.refused:
            return None
        shapes = [tuple(v.shape) for v in segment.graph.inputs]
        bound = {name: np.array(env[name]) for name in segment.bound}
        seen = self.seen.setdefault(where, [])
        earlier = next((old for s, old, b in seen if s == structure and old != shapes and _same_arrays(b, bound)), None)
        dims = shape_generic.varying_dims(earlier, shapes) if earlier is not None else {}
        if earlier is None or any(shapes[k][axis] < shape_generic.MIN_SIZE for k, axis in dims):
            seen.append((structure, shapes, bound))
            del seen[:-self.SEEN]
            return None
        try:
            runner = shape_generic.GenericStretch(segment.graph, dims, self.target)
        except shape_generic.NotGeneric as err:
            self.refused.add((where, structure))
            self.info["not_generic"][label] = str(err)
            return None
        segment = dataclasses.replace(segment, graph=None)
        self.runners.setdefault(where, []).append((segment, runner, bound))
        self.info["stretches"] += 1
        self.info["calls"] += 1
        return segment, runner


def _same_arrays(a: dict, b: dict) -> bool:
    """The same names holding equal arrays (the values a stretch read as constants)."""
    return a.keys() == b.keys() and all(np.array_equal(np.asarray(a[k]), b[k]) for k in a)


class StagedModel:
    """`model(*inputs)` or `model.run(name=value)` -> list of outputs in graph order.  Inputs
    are NumPy arrays (lists of arrays for sequence inputs, None for an absent optional)."""

    def __init__(self, program: OnnxProgram, options: dict, max_specializations: int = 64,
                 batch_buckets: Sequence[int] | None = DEFAULT_BATCH_BUCKETS, sequence_buckets: Any = "auto",
                 pad_values: dict | None = None, shape_generic: bool = True):
        self.program = program
        self._padding = SequencePadding.make(
            program.name, [(s.name, s.dims) for s in program.inputs if s.kind == "tensor"],
            sequence_buckets, pad_values, buckets.leading_symbol(program), max_specializations)
        self._compiled = _Specializations(program.name, options, max_specializations)
        self._signatures: dict[tuple, list] = {}
        # where a node found no static form at the start of a stretch (NonZero of data, an If on
        # a data condition): it runs on the host on every call, without converting it again
        self._on_host: set[tuple] = set()
        self.batch_buckets = buckets.checked_buckets(batch_buckets)
        self._batch = buckets.leading_symbol(program) if self.batch_buckets else None
        self._batch_input = next((s.name for s in program.inputs if s.kind == "tensor" and s.dims
                                  and s.dims[0] == self._batch), None) if self._batch is not None else None
        self._splits: dict[tuple, BatchSplit | str] = {}
        self._generic = _GenericStretches(options.get("target", "c"), enabled=shape_generic)
        self.info = self._compiled.info
        self.info.update(staged=program.reason, target=options.get("target", "c"))
        self.info["batch_split"] = {"symbol": self._batch, "calls": 0, "not_split": {}, "runs_as": {}}
        self.info["shape_generic"] = self._generic.info
        if self._padding is not None:
            self.info["sequence_buckets"] = self._padding.describe()

    @property
    def input_names(self) -> list[str]:
        return [s.name for s in self.program.inputs]

    @property
    def output_names(self) -> list[str]:
        return list(self.program.output_names)

    def __repr__(self) -> str:
        generic = self.info["shape_generic"]["stretches"]
        return (f"StagedModel({self.program.name}, {len(self.program.inputs)} input(s), "
                f"{self.info['specializations']} specialization(s) compiled"
                f"{f', {generic} shape-generic stretch(es)' if generic else ''})")

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
        return run_padded(self._padding, env, self._run_env, self.info)

    def _run_env(self, env: dict) -> list:
        rows = np.shape(env[self._batch_input])[0] if self._batch_input is not None else None
        return self._execute(self.program, ChainMap(env), rows if rows and rows not in self.batch_buckets else None)

    def _execute(self, program: OnnxProgram, env: ChainMap, rows: int | None = None) -> list:
        """Runs the program's nodes; `rows`: the call's batch when it is not a bucket (None: run
        whole), for the stretches that keep batch rows apart."""
        local = env.maps[0]
        k, n = 0, len(program.nodes)
        while k < n:
            host = program.is_host(k, env)
            # a stretch on shape-generic kernels runs whole at any batch size
            generic = self._generic.find((id(program), k), env) if rows and not host else None
            found = self._split(program, k, env, rows) if rows and not host and generic is None else None
            if generic is not None:
                self._run_segment(generic, env)
                k = generic[0].end
            elif found is not None and rows:
                self._run_split(program, k, env, rows, *found)
                k = found[0].stretch.end
            else:
                segment = None if host else self._specialized(program, k, env)
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
        where = (id(program), start)
        if where in self._on_host:
            return None
        signatures = self._signatures.setdefault(where, [])
        for sig in signatures:
            key = _key(program, start, sig, env)
            found = self._compiled.get(key) if key is not None else None
            if found is not None:
                return found
        found = self._generic.find(where, env)
        if found is not None:
            return found
        bound = set(signatures[-1][1]) if signatures else set()
        segment = program.plan(start, env, bound)
        if segment is None:
            if not signatures:      # no value it reads was ever bound: the node itself needs the host
                self._on_host.add(where)
            return None
        found = self._generic.make(where, segment, env, f"{program.name} node {start}")
        if found is not None:
            return found
        model = self._compiled.compile(segment.graph) if segment.graph is not None else None
        # the converted graph (its own copies of derived weights) is not needed to run the model
        segment = dataclasses.replace(segment, graph=None)
        sig = (segment.inputs, segment.bound)
        if sig not in signatures:
            signatures.append(sig)
        self._compiled.put(_key(program, start, sig, env), (segment, model))
        return segment, model

    def _split(self, program: OnnxProgram, start: int, env: ChainMap, rows: int) -> tuple | None:
        """(the batch split of the stretch at `start`, the plan to run it with) when the stretch
        keeps batch rows apart at every size the plan needs, else None; judged once per stretch
        and shape pattern (batch_buckets.py)."""
        signatures = self._signatures.setdefault((id(program), start), [])
        found = None
        for sig in signatures:
            key = _key(program, start, sig, env, batch_rows=rows)
            if key is not None and key in self._splits:
                found = self._splits[key]
                break
        if found is None:
            bound = set(signatures[-1][1]) if signatures else set()
            segment = program.plan(start, env, bound)
            if segment is None:
                return None
            sig = (segment.inputs, segment.bound)
            if sig not in signatures:
                signatures.append(sig)
            found = buckets.judge_stretch(segment, env, rows)
            key = _key(program, start, sig, env, batch_rows=rows)
            if key is not None:
                self._splits[key] = found
            if isinstance(found, str):
                self.info["batch_split"]["not_split"][start] = found
        if isinstance(found, str):
            return None
        names = buckets.split_names(found)

        def compiled(size: int) -> bool:
            # shapes only: views of `size` rows (no copy), for the specializations' keys
            sub = env.new_child({n: np.broadcast_to(env[n][:1], (size, *np.shape(env[n])[1:])) for n in names})
            return any(self._compiled.entries.get(_key(program, start, sig, sub)) is not None for sig in signatures)

        plan = found.choose(rows, self.batch_buckets, buckets.stretch_converter(found, program, start, env), compiled)
        if plan is None:
            self.info["batch_split"]["not_split"][start] = "the stretch converts to another graph at some sizes"
            return None
        return found, plan

    def _run_split(self, program: OnnxProgram, start: int, env: ChainMap, rows: int, split: BatchSplit,
                   plan: buckets.Plan) -> None:
        """The stretch run once per chunk of the plan, on the specialization for that chunk's
        bucket; outputs concatenated along the batch axis (a padded chunk's extra rows dropped)."""
        stretch = split.stretch
        parts: dict[str, list] = {name: [] for name in stretch.outputs}
        names = buckets.split_names(split)
        lo, seconds = 0, []
        for size, used in plan:
            sub = buckets.cut(env, names, lo, lo + used, size)
            segment, model = self._specialized(program, start, sub)
            if segment.end != stretch.end or set(segment.outputs) != set(parts):    # fits() planned it
                raise RuntimeError(f"{program.name}: the stretch at node {start} changed when cut to {size} rows")
            args = [contiguous(sub[name]) for name in segment.inputs]
            outs, took = split.timed(rows, size, model, *args)
            seconds.append(took)
            for name, out in zip(segment.outputs, outs):
                parts[name].append(out[:used] if used < size else out)
            lo += used
        split.record(rows, plan, seconds)
        self.info["batch_split"]["runs_as"][rows] = buckets.describe(split.best(rows))
        local = env.maps[0]
        for name, part in parts.items():
            local[name] = np.concatenate(part, axis=0) if len(part) > 1 else part[0]
        for name, source in stretch.aliases.items():
            local[name] = env[source]
        self.info["batch_split"]["calls"] += 1

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


def _key(program: OnnxProgram, start: int, sig: tuple, env, batch_rows: int | None = None) -> tuple | None:
    """What a specialization depends on: the shapes and dtypes of the values it reads, and the
    contents of those it reads as constants.  None when the env does not hold them all.  With
    `batch_rows`, a leading dimension of that many rows is left out (the key of a batch split,
    which holds for any batch size)."""
    reads, bound = sig
    parts: list = []
    for name in reads:
        a = env.get(name)
        if not isinstance(a, np.ndarray):
            return None
        shape = a.shape
        if batch_rows is not None and shape and shape[0] == batch_rows:
            shape = (None, *shape[1:])
        parts.append((shape, a.dtype))
    for name in bound:
        a = env.get(name)
        if not isinstance(a, np.ndarray):
            return None
        parts.append((a.shape, a.dtype, a.tobytes()))
    return (id(program), start, sig, tuple(parts))


class ShapeSpecializedModel:
    """A program with symbolic input dimensions (frontend.torch.TorchProgram) compiled once per
    concrete input shapes: `program.graph_for(shapes)` gives the static Graph, compiled on the
    first call with those shapes and kept in an LRU cache of `max_specializations` models.  A
    symbolic batch runs in batch buckets where the graph keeps batch rows apart, as in
    StagedModel (batch_buckets.py)."""

    def __init__(self, program: Any, options: dict, max_specializations: int = 64,
                 batch_buckets: Sequence[int] | None = DEFAULT_BATCH_BUCKETS, sequence_buckets: Any = "auto",
                 pad_values: dict | None = None):
        self.program = program
        self._compiled = _Specializations(program.name, options, max_specializations)
        self.info = self._compiled.info
        self._values = set(getattr(program, "value_inputs", {}))
        # symbols by the names of the user's torch.export.Dims where known ("seq", not "s27")
        names = getattr(program, "dim_names", {})
        dims = [(name, tuple(d if isinstance(d, int) else names.get(str(d), str(d)) for d in shape))
                for name, shape, _ in program.specs]
        leading = {d[0] for _, d in dims if d and isinstance(d[0], str)}
        self._padding = SequencePadding.make(program.name, dims, sequence_buckets, pad_values,
                                             next(iter(leading)) if len(leading) == 1 else None, max_specializations)
        if self._padding is not None:
            self.info["sequence_buckets"] = self._padding.describe()
        self.batch_buckets = buckets.checked_buckets(batch_buckets)
        leading = {str(dims[0]): k for k, (_, dims, _) in enumerate(program.specs)
                   if dims and not isinstance(dims[0], int)}
        self._batch = next(iter(leading.values())) if len(leading) == 1 and self.batch_buckets else None
        self._splits: dict[tuple, BatchSplit | str] = {}
        self.info["batch_split"] = {"symbol": next(iter(leading)) if self._batch is not None else None,
                                    "calls": 0, "not_split": {}, "runs_as": {}}

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
        if self._padding is None:
            return self._run_arrays(arrays)
        return run_padded(self._padding, dict(zip(names, map(np.asarray, arrays))),
                           lambda d: self._run_arrays(tuple(d[n] for n in names)), self.info)

    def _key(self, arrays: Sequence) -> tuple:
        """What a specialization depends on: the inputs' shapes, and the values of the inputs
        that are symbols (a staged program's `.item()`, read by the graph as a constant)."""
        if not self._values:
            return tuple(np.shape(a) for a in arrays)
        return tuple(("=", int(a)) if k in self._values else np.shape(a) for k, a in enumerate(arrays))

    def _tensors(self, arrays: Sequence) -> list:
        """The arrays the compiled graph takes: the value inputs are constants in it."""
        return [a for k, a in enumerate(arrays) if k not in self._values]

    def _run_arrays(self, arrays: tuple) -> list:
        key = self._key(arrays)
        model = self._compiled.get(key)
        if model is None:
            found = self._split(key)
            if found is not None:
                return self._run_split(arrays, key[self._batch][0], *found)
            model = self._specialized(key)
        return model(*self._tensors(arrays)) if self._values else model(*arrays)

    def _specialized(self, key: tuple):
        model = self._compiled.get(key)
        if model is None:
            model = self._compiled.compile(self.program.graph_for(list(key)))
            self._compiled.put(key, model)
        return model

    def _split(self, key: tuple) -> tuple | None:
        """(the batch split for input shapes `key`, the plan to run it with) when the batch is not
        a bucket and the graph keeps its rows apart at every size the plan needs, else None."""
        if self._batch is None:
            return None
        rows = key[self._batch][0]
        if not rows or rows in self.batch_buckets:
            return None
        positions = buckets.batch_inputs(key, rows)
        general = tuple((None, *shape[1:]) if k in positions else shape for k, shape in enumerate(key))
        found = self._splits.get(general)
        if found is None:
            try:
                graph = self.program.graph_for(list(key))
            except ValueError:         # shapes the program refuses: the plain path says why
                return None
            found = self._splits[general] = buckets.judge_graph(graph, positions, rows)
            if isinstance(found, str):
                self.info["batch_split"]["not_split"]["graph"] = found
        if isinstance(found, str):
            return None

        def convert(size: int):
            try:
                return self.program.graph_for([(size, *shape[1:]) if k in positions else shape
                                               for k, shape in enumerate(key)])
            except ValueError:
                return None

        def compiled(size: int) -> bool:
            return tuple((size, *shape[1:]) if k in positions else shape
                         for k, shape in enumerate(key)) in self._compiled.entries

        plan = found.choose(rows, self.batch_buckets, convert, compiled)
        if plan is None:
            self.info["batch_split"]["not_split"]["graph"] = "the graph converts to another graph at some sizes"
            return None
        return found, plan

    def _run_split(self, arrays: tuple, rows: int, split: BatchSplit, plan: buckets.Plan) -> list:
        parts: list[list] = []
        lo, seconds = 0, []
        for size, used in plan:
            sub = [buckets.padded(a[lo:lo + used], size) if k in split.inputs else a for k, a in enumerate(arrays)]
            model = self._specialized(self._key(sub))
            outs, took = split.timed(rows, size, model, *self._tensors(sub))
            seconds.append(took)
            parts = parts or [[] for _ in outs]
            for part, out in zip(parts, outs):
                part.append(out[:used] if used < size else out)
            lo += used
        split.record(rows, plan, seconds)
        self.info["batch_split"]["runs_as"][rows] = buckets.describe(split.best(rows))
        self.info["batch_split"]["calls"] += 1
        return [np.concatenate(part, axis=0) if len(part) > 1 else part[0] for part in parts]

    def run(self, **named) -> list:
        return run_named(self, named)


class StagedTorchModel:
    """`model(*arrays)` -> list of outputs: the stages of a StagedTorchProgram
    (frontend/torch_staged.py: an exported PyTorch program with sizes only the data gives) run in
    order, each stretch on a ShapeSpecializedModel, the data-dependent ops in NumPy between them."""

    def __init__(self, program: Any, options: dict, max_specializations: int = 64,
                 batch_buckets: Sequence[int] | None = DEFAULT_BATCH_BUCKETS):
        self.program = program
        self._models = [ShapeSpecializedModel(st.program, options, max_specializations, batch_buckets=batch_buckets,
                                              sequence_buckets=None) if st.program is not None else None
                        for st in program.stages]
        self._dtypes = [np.dtype(dt) for _, _, dt in program.specs]
        self._consts = {k: v[1] for k, v in program.bindings.items() if v[0] == "const"}
        # input shapes with no symbol are compared as tuples (symbols_for works through sympy)
        static = [dims for _, dims, _ in program.specs]
        self._static = static if all(isinstance(d, int) for dims in static for d in dims) else None
        self._hosts = [host_calls(st) for st in program.stages]

    @property
    def input_names(self) -> list[str]:
        return list(self.program.input_names)

    @property
    def info(self) -> dict:
        """Per stage, its compiled specializations and how calls ran (ShapeSpecializedModel.info)."""
        return {"stages": [m.info if m is not None else None for m in self._models],
                "host_ops": list(self.program.host_ops),
                "specializations": sum(m.info["specializations"] for m in self._models if m is not None)}

    def __repr__(self) -> str:
        return (f"StagedTorchModel({self.program.name}, {len(self._models)} stage(s), "
                f"{self.info['specializations']} specialization(s) compiled)")

    def __call__(self, *arrays) -> list:
        names = self.input_names
        if len(arrays) != len(names):
            raise TypeError(f"model {self.program.name} takes {len(names)} input(s) ({', '.join(names)}), "
                            f"got {len(arrays)}")
        arrays = tuple(np.asarray(a.detach().numpy() if hasattr(a, "detach") else a) for a in arrays)
        if self._static is None or any(a.shape != dims for a, dims in zip(arrays, self._static)):
            try:
                self.program.symbols_for([a.shape for a in arrays])
            except ValueError as err:
                raise InputError(f"model {self.program.name}: {err}") from None
        for name, a, want in zip(names, arrays, self._dtypes):
            if a.dtype != want:
                raise TypeError(f"input {name!r}: expected dtype {want.name}, got {a.dtype.name}")
        env: dict[str, Any] = dict(zip(names, arrays))
        for stage, model, hosts in zip(self.program.stages, self._models, self._hosts):
            if model is not None:
                outs = model(*[env[name] for name in stage.inputs])
                env.update(zip(stage.outputs, outs))
            for name, fn, args in hosts:
                env[name] = fn(*[host_value(a, env, self._consts) for a in args])
        return [contiguous(host_value(o, env, self._consts)) for o in self.program.outputs]

    def run(self, **named) -> list:
        return run_named(self, named)


def run_named(model: Any, named: dict) -> list:
    """`model(*inputs)` with the inputs given by name: every input named, no unknown name."""
    names = model.input_names
    missing = [n for n in names if n not in named]
    unknown = sorted(set(named) - set(names))
    if missing or unknown:
        raise TypeError(f"model {model.program.name}: unknown input(s) {unknown}, missing {missing}; "
                        f"inputs are {names}")
    return model(*[named[n] for n in names])
