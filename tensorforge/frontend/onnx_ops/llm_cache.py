"""ONNX SwiGLU (opset 28) and TensorScatter (opset 24) -> Graph, as plain graph ops.

SwiGLU:  Y = swish_alpha(A) * B,  swish_alpha(a) = a * sigmoid(alpha * a)  (A and B of one shape)

TensorScatter writes `update` ([.., S at axis, ..]) into a copy of the cache ([.., M at axis, ..])
from each batch row's write index on (wrapping modulo M in "circular" mode).  It is computed as
a gather, so every cache position reads either the update or the old cache:

    s[b, m] = m - write_indices[b]          (mod M when circular)
    present[.., m, ..] = update[.., s, ..]  where 0 <= s < S, else past[.., m, ..]

Positions a linear write would put past the end of the cache are dropped.
"""
from __future__ import annotations

import numpy as np

from ...graph.ir import Value
from ..onnx import converter
from . import rnn_graph as g


@converter("SwiGLU", since=28)
def convert_swiglu(ctx, inputs: list, attrs: dict) -> Value:
    a, b = inputs[0], inputs[1]
    if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
        raise ValueError(f"A {a.shape} {a.dtype} and B {b.shape} {b.dtype} must have the same shape and dtype "
                         "(SwiGLU does not broadcast)")
    return g.mul(ctx, ctx.add1("swish", [a], {"alpha": float(attrs.get("alpha", 1.0))}), b)


@converter("TensorScatter", since=24)
def convert_tensor_scatter(ctx, inputs: list, attrs: dict) -> Value:
    past, update, write = (list(inputs) + [None] * 3)[:3]
    mode = str(attrs.get("mode", "linear"))
    if mode not in ("linear", "circular"):
        raise ValueError(f"mode {mode!r} is not one of linear, circular")
    rank = past.ndim
    axis = int(attrs.get("axis", -2))
    if not -rank <= axis < rank or axis % rank == 0:
        raise ValueError(f"axis {axis} must name a non-batch axis of the rank-{rank} cache")
    axis %= rank
    size, steps = past.shape[axis], update.shape[axis]
    if update.ndim != rank or any(u != p for k, (u, p) in enumerate(zip(update.shape, past.shape)) if k != axis) \
            or steps > size:
        raise ValueError(f"update {update.shape} must match past_cache {past.shape} outside axis {axis} and be "
                         "no longer along it")
    batch = past.shape[0]
    if write is None:
        write = ctx.const(np.zeros(batch, np.int64))
    elif tuple(write.shape) != (batch,):
        raise ValueError(f"write_indices must have shape [{batch}], got {write.shape}")
    write = write if write.dtype == "int64" else ctx.add1("cast", [write], {"dtype": "int64"})
    # s[b, m] shaped [B, 1, .., M (at axis), 1, ..] so that it broadcasts over the cache
    positions = ctx.const(np.arange(size, dtype=np.int64).reshape([size if k == axis else 1 for k in range(rank)]))
    s = g.sub(ctx, positions, g.reshape(ctx, write, (batch,) + (1,) * (rank - 1)))
    if mode == "circular":
        s = ctx.add1("mod", [s, ctx.const(np.array(size, np.int64))])
    inside = ctx.add1("logical_and", [ctx.add1("greater_or_equal", [s, ctx.const(np.array(0, np.int64))]),
                                      ctx.add1("less", [s, ctx.const(np.array(steps, np.int64))])])
    index = ctx.add1("expand", [g.clip(ctx, s, 0, steps - 1)], {"shape": tuple(past.shape)})
    gathered = ctx.add1("gather_elements", [update, index], {"axis": axis})
    return g.where(ctx, inside, gathered, past)
