"""ONNX RotaryEmbedding (opset 23) -> Graph: rotary position embedding as plain graph ops.

    X: [B, H, S, D] (4-D) or [B, S, H * D] (3-D, num_heads attribute) -- rotated in place
    cos, sin = cos_cache[position_ids], sin_cache[position_ids]   ([B, S, R / 2]; the caches are
               already per position when position_ids is absent)
    x1, x2 = the first R features split in halves, or their even / odd features (interleaved)
    rotated = (cos x1 - sin x2, sin x1 + cos x2)    concatenated, or interleaved back
    Y = rotated followed by the D - R features that are not rotated
"""
from __future__ import annotations

from ...graph.ir import Value
from ..onnx import converter
from . import rnn_graph as g


def _features(ctx, x: Value, start: int, stop: int, step: int) -> Value:
    """x[..., start:stop:step]."""
    axis = x.ndim - 1
    if step == 1:
        return g.slice_axis(ctx, x, axis, start, stop)
    return ctx.add1("slice", [x], {"starts": (start,), "ends": (stop,), "axes": (axis,), "steps": (step,)})


def _cache(ctx, cache: Value, position_ids: Value | None, batch: int, seq: int, half: int, what: str) -> Value:
    """The cache as [B, S, R / 2], gathered by position when position_ids is given."""
    if position_ids is not None:
        if cache.ndim != 2:
            raise ValueError(f"{what} must have shape [max_position, R / 2] with position_ids, got {cache.shape}")
        cache = ctx.add1("gather", [cache, position_ids], {"axis": 0})
    if tuple(cache.shape) != (batch, seq, half):
        raise ValueError(f"{what} must give shape [{batch}, {seq}, {half}] (batch, sequence, rotary dim / 2), "
                         f"got {cache.shape}")
    return cache


@converter("RotaryEmbedding", since=23)
def convert_rotary_embedding(ctx, inputs: list, attrs: dict) -> Value:
    x, cos_cache, sin_cache, position_ids = (list(inputs) + [None] * 4)[:4]
    if x.ndim == 4:
        batch, heads, seq, head = x.shape
        x4 = x
    elif x.ndim == 3:
        heads = int(attrs.get("num_heads", 0) or 0)
        batch, seq, hidden = x.shape
        if heads <= 0 or hidden % heads:
            raise ValueError(f"a 3-D input of hidden size {hidden} needs a num_heads attribute that divides it "
                             f"(got {heads or 'none'})")
        head = hidden // heads
        x4 = g.reshape(ctx, x, (batch, seq, heads, head))
    else:
        raise ValueError(f"X must have rank 3 or 4, got shape {x.shape}")
    rot = int(attrs.get("rotary_embedding_dim", 0) or 0) or head
    if rot > head or rot % 2:
        raise ValueError(f"rotary_embedding_dim {rot} must be even and at most the head size {head}")
    half = rot // 2
    # caches as [B, 1, S, R/2] against [B, H, S, .] (4-D) or [B, S, 1, R/2] against [B, S, H, .] (3-D)
    cache_shape = (batch, 1, seq, half) if x.ndim == 4 else (batch, seq, 1, half)
    cos = g.reshape(ctx, _cache(ctx, cos_cache, position_ids, batch, seq, half, "cos_cache"), cache_shape)
    sin = g.reshape(ctx, _cache(ctx, sin_cache, position_ids, batch, seq, half, "sin_cache"), cache_shape)
    interleaved = bool(attrs.get("interleaved", 0))
    if interleaved:
        x1, x2 = _features(ctx, x4, 0, rot, 2), _features(ctx, x4, 1, rot, 2)
    else:
        x1, x2 = _features(ctx, x4, 0, half, 1), _features(ctx, x4, half, rot, 1)
    real = g.sub(ctx, g.mul(ctx, cos, x1), g.mul(ctx, sin, x2))
    imag = ctx.add1("add", [g.mul(ctx, sin, x1), g.mul(ctx, cos, x2)])
    if interleaved:
        rotated = g.reshape(ctx, g.stack(ctx, [real, imag], 4), (*x4.shape[:3], rot))
    else:
        rotated = g.concat(ctx, [real, imag], 3)
    y = g.concat(ctx, [rotated, _features(ctx, x4, rot, head, 1)], 3) if rot < head else rotated
    return g.reshape(ctx, y, x.shape)
