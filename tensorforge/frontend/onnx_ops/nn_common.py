"""Helpers shared by the NN-family ONNX converters (no converters are registered here): reading
windowed-op attributes, asking which optional outputs a node uses, and adding a channel bias."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ...graph.ir import Value

SPATIAL_RANKS = (1, 2, 3)


def spatial_rank(ctx, x: Value, what: str = "input X") -> int:
    """The number of spatial axes of NC+spatial data; NotImplementedError outside 1-3."""
    rank = len(x.shape) - 2
    if rank not in SPATIAL_RANKS:
        raise NotImplementedError(f"node {ctx.node_name} ({ctx.op_type}, opset {ctx.opset}): {what} has shape "
                                  f"{x.shape}; only 1-D, 2-D and 3-D spatial data (rank 3 to 5) is supported")
    return rank


def int_tuple(attrs: dict, key: str, default: Sequence[int] | None, length: int | None = None) -> tuple | None:
    """attrs[key] as a tuple of ints (or `default`), checked to hold `length` entries.  (from_onnx
    prefixes a ValueError raised in a converter with the node's name and type.)"""
    value = attrs.get(key)
    if value is None:
        return tuple(default) if default is not None else None
    value = tuple(int(v) for v in (value if isinstance(value, (tuple, list, np.ndarray)) else (value,)))
    if length is not None and len(value) != length:
        raise ValueError(f"attribute {key}={value} must hold {length} integers")
    return value


def wants_output(ctx, index: int) -> bool:
    """Whether the ONNX node names (and so uses) its output number `index`."""
    return index < len(ctx.outputs) and ctx.outputs[index] != ""


def reject_extra_outputs(ctx, keep: int, why: str) -> None:
    """NotImplementedError when the node uses an output beyond the first `keep`."""
    extra = [k for k in range(keep, len(ctx.outputs)) if wants_output(ctx, k)]
    if extra:
        raise NotImplementedError(f"node {ctx.node_name} ({ctx.op_type}, opset {ctx.opset}): output(s) "
                                  f"{[ctx.outputs[k] for k in extra]} are not supported: {why}")


def channel_bias_shape(size: int, rank: int) -> tuple:
    """Shape (C, 1, .., 1) that broadcasts a per-channel vector over NC+spatial data."""
    return (size,) + (1,) * rank


def add_channel_bias(ctx, y: Value, bias: Value | None) -> Value:
    """y + bias along axis 1, as a separate broadcast "add" node (fusion folds it into the
    producer's epilogue).  A constant bias is reshaped here; one computed at run time gets a
    "reshape" node."""
    if bias is None:
        return y
    rank = len(y.shape) - 2
    if len(bias.shape) != 1 or bias.shape[0] != y.shape[1]:
        raise ValueError(f"bias B has shape {bias.shape}, expected ({y.shape[1]},)")
    shape = channel_bias_shape(y.shape[1], rank)
    if ctx.is_const(bias):
        b = ctx.const(ctx.value_of(bias).reshape(shape))
    else:
        b = ctx.add1("reshape", [bias], {"shape": shape})
    return ctx.add1("add", [y, b])


def unsupported(ctx, what: str) -> NotImplementedError:
    return NotImplementedError(f"node {ctx.node_name} ({ctx.op_type}, opset {ctx.opset}): {what}")
