"""Tensors and the operations that produce them: placeholder, compute, reduce_axis, reducers.

A tensor expression says *what* is computed; `te/schedule.py` says *how*.  `compute` calls the
user's lambda once with fresh index variables (named after the lambda's parameters) and keeps the
resulting expression as the operation's body.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Sequence, cast

from ..ir import dtype as dt
from ..ir.expr import (
    DATA,
    REDUCE,
    THREAD,
    CommReducer,
    Expr,
    IntImm,
    IterVar,
    Range,
    Reduce,
    TensorLoad,
    Var,
    const,
    convert,
    max_value,
    min_value,
)


class TensorError(ValueError):
    """A malformed tensor expression (wrong number of indices, mixed reductions, ...)."""


class Operation:
    """Base of PlaceholderOp and ComputeOp.  Compared by identity."""

    name: str
    num_outputs: int = 1

    def output(self, index: int = 0) -> "Tensor":
        return self.outputs[index]

    @property
    def outputs(self) -> tuple:
        cached = self.__dict__.get("_outputs")
        if cached is None:
            cached = tuple(Tensor(self, i) for i in range(self.num_outputs))
            self.__dict__["_outputs"] = cached
        return cached

    def input_tensors(self) -> list["Tensor"]:
        return []

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"


class PlaceholderOp(Operation):
    def __init__(self, name: str, shape: tuple, dtype: str):
        self.name, self.shape, self.dtype = name, shape, dtype


class ComputeOp(Operation):
    """`body[k]` (an Expr over `axis` vars, and `reduce_axis` vars inside a Reduce) gives output k."""

    def __init__(self, name: str, axis: Sequence[IterVar], body: Sequence[Expr], tag: str = "",
                 attrs: dict | None = None):
        self.name = name
        self.axis = tuple(axis)
        self.body = tuple(body)
        self.tag = tag
        self.attrs = dict(attrs or {})
        self.num_outputs = len(self.body)
        first = self.body[0]
        self.reduce_axis = tuple(first.axis) if isinstance(first, Reduce) else ()

    @property
    def shape(self) -> tuple:
        return tuple(cast(Range, iv.dom).extent for iv in self.axis)  # compute axes always have a domain

    def with_body(self, body: Sequence[Expr]) -> "ComputeOp":
        """The same operation (same axes) computing a rewritten body."""
        return ComputeOp(self.name, self.axis, body, self.tag, self.attrs)

    def input_tensors(self) -> list["Tensor"]:
        from ..ir.functor import post_order_visit
        found: dict = {}

        def fn(n):
            if isinstance(n, TensorLoad):
                found.setdefault(n.tensor, None)

        for b in self.body:
            post_order_visit(b, fn)
        return list(found)


@dataclass(frozen=True, eq=False)
class Tensor:
    """Output `value_index` of `op`.  `T[i, j]` builds a load usable inside `compute`."""

    op: Operation
    value_index: int = 0

    @property
    def shape(self) -> tuple:
        return cast("PlaceholderOp | ComputeOp", self.op).shape  # the only two kinds of operation

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def dtype(self) -> str:
        op = self.op
        return op.dtype if isinstance(op, PlaceholderOp) else cast(ComputeOp, op).body[self.value_index].dtype

    @property
    def name(self) -> str:
        return self.op.name if self.op.num_outputs == 1 else f"{self.op.name}.v{self.value_index}"

    def __getitem__(self, indices: Any) -> TensorLoad:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != self.ndim:
            raise TensorError(f"tensor {self.name} has {self.ndim} dimension(s) but was indexed "
                              f"with {len(indices)} index(es)")
        exprs = []
        for i in indices:
            e = convert(i)
            if not dt.is_integer(e.dtype):
                raise TensorError(f"index {e} of tensor {self.name} has dtype {e.dtype}; indices must be integers")
            exprs.append(e)
        return TensorLoad(self, tuple(exprs))

    def __repr__(self) -> str:
        return f"Tensor({self.name}, shape={list(self.shape)}, dtype={self.dtype})"

    __hash__ = object.__hash__


def _shape(shape: Any) -> tuple:
    if isinstance(shape, (int, Expr)):
        shape = (shape,)
    out = []
    for s in shape:
        e = convert(s)
        if not dt.is_integer(e.dtype):
            raise TensorError(f"shape entry {s!r} must be an integer or an integer variable")
        if isinstance(s, int) and s < 0:
            raise TensorError(f"shape entry {s} is negative")
        out.append(e)
    return tuple(out)


def placeholder(shape: Any, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor of the given shape (ints or `te.var`s) and dtype."""
    return PlaceholderOp(name, _shape(shape), dt.check(dtype)).output(0)


def var(name: str = "v", dtype: str = "int32") -> Var:
    """A symbolic scalar, e.g. a dimension whose value comes from the arrays at call time."""
    return Var(name, dt.check(dtype))


def reduce_axis(dom: Any, name: str = "rv") -> IterVar:
    """A reduction axis over `dom`: (min, max) half-open, an extent, or a Range."""
    if isinstance(dom, Range):
        rng = dom
    elif isinstance(dom, (tuple, list)) and len(dom) == 2:
        lo, hi = convert(dom[0]), convert(dom[1])
        if isinstance(lo, IntImm) and isinstance(hi, IntImm):
            rng = Range(lo, const(hi.value - lo.value))
        else:
            rng = Range(lo, hi - lo)
    else:
        rng = Range(const(0), convert(dom))
    return IterVar(rng, Var(name), REDUCE)


def thread_axis(tag: str = "", name: str | None = None) -> IterVar:
    """A GPU thread axis ("blockIdx.x", "threadIdx.y", "vthread", ...) for `Stage.bind`."""
    valid = {"blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z",
             "vthread"}
    if tag not in valid:
        raise ValueError(f"unknown thread axis {tag!r}; expected one of {sorted(valid)}")
    return IterVar(None, Var(name or tag), THREAD, tag)


def compute(shape: Any, fcompute: Callable, name: str = "compute", tag: str = "",
            attrs: dict | None = None) -> Tensor | list[Tensor]:
    """A tensor whose element at index (i, j, ...) is `fcompute(i, j, ...)`.

    `fcompute` may return one expression, or a tuple of Reduce expressions of one tuple reducer
    (then a list of tensors is returned, one per element).
    """
    shape = _shape(shape)
    params = list(inspect.signature(fcompute).parameters.values())
    if params and params[0].kind == inspect.Parameter.VAR_POSITIONAL:
        names = [f"i{k}" for k in range(len(shape))]
    else:
        names = [p.name for p in params]
        if len(names) != len(shape):
            raise TensorError(f"compute {name!r}: the function takes {len(names)} index(es) but the "
                              f"shape has {len(shape)} dimension(s)")
    axis = tuple(IterVar(Range(const(0), s), Var(n), DATA) for n, s in zip(names, shape))
    result = fcompute(*[iv.var for iv in axis])
    body = tuple(convert(r) for r in result) if isinstance(result, (tuple, list)) else (convert(result),)
    _check_body(name, body)
    op = ComputeOp(name, axis, body, tag, attrs)
    return list(op.outputs) if op.num_outputs > 1 else op.output(0)


def _check_body(name: str, body: tuple) -> None:
    reduces = [b for b in body if isinstance(b, Reduce)]
    if reduces and len(reduces) != len(body):
        raise TensorError(f"compute {name!r}: a reduction must be the whole body of every output")
    if len(body) > 1 and not reduces:
        raise TensorError(f"compute {name!r}: several outputs are only supported for tuple reductions")
    if reduces:
        first = reduces[0]
        for r in reduces[1:]:
            if r.combiner is not first.combiner or r.axis != first.axis or r.source != first.source:
                raise TensorError(f"compute {name!r}: the outputs must come from one tuple reduction")
    from ..ir.functor import post_order_visit

    def fn(n):
        if isinstance(n, Reduce) and not any(n is r for r in reduces):
            raise TensorError(f"compute {name!r}: a reduction may only appear at the top of the body "
                              f"(found {n} nested inside an expression)")

    for b in body:
        for part in (b.source if isinstance(b, Reduce) else (b,)):
            post_order_visit(part, fn)


# --------------------------------------------------------------------------------------------
# Reducers


def comm_reducer(fcombine: Callable, fidentity: Callable, name: str = "reduce") -> Callable:
    """Make a reducer from a commutative, associative `fcombine(x, y)` and `fidentity(*dtypes)`.

    Works on single values (te.sum) and on tuples (argmax-style pairs): for tuples `fcombine`
    receives two tuples and returns a tuple, and the reducer returns a tuple of Reduce exprs.
    """

    def reducer(expr: Any, axis: Any, where: Any = None):
        if not isinstance(axis, (IterVar, tuple, list)):  # te.max(a, b): elementwise, as in TVM
            from ..ir.expr import _operands
            return fcombine(*_operands(expr, axis))
        is_tuple = isinstance(expr, (tuple, list))
        source = tuple(convert(e) for e in (expr if is_tuple else (expr,)))
        axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
        for a in axes:
            if not isinstance(a, IterVar) or a.kind != REDUCE:
                raise TensorError(f"{name}: axis {a!r} is not a reduce_axis")
        dtypes = [s.dtype for s in source]
        lhs = tuple(Var(f"x{k}", t) for k, t in enumerate(dtypes))
        rhs = tuple(Var(f"y{k}", t) for k, t in enumerate(dtypes))
        combined = fcombine(lhs, rhs) if is_tuple else fcombine(lhs[0], rhs[0])
        combined = tuple(combined) if is_tuple else (combined,)
        ident = fidentity(*dtypes)
        ident = tuple(ident) if is_tuple else (ident,)
        result = tuple(_coerce(convert(c), t) for c, t in zip(combined, dtypes))
        identity = tuple(_coerce(convert(c), t) for c, t in zip(ident, dtypes))
        combiner = CommReducer(lhs, rhs, result, identity, name)
        cond = convert(True) if where is None else convert(where)
        outs = tuple(Reduce(combiner, source, axes, cond, k) for k in range(len(source)))
        return outs if is_tuple else outs[0]

    reducer.__name__ = name
    return reducer


def _coerce(e: Expr, dtype: str) -> Expr:
    from ..ir.expr import cast
    return e if e.dtype == dtype else cast(e, dtype)


def _min(a, b):
    from ..ir.expr import Min
    return Min(a, b)


def _max(a, b):
    from ..ir.expr import Max
    return Max(a, b)


sum = comm_reducer(lambda x, y: x + y, lambda t: const(0, t), name="sum")  # noqa: A001
max = comm_reducer(_max, lambda t: min_value(t), name="max")  # noqa: A001
min = comm_reducer(_min, lambda t: max_value(t), name="min")  # noqa: A001
prod = comm_reducer(lambda x, y: x * y, lambda t: const(1, t), name="prod")
