"""Helpers shared by the ATen converters (no converters are registered here): turning Python
scalars into constants of a tensor's dtype, normalizing dims, reading int lists, the moments of
the norms and of var/std."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ...graph.ir import Value


def as_value(ctx, x: Any, like: Value | None = None, dtype: str | None = None) -> Value:
    """`x` as a Value: a Value as it is, a Python number as a 0-d constant of `dtype` (default:
    the dtype of `like`, or float32 / int64 / bool by the number's type)."""
    if isinstance(x, Value):
        return x
    if dtype is None:
        if like is not None:
            dtype = like.dtype
        elif isinstance(x, bool):
            dtype = "bool"
        elif isinstance(x, int):
            dtype = "int64"
        else:
            dtype = "float32"
    return ctx.const(np.asarray(x, dtype=dtype))


def same_dtype(ctx, a: Value, b: Value, dtype: str) -> tuple[Value, Value]:
    """Both operands in `dtype` (PyTorch's promoted result type): cast where they differ."""
    return cast(ctx, a, dtype), cast(ctx, b, dtype)


def cast(ctx, v: Value, dtype: str) -> Value:
    if v.dtype == dtype:
        return v
    if ctx.is_const(v):
        return ctx.const(ctx.value_of(v).astype(dtype))
    return ctx.add1("cast", [v], {"dtype": dtype})


def broadcast_to(ctx, v: Value, shape: Sequence[int]) -> Value:
    """`v` broadcast to `shape` (itself where it has that shape)."""
    return v if tuple(v.shape) == tuple(shape) else ctx.add1("expand", [v], {"shape": tuple(shape)})


def moments(ctx, x: Value, axes: tuple, keepdims: bool = True, correction: float = 0) -> tuple[Value, Value, Value]:
    """(mean, x - mean, variance) over `axes`: the variance is the sum of the squared deviations
    over count - correction (0: the population variance of the norms; 1: Bessel's, torch.var's
    default).  The mean always keeps `axes` as size 1 (it broadcasts against x); the variance
    keeps them where `keepdims`."""
    mean = ctx.add1("reduce_mean", [x], {"axes": axes, "keepdims": 1})
    centered = ctx.add1("sub", [x, mean])
    squares = ctx.add1("mul", [centered, centered])
    if correction == 0:
        return mean, centered, ctx.add1("reduce_mean", [squares], {"axes": axes, "keepdims": int(keepdims)})
    count = int(np.prod([x.shape[k] for k in axes]))
    total = ctx.add1("reduce_sum", [squares], {"axes": axes, "keepdims": int(keepdims)})
    return mean, centered, ctx.add1("div", [total, as_value(ctx, float(max(count - correction, 0)), x)])


def rsqrt_eps(ctx, var: Value, eps: float) -> Value:
    """1 / sqrt(var + eps)."""
    shifted = ctx.add1("add", [var, ctx.const(np.asarray(eps, var.dtype))])
    return ctx.add1("reciprocal", [ctx.add1("sqrt", [shifted])])


def norm_dim(dim: int, rank: int) -> int:
    if not -max(rank, 1) <= dim < max(rank, 1):
        raise ValueError(f"dim {dim} is out of range for rank {rank}")
    return dim % max(rank, 1)


def ints(x: Any, length: int | None = None) -> tuple:
    """An int or a sequence of ints as a tuple (an int repeated `length` times)."""
    if isinstance(x, (int, np.integer)):
        return (int(x),) * (length or 1)
    values = tuple(int(v) for v in x)
    if length is not None and len(values) == 1 and length > 1:
        values = values * length
    return values


def dims_list(dim: Any, rank: int) -> tuple | None:
    """A reduction's `dim` argument as normalized axes (None or [] means all axes)."""
    if dim is None:
        return None
    values = (dim,) if isinstance(dim, int) else tuple(dim)
    if not values:
        return None
    return tuple(norm_dim(int(d), rank) for d in values)


def int_list(values: Sequence) -> tuple:
    return tuple(int(v) for v in values)
