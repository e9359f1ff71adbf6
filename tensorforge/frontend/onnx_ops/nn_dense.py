"""ONNX Gemm and MatMul -> dense / matmul (+ "mul" / "add" nodes for Gemm's alpha, beta and C).

    Gemm: Y = alpha * A' @ B' + beta * C      (A' = A.T with transA, B' = B.T with transB)

becomes `dense(A, W)` when A is not transposed and B is either transposed (W = B) or a constant
(W = B.T, transposed here once per constant however many nodes read it); otherwise
`matmul(A, B, transpose_a, transpose_b)`.  A 2-D MatMul with a constant right operand becomes
`dense` the same way, so that the dense schedules apply to fully connected layers exported as
MatMul.
"""
from __future__ import annotations

import numpy as np

from ..onnx import converter
from .nn_common import unsupported


def _scalar(ctx, value: float, dtype: str):
    return ctx.const(np.asarray(value, dtype=dtype))


@converter("Gemm")
def gemm(ctx, inputs: list, attrs: dict):
    a, b = inputs[0], inputs[1]
    c = inputs[2] if len(inputs) > 2 else None
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    trans_a, trans_b = bool(attrs.get("transA", 0)), bool(attrs.get("transB", 0))
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise ValueError(f"A {a.shape} and B {b.shape} must be 2-D")
    integer = not a.dtype.startswith("float")
    if integer and (alpha != 1.0 or (c is not None and beta not in (0.0, 1.0))):
        raise unsupported(ctx, f"alpha={alpha} / beta={beta} other than 1 on integer ({a.dtype}) operands")
    if not trans_a and (trans_b or ctx.is_const(b)):
        w = b if trans_b else ctx.transposed_const(b)
        y = ctx.add1("dense", [a, w])
    else:
        y = ctx.add1("matmul", [a, b], {"transpose_a": trans_a, "transpose_b": trans_b})
    if alpha != 1.0:
        y = ctx.add1("mul", [y, _scalar(ctx, alpha, y.dtype)])
    if c is None or beta == 0.0:
        return y
    if beta != 1.0:
        c = ctx.const(ctx.value_of(c) * np.asarray(beta, c.dtype)) if ctx.is_const(c) \
            else ctx.add1("mul", [c, _scalar(ctx, beta, c.dtype)])
    out = ctx.add1("add", [y, c])
    if tuple(out.shape) != tuple(y.shape):
        raise ValueError(f"C {c.shape} does not broadcast to the product's shape {y.shape}")
    return out


@converter("MatMul")
def matmul(ctx, inputs: list, attrs: dict):
    a, b = inputs[0], inputs[1]
    if len(a.shape) == 2 and len(b.shape) == 2 and ctx.is_const(b) and not ctx.is_const(a):
        return ctx.add1("dense", [a, ctx.transposed_const(b)])
    return ctx.add1("matmul", [a, b])
