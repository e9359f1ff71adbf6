"""ATen ops that create tensors (full, zeros, ones, arange, scalar_tensor, full_like, ...) ->
constants.  Their shapes are static, so each becomes a parameter of the graph."""
from __future__ import annotations

import numpy as np

from ..torch_convert import aten


def _const(ctx, value) -> object:
    return ctx.const(np.full(ctx.out_shape, value, dtype=ctx.out_dtypes[0]))


@aten("full", "full_like", "new_full")
def full(ctx, a: dict):
    value = a.get("fill_value")
    if hasattr(value, "dtype"):
        raise ctx.unsupported("a fill value computed at run time is not supported")
    return _const(ctx, value)


@aten("zeros", "zeros_like", "new_zeros", "empty", "empty_like", "new_empty", "empty_strided")
def zeros(ctx, a: dict):
    return _const(ctx, 0)


@aten("ones", "ones_like", "new_ones")
def ones(ctx, a: dict):
    return _const(ctx, 1)


@aten("scalar_tensor")
def scalar_tensor(ctx, a: dict):
    return _const(ctx, a["s"])


@aten("arange")
def arange(ctx, a: dict):
    start = a.get("start", 0) if "end" in a else 0
    end = a["end"]
    step = a.get("step", 1) or 1
    return ctx.const(np.arange(start, end, step).astype(ctx.out_dtypes[0]).reshape(ctx.out_shape))
