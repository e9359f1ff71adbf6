"""ONNX CausalConvWithState (opset 27) -> Graph: a stateful causal depthwise 1-D convolution as
plain graph ops.

    padded = concat(past_state or zeros [B, C, k - 1], input)     along the length
    output = conv1d(padded, weight [C, 1, k], groups = C) + bias  valid padding: length L
    output = output * sigmoid(output)                             activation "silu" / "swish", in float32
    present_state = padded[:, :, -(k - 1):]                       the last k - 1 positions
"""
from __future__ import annotations

import numpy as np

from ..onnx import converter
from . import rnn_graph as g
from .nn_common import add_channel_bias

ACTIVATIONS = ("none", "silu", "swish")


@converter("CausalConvWithState", since=27)
def convert_causal_conv_with_state(ctx, inputs: list, attrs: dict) -> list:
    x, w, bias, past = (list(inputs) + [None] * 4)[:4]
    activation = str(attrs.get("activation", "none"))
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation {activation!r} is not one of {', '.join(ACTIVATIONS)}")
    if x.ndim != 3:
        raise ValueError(f"input must have rank 3 [batch, channels, length], got shape {x.shape}")
    batch, channels, _ = x.shape
    if w.ndim != 3 or w.shape[:2] != (channels, 1):
        raise ValueError(f"weight must have shape [{channels}, 1, k] for {channels} channels, got {w.shape}")
    k = w.shape[2]
    if k < 1:
        raise ValueError(f"the kernel size (weight's last dimension) must be at least 1, got {k}")
    state_shape = (batch, channels, k - 1)
    if past is not None and tuple(past.shape) != state_shape:
        raise ValueError(f"past_state has shape {past.shape}, expected {state_shape} [batch, channels, k - 1]")
    if bias is not None and tuple(bias.shape) != (channels,):
        raise ValueError(f"bias must have shape [{channels}], got {bias.shape}")
    if k == 1:
        padded = x
        present = ctx.const(np.zeros(state_shape, x.dtype))
    else:
        pad = past if past is not None else ctx.const(np.zeros(state_shape, x.dtype))
        padded = g.concat(ctx, [pad, x], 2)
        present = g.slice_axis(ctx, padded, 2, padded.shape[2] - (k - 1), padded.shape[2])
    y = _conv(ctx, padded, w, bias, channels)
    if activation != "none":
        y32 = _cast(ctx, y, _WIDE.get(y.dtype, y.dtype))
        y = _cast(ctx, g.mul(ctx, y32, g.unary(ctx, "sigmoid", y32)), x.dtype)
    return [y, present]


# Half-precision data is convolved, biased and activated in float32 (rounded back once after the
# convolution and once at the end), as the operator's definition computes it.
_WIDE = {"float16": "float32"}


def _cast(ctx, x, dtype: str):
    return x if x.dtype == dtype else ctx.add1("cast", [x], {"dtype": dtype})


def _conv(ctx, padded, w, bias, channels: int):
    """conv1d(padded, w) + bias over the channels, accumulated in float32 for float16 data."""
    wide = _WIDE.get(padded.dtype, padded.dtype)
    y = ctx.add1("conv1d", [_cast(ctx, padded, wide), _cast(ctx, w, wide)], {"groups": channels})
    y = add_channel_bias(ctx, y, _cast(ctx, bias, wide) if bias is not None else None)
    return _cast(ctx, y, padded.dtype)
