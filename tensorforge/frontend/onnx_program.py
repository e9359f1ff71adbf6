"""An ONNX graph that is not one static graph, cut into stretches at call time.

`from_onnx` returns an OnnxProgram when the model's shapes do not all follow from static input
shapes: symbolic or unknown input dimensions, shapes computed from input values (a Reshape whose
shape is an input), control flow, sequences, optionals, strings, or ops whose output shape
depends on the data.  The program keeps the ONNX nodes; the staged model (staged.py) runs it:

    position = 0
    while position < len(nodes):
        the node at `position` runs on the host (If, Loop, SequenceAt, NonZero of a computed
        tensor, ...), or
        `plan(position, env)` converts the longest stretch of nodes from there that is static
        given the concrete values known so far (their shapes, and the values of the few that
        are read as shapes, axes or counts), which is compiled once per such specialization.

Everything downstream of a value whose shape depends on data is specialized on that shape once
it is known, so every stretch is an ordinary static Graph: kernels, fusion, memory plan and
tuning records apply unchanged.  Symbolic dimensions are checked at each call (a symbol has one
value across the inputs).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..graph.builder import GraphBuilder, RuntimeValueError
from ..graph.ir import Graph, GraphError, Value
from ..ir.dtype import SCALAR_TYPES
from . import onnx as fe
from .onnx_host import HOST_OPS


@dataclass(frozen=True)
class InputSpec:
    """A model input as the model declares it.  `kind` is "tensor", "sequence" or "optional";
    `dtype` a NumPy dtype name ("object" for strings; None when undeclared); `dims` one entry
    per dimension, an int, a symbol name or None (unknown), or None for no shape at all."""
    name: str
    kind: str
    dtype: str | None
    dims: tuple | None

    def shape_text(self) -> str:
        if self.dims is None:
            return "(any shape)"
        return "[" + ", ".join("?" if d is None else str(d) for d in self.dims) + "]"


@dataclass(frozen=True)
class Segment:
    """Nodes [start, end) as one static graph.  `graph` takes the env values `inputs` (in its
    input order) and returns the values `outputs`; `consts` are outputs that folded to
    constants, `aliases` outputs that are one of the inputs.  `graph` is None when every output
    folded (the constants still depend on the shapes of `inputs`).  `bound` names the env values that were read as constants (shapes, axes, ...): a
    specialization holds only for the same values of those."""
    start: int
    end: int
    graph: Graph | None
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    consts: dict = field(default_factory=dict)
    aliases: dict = field(default_factory=dict)
    bound: tuple[str, ...] = ()


class _Rebind(Exception):
    def __init__(self, name: str):
        self.name = name


# ops whose two calls on the same inputs may differ
_NONDETERMINISTIC = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
                     "Bernoulli"}


def _merge_repeats(nodes: list, outputs: list[str]) -> list:
    """`nodes` with each node that repeats an earlier one (the same op on the same inputs with the
    same attributes: exporters write `torch.nonzero(mask)` twice where a module selects with the
    mask and also returns its indices) dropped, and later nodes reading the earlier one's outputs
    instead, so a host op runs once and the stretches around it stay whole.  A repeated output
    that is a graph output, or that a body graph reads by name, stays defined by an Identity of
    the first.  Ops without a converter (sequences, strings), ops with body graphs, random draws
    and constants are left as they are."""
    import onnx
    from onnx import AttributeProto, helper
    keep_names = set(outputs)
    for node in nodes:
        keep_names |= _free_names(node)
    seen: dict[tuple, Any] = {}
    rename: dict[str, str] = {}
    merged: list = []
    for node in nodes:
        if any(n in rename for n in node.input):
            copy = onnx.NodeProto()
            copy.CopyFrom(node)
            copy.input[:] = [rename.get(n, n) for n in node.input]
            node = copy
        key = None
        if (node.input and node.op_type not in _NONDETERMINISTIC and all(node.output)
                and fe.op_key(node.op_type, node.domain) in fe._CONVERTERS
                and not any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in node.attribute)):
            key = (node.domain, node.op_type, tuple(node.input),
                   tuple(sorted((a.name, a.SerializeToString()) for a in node.attribute)))
        first = seen.get(key) if key is not None else None
        if first is None:
            if key is not None:
                seen[key] = node
            merged.append(node)
            continue
        for k, (src, dst) in enumerate(zip(first.output, node.output)):
            if dst in keep_names:
                merged.append(helper.make_node("Identity", [src], [dst], name=f"{node.name or node.op_type}_repeat{k}"))
            else:
                rename[dst] = src
    return merged


class _Cut(Exception):
    def __init__(self, index: int):
        self.index = index


def _tensor_kind(value: Any) -> str:
    """"tensor" for a numeric NumPy array, else what the value is ("sequence", "none",
    "string", ...): only numeric tensors enter compiled stretches."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "biuf" and value.dtype.itemsize <= 8:   # the common case, no name lookup
            return "tensor"
        return "tensor" if value.dtype.name in SCALAR_TYPES else "string" if value.dtype.kind in "OUS" \
            else value.dtype.name
    if isinstance(value, list):
        return "sequence"
    return "none" if value is None else type(value).__name__


class OnnxProgram:
    """An ONNX graph (a model's or a subgraph's) with what staging needs precomputed."""

    def __init__(self, graph, opsets: dict, name: str, initializers: dict, inputs: list[InputSpec],
                 reason: str = "", outer: bool = False):
        self.proto = graph
        self.opsets = opsets
        self.name = name
        self.output_names = [o.name for o in graph.output]
        self.nodes = _merge_repeats(list(graph.node), self.output_names)
        self.initializers = initializers
        self.inputs = inputs
        self.reason = reason
        self.is_subgraph = outer
        self._free: dict[int, tuple[str, ...]] = {}
        self.last_use = self._last_uses()
        self._subprograms: dict[int, OnnxProgram] = {}
        self._attrs: dict[int, dict] = {}
        self._reads: dict[int, tuple[bool, tuple[str, ...]]] = {}    # is_host's per-node facts

    # -- construction --------------------------------------------------------------------------
    @classmethod
    def from_model(cls, model, shapes: dict | None = None, constants: dict | None = None,
                   name: str | None = None, reason: str = "") -> "OnnxProgram":
        g = model.graph
        inits = {i.name: fe.initializer_array(i) for i in g.initializer}
        inits.update({n: np.asarray(v) for n, v in (constants or {}).items()})
        specs = [_input_spec(i, (shapes or {}).get(i.name)) for i in g.input if i.name not in inits]
        return cls(g, fe.model_opsets(model), name or g.name or "model", inits, specs, reason)

    def subprogram(self, graph) -> "OnnxProgram":
        """The program of a body graph (If branch, Loop or Scan body), built once per graph."""
        key = id(graph)
        if key not in self._subprograms:
            inits = {i.name: fe.initializer_array(i) for i in graph.initializer}
            specs = [_input_spec(i, None) for i in graph.input if i.name not in inits]
            self._subprograms[key] = OnnxProgram(graph, self.opsets, f"{self.name}_{graph.name or 'body'}",
                                                 inits, specs, outer=True)
        return self._subprograms[key]

    def node_attrs(self, index: int) -> dict:
        """Node `index`'s attributes as Python values, decoded once (a Loop body's host ops
        would otherwise decode them again on every iteration)."""
        if index not in self._attrs:
            self._attrs[index] = {a.name: fe._attr_value(a) for a in self.nodes[index].attribute}
        return self._attrs[index]

    def _last_uses(self) -> dict[str, int]:
        """For each name: the last node position that reads it (len(nodes) for graph outputs).
        A body graph's reads of the enclosing scope count as reads by the node holding it."""
        last: dict[str, int] = {}
        for k, node in enumerate(self.nodes):
            for name in (*node.input, *self.free_names(k)):
                if name:
                    last[name] = k
        for name in self.output_names:
            last[name] = len(self.nodes)
        return last

    def __repr__(self) -> str:
        ins = ", ".join(f"{s.name}: {s.dtype or '?'}{s.shape_text()}" for s in self.inputs)
        return f"OnnxProgram({self.name}, inputs [{ins}], {len(self.nodes)} nodes, staged: {self.reason})"

    # -- calls ---------------------------------------------------------------------------------
    def bind_inputs(self, arrays: dict) -> dict:
        """The call's inputs by name, converted (torch tensors, lists) and checked against the
        declared kinds, dtypes and dimensions; a symbol must have one value in all inputs."""
        symbols: dict[str, tuple[int, str]] = {}
        env: dict = {}
        for spec in self.inputs:
            value = arrays.get(spec.name)
            env[spec.name] = _checked(spec, value, symbols)
        return env

    def is_host(self, index: int, env) -> bool:
        """Whether node `index` runs on the host: it has no converter, or it reads a value that
        is not a numeric tensor (a sequence, an absent optional, strings, a string initializer)."""
        if index not in self._reads:
            node = self.nodes[index]
            names = [n for n in (*node.input, *self.free_names(index)) if n]
            static = fe.op_key(node.op_type, node.domain) not in fe._CONVERTERS or any(
                n in self.initializers and _tensor_kind(self.initializers[n]) == "string" for n in names)
            self._reads[index] = (static, tuple(n for n in names if n not in self.initializers))
        static, reads = self._reads[index]
        return static or any(n in env and _tensor_kind(env[n]) != "tensor" for n in reads)

    def free_names(self, index: int) -> tuple[str, ...]:
        """The enclosing-scope names node `index`'s body graphs read (none for most nodes)."""
        if index not in self._free:
            self._free[index] = tuple(sorted(_free_names(self.nodes[index])))
        return self._free[index]

    def plan(self, start: int, env, bound: set[str]) -> Segment | None:
        """The longest static stretch from node `start` given the values in `env`, or None when
        that node must run on the host (its output shape depends on the values it reads).
        Names whose values had to be read as constants are added to `bound` (and the stretch
        rebuilt)."""
        stop: int | None = None
        while True:
            try:
                return self._convert(start, env, bound, stop)
            except _Rebind as r:
                bound.add(r.name)
            except _Cut as c:
                stop = c.index

    def _convert(self, start: int, env, bound: set[str], stop: int | None) -> Segment | None:
        b = GraphBuilder(f"{self.name}_{start}")
        values: dict[str, Value | None] = {"": None}
        inputs: list[str] = []
        produced: list[str] = []
        origin: dict[Value, str] = {}

        def lookup(name: str) -> Value | None:
            if name == "":
                return None
            if name in values:
                return values[name]
            if name in self.initializers:
                v = b.const(self.initializers[name], name=name)
            elif name in env:
                arr = env[name]
                if _tensor_kind(arr) != "tensor":
                    raise GraphError(f"{name!r} is a {_tensor_kind(arr)}, which only host ops read")
                v = b.const(arr, name=name) if name in bound else b.input(name, arr.shape, arr.dtype.name)
                if name not in bound:
                    inputs.append(name)
            else:
                raise GraphError(f"{self.name}: {name!r} is read before it is defined")
            values[name] = v
            origin[v] = name
            return v

        end = stop if stop is not None else len(self.nodes)
        k = start
        while k < end:
            node = self.nodes[k]
            if self.is_host(k, env):
                if k == start:
                    raise GraphError(f"node {k} runs on the host")   # the caller checks is_host first
                break
            label = node.name or f"{node.op_type}_{k}"
            for n in (*node.input, *self.free_names(k)):     # an If branch reads the enclosing scope
                lookup(n)
            try:
                outs = fe.convert_node(b, values, node, label, self.opsets)
            except RuntimeValueError as err:
                name = origin.get(err.value)
                if name is not None and name in inputs:
                    raise _Rebind(name) from None
                if k == start:
                    if fe.op_key(node.op_type, node.domain) in HOST_OPS:
                        return None          # an If whose condition is data: the host runs it
                    raise
                raise _Cut(k) from None
            except fe.RunOnHost:
                if k == start:
                    if fe.op_key(node.op_type, node.domain) in HOST_OPS:
                        return None
                    raise
                raise _Cut(k) from None
            for oname, v in zip(node.output, outs):
                if oname:
                    values[oname] = v
                    produced.append(oname)
                    if v is not None:
                        origin.setdefault(v, oname)
            k += 1
        return self._segment(b, start, k, values, inputs, produced, bound)

    def _segment(self, b: GraphBuilder, start: int, end: int, values: dict, inputs: list[str],
                 produced: list[str], bound: set[str]) -> Segment:
        """Outputs are the produced values read at or after `end` (or graph outputs)."""
        input_values = {values[n]: n for n in inputs}
        live = [n for n in dict.fromkeys(produced) if self.last_use.get(n, -1) >= end and values[n] is not None]
        consts, aliases, outs = {}, {}, []
        for n in live:
            v = values[n]
            if v in b.params:
                consts[n] = b.params[v]
            elif v in input_values:
                aliases[n] = input_values[v]
            else:
                outs.append(n)
        graph = fe.with_output_names(b, [(n, values[n]) for n in outs]) if outs else None
        return Segment(start, end, graph, tuple(inputs), tuple(outs), consts, aliases, tuple(sorted(bound)))


def _free_names(node) -> set[str]:
    """Names a node's body graphs read from the enclosing scope."""
    import onnx
    names: set[str] = set()
    for a in node.attribute:
        graphs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs) \
            if a.type == onnx.AttributeProto.GRAPHS else []
        for g in graphs:
            names |= graph_free_names(g)
    return names


def graph_free_names(graph) -> set[str]:
    """Names that `graph` (with its nested bodies) reads but does not define."""
    defined = {i.name for i in graph.input} | {i.name for i in graph.initializer} | {""}
    free: set[str] = set()
    for node in graph.node:
        for n in list(node.input) + sorted(_free_names(node)):
            if n not in defined:
                free.add(n)
        defined.update(node.output)
    free |= {o.name for o in graph.output if o.name not in defined}
    return free


def _input_spec(inp, given) -> InputSpec:
    """What the model declares about an input (a shape given to from_onnx replaces its dims)."""
    import onnx
    t = inp.type
    which = t.WhichOneof("value")
    if which == "sequence_type":
        return InputSpec(inp.name, "sequence", None, None)
    if which == "optional_type":
        return InputSpec(inp.name, "optional", None, None)
    if which != "tensor_type":
        return InputSpec(inp.name, which or "tensor", None, None)
    tt = t.tensor_type
    if tt.elem_type == onnx.TensorProto.STRING:
        dtype: str | None = "object"
    elif tt.elem_type:
        dtype = fe._np_dtype(tt.elem_type)
    else:
        dtype = None
    if given is not None:
        return InputSpec(inp.name, "tensor", dtype, tuple(int(d) for d in given))
    if not tt.HasField("shape"):
        return InputSpec(inp.name, "tensor", dtype, None)
    dims = tuple(int(d.dim_value) if d.HasField("dim_value") and d.dim_value >= 0
                 else (d.dim_param or None) for d in tt.shape.dim)
    return InputSpec(inp.name, "tensor", dtype, dims)


def _checked(spec: InputSpec, value: Any, symbols: dict) -> Any:
    """`value` for input `spec`, converted to what the program runs on, or a clear error."""
    if spec.kind == "sequence":
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"input {spec.name!r} is a sequence: pass a list of arrays, got {type(value).__name__}")
        return [_as_array(spec.name, v) for v in value]
    if spec.kind == "optional":
        if value is None:
            return None
        if isinstance(value, (list, tuple)):
            return [_as_array(spec.name, v) for v in value]
        return _as_array(spec.name, value)
    if value is None:
        raise TypeError(f"input {spec.name!r} is required")
    if spec.dtype == "object" and isinstance(value, (str, list, tuple)):
        value = np.array(value, dtype=object)       # Python strings for a string input
    a = _as_array(spec.name, value)
    if spec.dtype is not None:
        if spec.dtype == "object":
            if a.dtype.kind not in "OUS":
                raise TypeError(f"input {spec.name!r}: expected strings, got dtype {a.dtype.name}")
            a = a.astype(object)
        elif _dtype_name(a.dtype) != spec.dtype:
            raise TypeError(f"input {spec.name!r}: expected dtype {spec.dtype}, got {a.dtype.name}")
    if spec.dims is None:
        return a
    if a.ndim != len(spec.dims):
        raise ValueError(f"input {spec.name!r}: expected shape {spec.shape_text()}, got {a.shape}")
    for axis, (want, got) in enumerate(zip(spec.dims, a.shape)):
        if isinstance(want, int) and want != got:
            raise ValueError(f"input {spec.name!r}: expected shape {spec.shape_text()}, got {a.shape}")
        if isinstance(want, str):
            seen = symbols.setdefault(want, (got, spec.name))
            if seen[0] != got:
                raise ValueError(f"input {spec.name!r}: dimension {axis} is {want}, which is {seen[0]} in "
                                 f"input {seen[1]!r}, but {got} here")
    return a


_DTYPE_NAMES: dict = {}


def _dtype_name(dtype: np.dtype) -> str:
    """`dtype.name`, which NumPy builds as a new string on every access, looked up once."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = dtype.name
    return name


def _as_array(name: str, value: Any) -> np.ndarray:
    if type(value) is np.ndarray:             # the common case, before the attribute probes
        return value
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        value = value.detach().numpy() if hasattr(value, "detach") else value.numpy()
    if not isinstance(value, np.ndarray):
        if isinstance(value, (int, float, bool, np.generic)):
            return np.asarray(value)
        raise TypeError(f"input {name!r}: expected a NumPy array, got {type(value).__name__}")
    return value
