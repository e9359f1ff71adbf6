"""ONNX -> Graph.  Converters are registered per ONNX op type in `frontend/onnx_ops/` with
`@converter("Relu")`; each gets the builder, the node's input Values (None for absent optional
inputs), its attributes as a dict and the opset, and returns the output Values.

Initializers become parameters; graph inputs that are not initializers are the model's inputs, in
graph order.  Inputs that are really attributes (shapes, axes, pads, ...) are read with
`ctx.value_of(v)`, which works when they are constants (folded by the builder) and raises
RuntimeValueError for values computed at run time.  Unsupported ops are collected and reported
together.

A model whose shapes are all known once its input shapes are (the usual case) converts to one
static Graph.  One with symbolic input dimensions, shapes computed from input values, control
flow, sequences or ops whose output shape depends on data converts to an `OnnxProgram`
(frontend/onnx_program.py), which `tensorforge.compile` turns into a model that specializes
and compiles its static stretches at call time (staged.py).
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..errors import InputError, MissingDependencyError, UserError
from ..graph.builder import GraphBuilder, RuntimeValueError
from ..graph.ir import Graph, GraphError, Value
from ..ir.dtype import SCALAR_TYPES

_CONVERTERS: dict[str, tuple[Callable, int]] = {}

# The newest ONNX opset whose operators the converters follow.  A model that declares a newer
# one converts with a warning: an operator whose meaning changed after it may convert wrongly.
NEWEST_OPSET = 28


class UnsupportedOpsError(UserError, NotImplementedError):
    """The model uses operators tensorforge lacks; the message lists every one."""


class ModelLoadError(InputError):
    """The file is not a readable ONNX model."""


class InputShapeError(InputError, NotImplementedError):
    """A model input's shape is not static, not given, or `shapes` names no input."""


class RunOnHost(NotImplementedError):
    """This node cannot be part of a static graph (raised by a converter for a case its op has a
    host implementation for, in frontend/onnx_host/): the staged model runs it on the host."""


class DataDependentShape(RunOnHost):
    """A node's output shape depends on the values of its inputs (NonZero of a computed tensor)."""


DEFAULT_DOMAINS = ("", "ai.onnx")


def op_key(op_type: str, domain: str = "") -> str:
    """The registry key of an ONNX op: its type in the default domain, `domain::type` elsewhere."""
    return op_type if domain in DEFAULT_DOMAINS else f"{domain}::{op_type}"


def converter(*op_types: str, since: int = 1, domain: str = "") -> Callable:
    """Register a converter for ONNX op types of `domain` (valid from opset `since`)."""

    def wrap(fn: Callable) -> Callable:
        for t in op_types:
            key = op_key(t, domain)
            if key in _CONVERTERS:
                raise ValueError(f"ONNX converter for {key} registered twice")
            _CONVERTERS[key] = (fn, since)
        return fn

    return wrap


@dataclass
class ConvertContext:
    builder: GraphBuilder
    opset: int
    node_name: str
    op_type: str
    outputs: tuple = ()          # the node's output names ("" for an omitted optional output)
    default_opset: int = 0       # the default domain's opset (0: `opset`), for a node of another domain
    scope: Any = None            # the enclosing graph's values by name (what a body graph may read)

    def add(self, op: str, inputs: list, attrs: dict | None = None, name: str | None = None,
            fold: bool = True) -> list[Value]:
        return self.builder.add(op, inputs, attrs, name or self.node_name, fold=fold)

    def add1(self, op: str, inputs: list, attrs: dict | None = None, fold: bool = True) -> Value:
        return self.add(op, inputs, attrs, fold=fold)[0]

    def const(self, array: Any, dtype: str | None = None) -> Value:
        return self.builder.const(array, name=f"{self.node_name}_c", dtype=dtype)

    def transposed_const(self, v: Value) -> Value:
        """The 2-D constant `v` transposed, made once however many nodes read it."""
        return self.builder.derived(v, "T", lambda a: np.ascontiguousarray(a.T), f"{self.node_name}_c")

    def value_of(self, v: Value, what: str = "input") -> np.ndarray:
        try:
            return self.builder.value_of(v, what)
        except RuntimeValueError as err:
            raise RuntimeValueError(f"node {self.node_name} ({self.op_type}): {err}", err.value) from None

    def is_const(self, v: Value | None) -> bool:
        return self.builder.is_const(v)


def _load_converters() -> None:
    import importlib
    import pkgutil

    from . import onnx_host, onnx_ops
    for package in (onnx_ops, onnx_host):
        for info in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{package.__name__}.{info.name}")


def _onnx():
    try:
        import onnx
    except ImportError:  # pragma: no cover
        raise MissingDependencyError("the ONNX frontend needs the onnx package: pip install onnx") from None
    return onnx


def _attr_value(attr) -> Any:
    onnx = _onnx()
    from onnx import numpy_helper
    A = onnx.AttributeProto
    if attr.type == A.FLOAT:
        return float(attr.f)
    if attr.type == A.INT:
        return int(attr.i)
    if attr.type == A.STRING:
        return attr.s.decode("utf-8", "replace")
    if attr.type == A.TENSOR:
        return numpy_helper.to_array(attr.t)
    if attr.type == A.FLOATS:
        return tuple(float(x) for x in attr.floats)
    if attr.type == A.INTS:
        return tuple(int(x) for x in attr.ints)
    if attr.type == A.STRINGS:
        return tuple(s.decode("utf-8", "replace") for s in attr.strings)
    if attr.type == A.GRAPH:
        return attr.g
    return None


def _np_dtype(elem_type: int) -> str:
    onnx = _onnx()
    try:
        name = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type)).name
    except Exception:
        name = ""
    if name not in SCALAR_TYPES:   # bfloat16, float8, int4, string, complex, ...
        label = onnx.TensorProto.DataType.Name(elem_type) if elem_type in onnx.TensorProto.DataType.values() \
            else str(elem_type)
        raise NotImplementedError(f"ONNX element type {label} is not supported")
    return name


def load_model(path_or_model: Any):
    onnx = _onnx()
    if isinstance(path_or_model, onnx.ModelProto):
        return path_or_model
    if isinstance(path_or_model, (bytes, bytearray)):
        data = bytes(path_or_model)
        where = "the given bytes"
    else:
        path = os.fspath(path_or_model)
        if not os.path.exists(path):
            raise FileNotFoundError(f"no such model file: {path}")
        with open(path, "rb") as f:
            data = f.read()
        where = path
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as err:
        raise ModelLoadError(f"{where} is not a valid ONNX model (truncated or another format): {err}") from None
    if not model.graph.node and not model.graph.output:
        raise ModelLoadError(f"{where} is not a valid ONNX model: it holds no graph")
    if isinstance(path_or_model, (bytes, bytearray)):
        if any(onnx.external_data_helper.uses_external_data(t) for t in model.graph.initializer):
            raise ModelLoadError(f"{where} keep tensors in external files; pass the model's path, "
                                 "or a ModelProto loaded with onnx.load(path)")
        return model
    # tensors stored beside the model file (torch.onnx.export's NAME.onnx.data; any model over
    # 2 GB) are read from the model's folder, as onnx.load does (nothing to do without them)
    try:
        onnx.external_data_helper.load_external_data_for_model(model, os.path.dirname(os.path.abspath(path)))
    except Exception as err:
        raise ModelLoadError(f"{where}: cannot read its external tensor data: {err}") from None
    return model


def from_onnx(model: Any, shapes: dict | None = None, name: str | None = None,
              constants: dict | None = None):
    """Convert an ONNX model (path, bytes or ModelProto).

    Returns a static `Graph` when every shape in the model follows from its input shapes, and
    an `OnnxProgram` otherwise (symbolic input dimensions, shapes computed from input values,
    If/Loop/Scan, sequences, ops whose output shape depends on data); `tensorforge.compile`
    accepts both.  `shapes` fixes input shapes whose dimensions are symbolic in the model
    ({input name: shape}); `constants` ({input name: array}) specializes the model on given
    values of some inputs, which then become parameters."""
    _onnx()
    model = load_model(model)
    _load_converters()
    g = model.graph
    opsets = model_opsets(model)
    _check_opset(opsets[""], name or g.name)
    shapes = dict(shapes or {})
    _check_shape_names(g, shapes)
    if len(g.sparse_initializer):
        raise NotImplementedError("sparse initializers are not supported")
    check_supported(g, opsets)
    try:
        return _convert_static(model, shapes, constants or {}, name, opsets)
    except NeedsStaging as why:
        from .onnx_program import OnnxProgram
        return OnnxProgram.from_model(model, shapes=shapes, constants=constants or {}, name=name,
                                      reason=str(why))


class NeedsStaging(Exception):
    """The model is not one static graph; the message says why (the first reason met)."""


def model_opsets(model) -> dict[str, int]:
    """The opset version per domain ("" for the default domain)."""
    opsets = {("" if o.domain == "ai.onnx" else o.domain): int(o.version) for o in model.opset_import}
    opsets.setdefault("", 1)
    return opsets


def check_supported(graph, opsets: dict) -> None:
    """UnsupportedOpsError listing every op (also inside If/Loop/Scan bodies) that has neither a
    converter nor a host implementation."""
    from .onnx_host import HOST_OPS
    missing: dict[str, list[str]] = {}
    for node in walk_nodes(graph):
        key = op_key(node.op_type, node.domain)
        if key in _CONVERTERS or key in HOST_OPS:
            continue
        domain = node.domain or "ai.onnx"
        label = f"{node.op_type} (domain {node.domain!r}, opset {opsets.get(node.domain, '?')})" \
            if domain != "ai.onnx" else f"{node.op_type} (opset {opsets['']})"
        missing.setdefault(label, []).append(node.name or "<unnamed>")
    if missing:
        lines = [f"  {op}: nodes {', '.join(names[:5])}{' ...' if len(names) > 5 else ''}"
                 for op, names in sorted(missing.items())]
        raise UnsupportedOpsError("the model uses operators tensorforge does not support:\n" + "\n".join(lines))


def walk_nodes(graph):
    """Every node of `graph` and of the graphs in its nodes' attributes, depth first."""
    onnx = _onnx()
    for node in graph.node:
        yield node
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from walk_nodes(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sub in a.graphs:
                    yield from walk_nodes(sub)


def initializer_array(init) -> np.ndarray:
    """An initializer's values, aligned for the kernels (runtime/memory.py): read once here,
    every model compiled from them takes the array as it is."""
    from onnx import numpy_helper

    from ..runtime.memory import aligned
    array = numpy_helper.to_array(init)
    return aligned(array) if array.dtype != object else array


def _convert_static(model, shapes: dict, constants: dict, name: str | None, opsets: dict) -> Graph:
    from .onnx_host import HOST_OPS
    g = model.graph
    b = GraphBuilder(name or g.name or "model")
    env: dict[str, Value | None] = {"": None}
    for init in g.initializer:
        if init.data_type == _onnx().TensorProto.STRING:
            raise NeedsStaging(f"initializer {init.name} holds strings")
        env[init.name] = b.const(initializer_array(init), name=init.name)
    for cname, value in constants.items():
        env[cname] = b.const(np.asarray(value), name=cname)
    for inp in g.input:
        if inp.name in env:
            continue
        if not inp.type.HasField("tensor_type"):
            raise NeedsStaging(f"input {inp.name} is a {inp.type.WhichOneof('value')}, not a tensor")
        t = inp.type.tensor_type
        if t.elem_type == _onnx().TensorProto.STRING:
            raise NeedsStaging(f"input {inp.name} holds strings")
        try:
            dims = _given_dims(inp, shapes[inp.name]) if inp.name in shapes else _static_dims(inp)
        except InputShapeError as err:
            if inp.name in shapes:
                raise
            raise NeedsStaging(str(err)) from None
        env[inp.name] = b.input(inp.name, dims, _np_dtype(t.elem_type))

    for k, node in enumerate(g.node):
        key = op_key(node.op_type, node.domain)
        label = node.name or f"{node.op_type}_{k}"
        if key not in _CONVERTERS:
            raise NeedsStaging(f"node {label} ({node.op_type}) runs on the host" if key in HOST_OPS
                               else f"node {label}: no converter for {key}")
        try:
            outs = convert_node(b, env, node, label, opsets)
        except (RuntimeValueError, RunOnHost) as err:
            raise NeedsStaging(str(err)) from None
        for oname, v in zip(node.output, outs):
            if oname:
                env[oname] = v
    for o in g.output:
        if o.name not in env or env[o.name] is None:
            raise GraphError(f"graph output {o.name} is never produced")
    return with_output_names(b, [(o.name, env[o.name]) for o in g.output])


def convert_node(b: GraphBuilder, env: dict, node, label: str, opsets: dict) -> list:
    """Add one ONNX node to the builder; its output Values (None for an omitted output), one
    per node output.  `env` maps ONNX names to Values (a Mapping that may build them lazily)."""
    fn, _since = _CONVERTERS[op_key(node.op_type, node.domain)]
    inputs = []
    for i in node.input:
        if i not in env:
            raise GraphError(f"node {label} ({node.op_type}) reads {i!r}, which is never defined "
                             "(the graph is not topologically sorted or has a cycle)")
        inputs.append(env[i])
    attrs = {a.name: _attr_value(a) for a in node.attribute}
    domain = "" if node.domain in DEFAULT_DOMAINS else node.domain
    ctx = ConvertContext(b, opsets.get(domain, 1), label, node.op_type, tuple(node.output), opsets.get("", 1),
                         scope=env)
    try:
        outs = fn(ctx, inputs, attrs)
    except (NotImplementedError, GraphError):
        raise
    except Exception as err:
        raise GraphError(f"node {label} ({node.op_type}): {err}") from err
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    return outs + [None] * (len(node.output) - len(outs))


def _check_opset(opset: int, model_name: str) -> None:
    if opset > NEWEST_OPSET:
        warnings.warn(f"model {model_name or '<unnamed>'} declares ONNX opset {opset}, newer than opset "
                      f"{NEWEST_OPSET}, the newest tensorforge knows; an operator whose meaning changed "
                      "since may convert wrongly", UserWarning, stacklevel=3)


def runtime_input_names(g) -> list[str]:
    """The names of an ONNX graph's inputs that are not initializers, in order."""
    weights = {i.name for i in g.initializer}
    return [i.name for i in g.input if i.name not in weights]


def _check_shape_names(g, shapes: dict) -> None:
    """Every name in `shapes` is a model input (a typo must not be ignored)."""
    weights = {i.name for i in g.initializer}
    inputs = runtime_input_names(g)
    unknown = [n for n in shapes if n not in inputs and n not in weights]
    if unknown:
        listed = ", ".join(repr(n) for n in unknown)
        raise InputShapeError(f"a shape was given for {listed}, which is not an input of the model; "
                              f"its inputs are {', '.join(inputs) or '(none)'}")


def _given_dims(inp, given) -> list[int]:
    """A shape from `shapes`, checked against the rank the model declares (when it does)."""
    dims = [int(d) for d in given]
    t = inp.type.tensor_type
    if t.HasField("shape") and len(t.shape.dim) != len(dims):
        model_dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in t.shape.dim]
        raise InputShapeError(f"input {inp.name} has {len(model_dims)} dimension(s) "
                              f"[{', '.join(map(str, model_dims))}] in the model, but the shape given for it "
                              f"has {len(dims)}: {tuple(dims)}")
    return dims


def _static_dims(inp) -> list[int]:
    """The input's dimensions, or an error saying which are symbolic and how to fix them."""
    t = inp.type.tensor_type
    if not t.HasField("shape"):
        raise InputShapeError(f"input {inp.name} has no shape information in the model; give its shape with "
                              f"--shape {inp.name}=d0,d1,... on the command line, or from_onnx(model, "
                              f"shapes={{{inp.name!r}: (d0, d1, ...)}})")
    dims: list = []
    for d in t.shape.dim:
        if d.HasField("dim_value") and d.dim_value >= 0:
            dims.append(int(d.dim_value))
        else:
            dims.append(d.dim_param or "?")
    if all(isinstance(d, int) for d in dims):
        return dims
    shown = "[" + ", ".join(str(d) for d in dims) + "]"
    example = [d if isinstance(d, int) else 1 for d in dims]
    raise InputShapeError(
        f"input {inp.name} has symbolic dimensions {shown}; give static ones with --shape "
        f"{inp.name}={','.join(map(str, example))} on the command line, or from_onnx(model, "
        f"shapes={{{inp.name!r}: {tuple(example)}}})")


def with_output_names(b: GraphBuilder, outputs: list) -> Graph:
    """The graph's output values carry the model's output names (an identity node is added for
    an output that is an input, a constant, or another output).  A name the model lists twice
    (torch.onnx.export of a forward that returns one tensor twice) is one value, returned at
    both places."""
    from ..graph.ir import Node
    taken = {v.name for v in b.inputs} | {v.name for v in b.params} | {
        v.name for n in b.nodes for v in n.outputs}
    renames: dict = {}
    final = []
    produced = {v for n in b.nodes for v in n.outputs}
    named: dict = {}
    for name, v in outputs:
        if name in named:
            final.append(named[name])
            continue
        if v.name == name and v not in renames:
            final.append(v)
            named[name] = v
            continue
        if v in produced and v not in renames and name not in taken:
            new = Value(name, v.shape, v.dtype)
            renames[v] = new
            taken.add(name)
            final.append(new)
            named[name] = new
            continue
        out = b.add("identity", [renames.get(v, v)], {}, name=name)[0]
        final.append(out)
        named[name] = out
    if renames:
        b.nodes = [Node(n.op, tuple(renames.get(x, x) if x is not None else None for x in n.inputs),
                        tuple(renames.get(x, x) for x in n.outputs), n.attrs, n.name) for n in b.nodes]
    return b.finish(final)
