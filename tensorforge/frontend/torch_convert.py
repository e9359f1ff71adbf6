"""An FX graph of core ATen ops -> Graph.  Both PyTorch paths end here: `from_torch` hands it the
graph of a `torch.export` program (after `run_decompositions`), the `torch.compile` backend the
graph that `make_fx` traced from dynamo's FX graph.

Converters are registered per ATen op (the overload packet: `aten.add` covers add.Tensor and
add.Scalar) in `frontend/torch_ops/` with `@aten("add")`.  Each gets a context and the node's
arguments bound by name to the op's schema (defaults filled in), with every FX node replaced by
its Value (a tuple of Values for a node with several outputs) and Python scalars left as they
are; it returns a Value or a tuple of them.

Only nodes that the outputs depend on are converted, so dead nodes (an `empty` that a
decomposition left behind, an assertion) cost nothing.  Every converted node's output shapes are
checked against the shapes PyTorch recorded for it (`node.meta["val"]`), so a converter that
gets a shape wrong fails at conversion with the node's name, not with a wrong answer later.
Unsupported ops are collected first and reported together, one line each.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import numpy as np

from ..graph.builder import GraphBuilder
from ..graph.ir import Graph, GraphError, Value
from .onnx import UnsupportedOpsError

_CONVERTERS: dict[str, Callable] = {}

# torch dtype names (str(torch.float32) without "torch.") -> tensorforge dtype names
TORCH_DTYPES = {"float32": "float32", "float64": "float64", "float16": "float16", "int64": "int64",
                "int32": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool"}

# nodes that pass their first argument through (no copy is observable in a functional graph)
PASSTHROUGH = {"clone", "alias", "alias_copy", "detach", "detach_copy", "contiguous", "lift_fresh_copy", "dropout",
               "_assert_tensor_metadata"}


def aten(*names: str) -> Callable:
    """Register a converter for ATen ops by overload-packet name (`"convolution"`)."""

    def wrap(fn: Callable) -> Callable:
        for name in names:
            if name in _CONVERTERS:
                raise ValueError(f"ATen converter for {name} registered twice")
            _CONVERTERS[name] = fn
        return fn

    return wrap


def _load_converters() -> None:
    import importlib
    import pkgutil

    from . import torch_ops
    for info in pkgutil.iter_modules(torch_ops.__path__):
        importlib.import_module(f"{torch_ops.__name__}.{info.name}")


def torch_dtype(dtype: Any) -> str:
    """tensorforge's name of a torch dtype; NotImplementedError for one it lacks."""
    name = str(dtype).replace("torch.", "")
    if name not in TORCH_DTYPES:
        raise NotImplementedError(f"torch dtype {name} is not supported")
    return TORCH_DTYPES[name]


def op_name(node: Any) -> str:
    """The overload-packet name of a call_function node ("convolution"), or "getitem"."""
    target = node.target
    if target is operator.getitem:
        return "getitem"
    schema = getattr(target, "_schema", None)
    if schema is not None:
        return schema.name.split("::")[-1]
    return getattr(target, "__name__", str(target))


def op_label(node: Any) -> str:
    """The op as PyTorch names it: aten.add.Tensor."""
    return str(node.target) if getattr(node.target, "_schema", None) is not None else op_name(node)


@dataclass
class AtenContext:
    """What a converter sees: the builder, the node's name and op, and its recorded output shapes."""
    builder: GraphBuilder
    node_name: str
    op: str
    out_shapes: tuple            # shape of each output tensor (one entry per output)
    out_dtypes: tuple
    used_outputs: frozenset      # indices of outputs that some getitem reads (all for one output)

    def add(self, op: str, inputs: list, attrs: dict | None = None) -> list[Value]:
        return self.builder.add(op, inputs, attrs, self.node_name)

    def add1(self, op: str, inputs: list, attrs: dict | None = None) -> Value:
        return self.builder.add(op, inputs, attrs, self.node_name)[0]

    def const(self, array: Any, dtype: str | None = None) -> Value:
        return self.builder.const(array, name=f"{self.node_name}_c", dtype=dtype)

    def is_const(self, v: Value | None) -> bool:
        return self.builder.is_const(v)

    def value_of(self, v: Value) -> np.ndarray:
        return self.builder.value_of(v, f"an argument of {self.node_name}")

    @property
    def out_shape(self) -> tuple:
        return self.out_shapes[0]

    def unsupported(self, what: str) -> NotImplementedError:
        return NotImplementedError(f"node {self.node_name} ({self.op}): {what}")


def _meta_tensors(node: Any) -> list:
    val = node.meta.get("val")
    if val is None:
        return []
    return list(val) if isinstance(val, (list, tuple)) else [val]


def shape_exprs(node: Any) -> tuple | None:
    """A node's shape with each symbolic size as its sympy expression (None when its value has
    no shape).  Compared structurally, such shapes ask the shape environment nothing: comparing
    the SymInts themselves may make it answer by fixing a symbol (a batch Dim became the
    example's 2 after `s77 * 8 == 16` was asked)."""
    val = getattr(node, "meta", {}).get("val")
    if val is None or not hasattr(val, "shape"):
        return None
    return tuple(d if isinstance(d, int) else d.node.expr for d in val.shape)


def concrete(value: Any, symbols: dict) -> int:
    """A SymInt (or int) as an int, its symbols replaced by their values in `symbols`."""
    if isinstance(value, int):
        return value
    node = getattr(value, "node", None)
    if node is not None and hasattr(node, "expr"):
        expr = node.expr.xreplace(symbols) if symbols else node.expr
        if isinstance(expr, int) or not expr.free_symbols:
            return int(expr)
        raise NotImplementedError(f"the symbolic size {value} depends on {sorted(map(str, expr.free_symbols))}, "
                                  "which no input dimension gives")
    return int(value)


def _data_dependent(size: Any) -> bool:
    """Whether a SymInt holds a size torch.export could only learn by running the graph (an
    unbacked symbol: the length of x[mask], of nonzero's output...)."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    return bool(free_unbacked_symbols(size))


def _static_shape(t: Any, where: str, symbols: dict | None = None) -> tuple:
    dims = []
    for d in t.shape:
        if not isinstance(d, int):
            try:
                d = concrete(d, symbols or {})
            except Exception:
                if _data_dependent(d):
                    raise NotImplementedError(
                        f"{where} has a dimension {d} that depends on the values of a tensor: from_torch "
                        "runs x[mask], nonzero, masked_select and unique on the host between compiled stretches, "
                        "but no other op that makes such a size; keep the shape (torch.where(mask, x, 0)) "
                        "or use torch.compile(model, backend=\"tensorforge\"), which leaves such ops to "
                        "PyTorch") from None
                raise NotImplementedError(f"{where} has a symbolic dimension {d} that its inputs' shapes do "
                                          "not determine") from None
        dims.append(d)
    return tuple(dims)


def needed_nodes(graph: Any) -> list:
    """The graph's nodes that the output depends on, in graph order."""
    out = next(n for n in graph.nodes if n.op == "output")
    keep, stack = set(), [out]
    while stack:
        n = stack.pop()
        if n in keep:
            continue
        keep.add(n)
        stack.extend(n.all_input_nodes)
    return [n for n in graph.nodes if n in keep]


def check_supported(nodes: Iterable) -> None:
    """One UnsupportedOpsError listing every ATen op in `nodes` (and in torch.cond's branches)
    without a converter."""
    _load_converters()
    missing: dict[str, list[str]] = {}
    _missing_ops(nodes, missing)
    if missing:
        lines = [f"  {op}: nodes {', '.join(names[:5])}{' ...' if len(names) > 5 else ''}"
                 for op, names in sorted(missing.items())]
        raise UnsupportedOpsError("the model uses ATen operators tensorforge does not support:\n" + "\n".join(lines))


def _missing_ops(nodes: Iterable, missing: dict) -> None:
    for n in nodes:
        if n.op != "call_function":
            continue
        name = op_name(n)
        if name == "cond":                 # its branches' ops must convert
            for branch in n.args[1:3]:
                sub = _submodule(n.graph, branch.target) if getattr(branch, "op", None) == "get_attr" else None
                if sub is not None:
                    _missing_ops(needed_nodes(sub.graph), missing)
            continue
        if name not in _CONVERTERS and name not in PASSTHROUGH and name != "getitem" and name not in SIZE_QUERIES \
                and n.target not in SIZE_ARITHMETIC:
            missing.setdefault(op_label(n), []).append(n.name)


def unsupported_ops(graph: Any) -> list[str]:
    """The ATen ops of the graph's needed nodes that have no converter (sorted, unique)."""
    _load_converters()
    return sorted({op_label(n) for n in needed_nodes(graph) if n.op == "call_function"
                   and op_name(n) not in _CONVERTERS and op_name(n) not in PASSTHROUGH and op_name(n) != "getitem"
                   and op_name(n) not in SIZE_QUERIES and n.target not in SIZE_ARITHMETIC})


def convert_graph(graph: Any, bindings: dict, name: str, symbols: dict | None = None,
                  attributes: dict | None = None) -> Graph:
    """Convert an FX graph of ATen ops.  `bindings` maps each placeholder's name to ("input",
    None) for a run-time input or ("const", array) for a weight; run-time inputs keep graph order.
    `symbols` gives the values of the graph's symbolic sizes (sympy symbol -> int): the graph is
    specialized on them.  `attributes` maps the target of each get_attr node (a tensor the
    graph module holds) to its array: such nodes become constants."""
    symbols = symbols or {}
    attributes = attributes or {}
    b = GraphBuilder(name)
    nodes = needed_nodes(graph)
    check_supported(nodes)
    env: dict[Any, Any] = {}
    for n in graph.nodes:
        if n.op != "placeholder":
            continue
        kind, array = bindings[n.name]
        if kind == "size":          # a size of a staged program's stretch (torch_staged.py)
            env[n] = concrete(n.meta["val"], symbols)
        elif kind == "const":
            env[n] = b.const(np.asarray(array), name=n.name)
        else:
            metas = _meta_tensors(n)
            if not metas or not hasattr(metas[0], "shape"):
                raise NotImplementedError(f"input {n.name} is not a tensor; only tensor inputs are supported")
            env[n] = b.input(n.name, _static_shape(metas[0], f"input {n.name}", symbols), torch_dtype(metas[0].dtype))

    def attribute(n: Any) -> Any:
        if n.target not in attributes:
            raise NotImplementedError(f"node {n.name} reads the attribute {n.target}, which is not a tensor "
                                      "the graph holds")
        return np.asarray(attributes[n.target])

    return _finish(b, _convert_nodes(b, graph, nodes, env, symbols, attribute))


def _convert_nodes(b: GraphBuilder, graph: Any, nodes: list, env: dict, symbols: dict,
                   attribute: Callable[[Any], Any]) -> list:
    """Convert `nodes` of `graph` into `b`, its placeholders already in `env`; the graph's
    outputs.  A get_attr node names a torch.cond branch (kept as the graph module) or a tensor,
    which `attribute(node)` gives as an array (a constant), or passes through otherwise."""
    for n in nodes:
        if n.op in ("placeholder", "output"):
            continue
        if n.op == "get_attr":
            branch = _submodule(graph, n.target)
            if branch is not None:          # a branch of torch.cond
                env[n] = branch
            else:
                value = attribute(n)
                env[n] = b.const(value, name=n.name) if isinstance(value, np.ndarray) else value
            continue
        env[n] = _convert_node(b, n, env, symbols)
    out = next(n for n in graph.nodes if n.op == "output")
    return [_lookup(env, o) for o in _flat(out.args[0])]


def _flat(x: Any) -> list:
    if isinstance(x, (list, tuple)):
        return [y for item in x for y in _flat(item)]
    return [x]


def _lookup(env: dict, x: Any) -> Any:
    from torch.fx import Node
    if isinstance(x, Node):
        return env[x]
    if isinstance(x, (list, tuple)):
        return type(x)(_lookup(env, y) for y in x)
    return x


def _convert_node(b: GraphBuilder, n: Any, env: dict, symbols: dict) -> Any:
    name = op_name(n)
    args = _lookup(env, list(n.args))
    if name == "getitem":
        return args[0][args[1]]
    if n.target in SIZE_ARITHMETIC:     # size arithmetic of a specialized graph: Python ints
        return SIZE_ARITHMETIC[n.target](*args)
    if name in SIZE_QUERIES:
        return SIZE_QUERIES[name](*args)
    if name == "cond":
        return _convert_cond(b, n, args, symbols)
    metas = _meta_tensors(n)
    _bind_new_sizes(n, metas, args, env, symbols)
    shapes = tuple(_static_shape(t, f"node {n.name} ({op_label(n)})", symbols) if hasattr(t, "shape") else None for t in metas)
    dtypes = tuple(torch_dtype(t.dtype) if hasattr(t, "dtype") else None for t in metas)
    if isinstance(n.meta.get("val"), (list, tuple)):
        used = frozenset(u.args[1] for u in n.users if op_name(u) == "getitem" and u.users)   # not dead ones
    else:
        used = frozenset({0})
    ctx = AtenContext(b, n.name, op_label(n), shapes, dtypes, used)
    bound = _bind(n, args, _lookup(env, dict(n.kwargs)))
    if name in PASSTHROUGH:
        x = next(iter(bound.values()))
        return x
    try:
        out = _CONVERTERS[name](ctx, bound)
    except (NotImplementedError, GraphError):
        raise
    except Exception as err:
        raise GraphError(f"node {n.name} ({ctx.op}): {err}") from err
    _check_shapes(ctx, out)
    return out


def _bind_new_sizes(n: Any, metas: tuple, args: list, env: dict, symbols: dict) -> None:
    """Values in `symbols` for the sizes node `n` makes from sizes the data gave (`x[:, :k]`
    with k an `.item()`: torch.export names the slice's length anew, u1 beside u0): the op is
    run on meta tensors of its inputs' concrete shapes, which gives its output's shape."""
    import torch
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    new = [t for t in metas if hasattr(t, "shape") and any(s not in symbols for s in free_unbacked_symbols(t.shape))]
    if not new or not callable(n.target):
        return

    def meta(x: Any) -> Any:
        if isinstance(x, Value):
            return torch.empty(tuple(int(d) for d in x.shape), dtype=getattr(torch, x.dtype), device="meta")
        if isinstance(x, (list, tuple)):
            return type(x)(meta(y) for y in x)
        return x

    try:
        got = n.target(*meta(args), **meta(_lookup(env, dict(n.kwargs))))
    except Exception:
        return                      # the shapes stay unknown: _static_shape says which
    for t, r in zip(metas, got if isinstance(got, (list, tuple)) else [got]):
        if not hasattr(t, "shape") or not hasattr(r, "shape"):
            continue
        for d, size in zip(t.shape, r.shape):
            expr = getattr(getattr(d, "node", None), "expr", None)
            if expr is not None and getattr(expr, "is_Symbol", False) and expr not in symbols:
                symbols[expr] = int(size)


def _submodule(graph: Any, target: str) -> Any:
    """The GraphModule a get_attr node of `graph` names (a branch of torch.cond), or None."""
    from torch.fx import GraphModule
    try:
        value = operator.attrgetter(target)(graph.owning_module)
    except AttributeError:
        return None
    return value if isinstance(value, GraphModule) else None


def _convert_cond(b: GraphBuilder, n: Any, args: list, symbols: dict) -> tuple:
    """torch.cond(pred, true_fn, false_fn, operands) by predication: both branches are converted
    inline on the operands and a `where` on the 0-d predicate picks each output (torch.cond makes
    the branches return tensors of the same shapes and dtypes).  A predicate known when the
    graph is built (a weight's, a shape's) converts the branch it picks only.  Both branches run
    on every call otherwise, so this suits the small branches torch.cond usually holds."""
    pred, true_fn, false_fn, operands = args[:4]
    if true_fn is None or not hasattr(true_fn, "graph") or not hasattr(false_fn, "graph"):
        raise NotImplementedError(f"node {n.name} (torch.cond): its branches are not graphs of the program")
    if isinstance(pred, Value) and b.is_const(pred):
        pred = bool(np.asarray(b.value_of(pred, f"the predicate of {n.name}")))
    if isinstance(pred, (bool, np.bool_, int)):
        return tuple(_convert_branch(b, true_fn if pred else false_fn, list(operands), symbols))
    taken = _convert_branch(b, true_fn, list(operands), symbols)
    other = _convert_branch(b, false_fn, list(operands), symbols)
    cond = pred if pred.dtype == "bool" else b.add("cast", [pred], {"dtype": "bool"}, n.name)[0]
    return tuple(t if t is f else b.add("where", [cond, t, f], None, n.name)[0] for t, f in zip(taken, other))


def _convert_branch(b: GraphBuilder, gm: Any, operands: list, symbols: dict) -> list:
    """The outputs of a torch.cond branch converted inline, its placeholders bound to `operands`."""
    placeholders = [p for p in gm.graph.nodes if p.op == "placeholder"]
    if len(placeholders) != len(operands):
        raise NotImplementedError(f"a torch.cond branch takes {len(placeholders)} operands, given {len(operands)}")

    def attribute(m: Any) -> Any:
        value = operator.attrgetter(m.target)(gm)
        return np.asarray(value.detach().cpu().numpy()) if hasattr(value, "detach") else value

    return _convert_nodes(b, gm.graph, needed_nodes(gm.graph), dict(zip(placeholders, operands)), symbols, attribute)


# Sizes in a graph exported with symbolic dimensions: `aten.sym_size.int(x, dim)` and Python
# arithmetic on the results.  The graph is converted for concrete input shapes, so each is an int.
SIZE_QUERIES: dict[str, Callable] = {
    "sym_size": lambda x, dim: int(x.shape[dim]),
    "sym_numel": lambda x: int(np.prod(x.shape, dtype=np.int64)),
}
SIZE_ARITHMETIC: dict[Any, Callable] = {
    operator.add: operator.add, operator.sub: operator.sub, operator.mul: operator.mul,
    operator.floordiv: operator.floordiv, operator.mod: operator.mod, operator.neg: operator.neg,
    operator.truediv: operator.truediv, operator.pow: operator.pow,
}


def _bind(n: Any, args: list, kwargs: dict) -> dict:
    """The node's arguments by schema name, defaults filled in."""
    schema = getattr(n.target, "_schema", None)
    if schema is None:
        return {f"arg{k}": a for k, a in enumerate(args)} | kwargs
    bound = {}
    for k, a in enumerate(schema.arguments):
        if k < len(args):
            bound[a.name] = args[k]
        elif a.name in kwargs:
            bound[a.name] = kwargs[a.name]
        elif a.has_default_value():
            bound[a.name] = a.default_value
        else:
            bound[a.name] = None
    return bound


def _check_shapes(ctx: AtenContext, out: Any) -> None:
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    for k, (v, want) in enumerate(zip(outs, ctx.out_shapes)):
        if isinstance(v, Value) and want is not None and tuple(v.shape) != tuple(want):
            raise GraphError(f"node {ctx.node_name} ({ctx.op}): output {k} has shape {tuple(v.shape)}, but "
                             f"PyTorch computes {tuple(want)} (a converter bug)")


def _finish(b: GraphBuilder, results: list) -> Graph:
    """Outputs that are inputs, constants or repeated get an identity node of their own."""
    produced = {v for node in b.nodes for v in node.outputs}
    final, seen = [], set()
    for k, v in enumerate(results):
        if not isinstance(v, Value):
            raise NotImplementedError(f"output {k} is {type(v).__name__}, not a tensor; only tensor outputs "
                                      "are supported")
        if v not in produced or v in seen:
            if b.is_const(v):   # the builder would fold identity(const) to the same constant
                b.fold_constants = False
                v = b.add1("identity", [v], name=f"output_{k}")
                b.fold_constants = True
            else:
                v = b.add1("identity", [v], name=f"output_{k}")
        seen.add(v)
        final.append(v)
    return b.finish(final)
