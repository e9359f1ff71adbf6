"""Graph-building helpers for the converters that decompose a recurrent net or attention into
plain graph ops (ONNX -> Graph): matmuls, slices, concats, reshapes and the ONNX RNN activation
functions.  Each helper adds nodes through the ConvertContext and returns the new Value; nodes
whose inputs are all constants (weights) are folded by the builder, so weight transposes and
bias sums cost nothing at run time.

Not a converter module: it registers nothing.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ...graph.ir import Value


# -- shape and layout -----------------------------------------------------------------------------
def reshape(ctx, x: Value, shape: Sequence[int]) -> Value:
    shape = tuple(int(d) for d in shape)
    if tuple(x.shape) == shape:
        return x
    return ctx.add1("reshape", [x], {"shape": shape})


def transpose(ctx, x: Value, perm: Sequence[int]) -> Value:
    perm = tuple(int(p) for p in perm)
    if perm == tuple(range(len(perm))):
        return x
    return ctx.add1("transpose", [x], {"perm": perm})


def slice_axis(ctx, x: Value, axis: int, start: int, stop: int) -> Value:
    """x[..., start:stop, ...] along `axis` (step 1)."""
    axis = axis % x.ndim
    if start == 0 and stop == x.shape[axis]:
        return x
    return ctx.add1("slice", [x], {"starts": (int(start),), "ends": (int(stop),), "axes": (axis,),
                                   "steps": (1,)})


def slice_block(ctx, x: Value, rows: tuple, cols: tuple) -> Value:
    """x[rows[0]:rows[1], cols[0]:cols[1]] of a matrix, as one slice."""
    if cols == (0, x.shape[1]):
        return slice_axis(ctx, x, 0, *rows)
    return ctx.add1("slice", [x], {"starts": (int(rows[0]), int(cols[0])), "ends": (int(rows[1]), int(cols[1])),
                                   "axes": (0, 1), "steps": (1, 1)})


def take(ctx, x: Value, axis: int, index: int) -> Value:
    """x[index] along `axis`, with that axis removed."""
    y = slice_axis(ctx, x, axis, index, index + 1)
    shape = tuple(d for k, d in enumerate(x.shape) if k != axis % x.ndim)
    return reshape(ctx, y, shape)


def split_equal(ctx, x: Value, axis: int, parts: int) -> list[Value]:
    """`parts` equal slices of x along `axis`."""
    size = x.shape[axis] // parts
    return [slice_axis(ctx, x, axis, k * size, (k + 1) * size) for k in range(parts)]


def concat(ctx, xs: Sequence[Value], axis: int) -> Value:
    xs = list(xs)
    if len(xs) == 1:
        return xs[0]
    return ctx.add1("concat", xs, {"axis": int(axis)})


def stack(ctx, xs: Sequence[Value], axis: int) -> Value:
    """Stack equal-shaped values along a new axis (reshape each, then concat)."""
    shape = list(xs[0].shape)
    axis = axis % (len(shape) + 1)
    expanded = tuple(shape[:axis] + [1] + shape[axis:])
    return concat(ctx, [reshape(ctx, x, expanded) for x in xs], axis)


# -- arithmetic -----------------------------------------------------------------------------------
def matmul(ctx, a: Value, b: Value, transpose_b: bool = False) -> Value:
    """numpy.matmul(a, b), b's last two axes swapped first when `transpose_b`."""
    return ctx.add1("matmul", [a, b], {"transpose_b": True} if transpose_b else None)


def dense(ctx, x: Value, w: Value) -> Value:
    """x [m, k] @ w[n, k]^T: a fully connected layer, weights stored [out, in] as ONNX RNNs do."""
    return ctx.add1("dense", [x, w])


def add(ctx, a: Value | None, b: Value | None) -> Value | None:
    """a + b where either may be None (an absent, i.e. zero, term)."""
    if a is None:
        return b
    if b is None:
        return a
    return ctx.add1("add", [a, b])


def sub(ctx, a: Value, b: Value) -> Value:
    return ctx.add1("sub", [a, b])


def mul(ctx, a: Value, b: Value) -> Value:
    return ctx.add1("mul", [a, b])


def scalar(ctx, value: float, dtype: str) -> Value:
    return ctx.const(np.array(value, dtype=dtype))


def scale(ctx, x: Value, factor: float) -> Value:
    return x if factor == 1.0 else mul(ctx, x, scalar(ctx, factor, x.dtype))


def unary(ctx, op: str, x: Value, **attrs) -> Value:
    return ctx.add1(op, [x], attrs)


def clip(ctx, x: Value, low: float, high: float) -> Value:
    return ctx.add1("clip", [x], {"min": float(low), "max": float(high)})


def where(ctx, cond: Value, a: Value, b: Value) -> Value:
    return ctx.add1("where", [cond, a, b])


# -- the ONNX RNN activation functions ------------------------------------------------------------
# name -> (uses alpha, uses beta, default alpha, default beta); names are matched case-insensitively
ACTIVATIONS = {
    "relu": (False, False, None, None),
    "tanh": (False, False, None, None),
    "sigmoid": (False, False, None, None),
    "affine": (True, True, None, None),
    "leakyrelu": (True, False, 0.01, None),
    "thresholdedrelu": (True, False, 1.0, None),
    "scaledtanh": (True, True, None, None),
    "hardsigmoid": (True, True, 0.2, 0.5),
    "elu": (True, False, 1.0, None),
    "softsign": (False, False, None, None),
    "softplus": (False, False, None, None),
}


def activation(ctx, name: str, x: Value, alpha: float | None = None, beta: float | None = None) -> Value:
    """Apply the ONNX RNN activation `name` (with its alpha/beta) to x."""
    key = name.lower()
    if key in ("relu", "tanh", "sigmoid"):
        return unary(ctx, key, x)
    if key == "affine":
        return add(ctx, scale(ctx, x, alpha), scalar(ctx, beta, x.dtype))
    if key == "scaledtanh":
        return scale(ctx, unary(ctx, "tanh", scale(ctx, x, beta)), alpha)
    if key == "leakyrelu":
        return where(ctx, ctx.add1("less", [x, scalar(ctx, 0, x.dtype)]), scale(ctx, x, alpha), x)
    if key == "thresholdedrelu":
        return where(ctx, ctx.add1("greater", [x, scalar(ctx, alpha, x.dtype)]), x, scalar(ctx, 0, x.dtype))
    if key == "hardsigmoid":
        return clip(ctx, add(ctx, scale(ctx, x, alpha), scalar(ctx, beta, x.dtype)), 0.0, 1.0)
    if key == "elu":
        neg = scale(ctx, sub(ctx, unary(ctx, "exp", x), scalar(ctx, 1, x.dtype)), alpha)
        return where(ctx, ctx.add1("less", [x, scalar(ctx, 0, x.dtype)]), neg, x)
    if key == "softsign":
        return ctx.add1("div", [x, add(ctx, unary(ctx, "abs", x), scalar(ctx, 1, x.dtype))])
    if key == "softplus":
        return unary(ctx, "log", add(ctx, unary(ctx, "exp", x), scalar(ctx, 1, x.dtype)))
    raise NotImplementedError(f"RNN activation {name!r} is not supported; "
                              f"supported: {', '.join(sorted(ACTIVATIONS))}")
