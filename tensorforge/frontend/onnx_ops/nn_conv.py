"""ONNX Conv and ConvTranspose -> conv{1,2,3}d / conv_transpose{1,2,3}d (+ a broadcast "add" for B).

auto_pad and ConvTranspose's output_shape are resolved here into explicit padding, so the graph
ops only know explicit (begin.., end..) padding.  The bias is a separate node (see
nn_common.add_channel_bias) so that fusion can fold it into the convolution's epilogue.
"""
from __future__ import annotations

from ...ops.nn_window import effective_kernel, resolve_auto_pad
from ..onnx import converter
from .nn_common import add_channel_bias, int_tuple, spatial_rank, unsupported


def _kernel(ctx, attrs: dict, weight, rank: int) -> tuple:
    kernel = int_tuple(attrs, "kernel_shape", weight.shape[2:], rank)
    if tuple(kernel) != tuple(weight.shape[2:]):
        raise ValueError(f"kernel_shape {kernel} disagrees with the weight's spatial shape {weight.shape[2:]}")
    return kernel


def _inputs(ctx, inputs: list) -> tuple:
    x, w = inputs[0], inputs[1]
    b = inputs[2] if len(inputs) > 2 else None
    if x is None or w is None:
        raise ValueError("inputs X and W are required")
    if len(w.shape) != len(x.shape):
        raise ValueError(f"W has shape {w.shape}, expected rank {len(x.shape)} like X {x.shape}")
    return x, w, b


@converter("Conv")
def conv(ctx, inputs: list, attrs: dict):
    x, w, b = _inputs(ctx, inputs)
    rank = spatial_rank(ctx, x)
    kernel = _kernel(ctx, attrs, w, rank)
    strides = int_tuple(attrs, "strides", (1,) * rank, rank)
    dilations = int_tuple(attrs, "dilations", (1,) * rank, rank)
    pads = resolve_auto_pad(attrs.get("auto_pad", "NOTSET"), x.shape[2:], kernel, strides, dilations,
                            int_tuple(attrs, "pads", None), op="Conv")
    y = ctx.add1(f"conv{rank}d", [x, w], {"strides": strides, "padding": pads, "dilations": dilations,
                                          "groups": int(attrs.get("group", 1))})
    return add_channel_bias(ctx, y, b)


def transpose_padding(auto_pad: str, in_shape: tuple, kernel: tuple, strides: tuple, dilations: tuple,
                      output_padding: tuple, output_shape: tuple | None, pads: tuple | None) -> tuple:
    """ConvTranspose padding (begin.., end..).  With output_shape (or SAME_* auto_pad, whose output
    is input * stride) the total padding is the natural size minus the wanted one, split with the
    odd cell at the end for SAME_UPPER and at the beginning otherwise; a wanted size beyond the
    natural one grows the output at the end (as ONNX Runtime does)."""
    rank = len(kernel)
    if output_shape is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        output_shape = tuple(in_shape[i] * strides[i] for i in range(rank))
    if output_shape is None:
        if auto_pad == "VALID":
            return (0,) * (2 * rank)
        pads = pads if pads is not None else (0,) * (2 * rank)
        if len(pads) != 2 * rank:
            raise ValueError(f"pads {pads} must hold {2 * rank} integers")
        return tuple(pads)
    begins, ends = [], []
    for i in range(rank):
        natural = strides[i] * (in_shape[i] - 1) + output_padding[i] + effective_kernel(kernel[i], dilations[i])
        total = natural - output_shape[i]
        if total < 0:
            begins.append(0)
            ends.append(total)
        elif auto_pad == "SAME_UPPER":
            begins.append(total // 2)
            ends.append(total - total // 2)
        else:
            begins.append(total - total // 2)
            ends.append(total // 2)
    return tuple(begins + ends)


@converter("ConvTranspose")
def conv_transpose(ctx, inputs: list, attrs: dict):
    x, w, b = _inputs(ctx, inputs)
    rank = spatial_rank(ctx, x)
    kernel = _kernel(ctx, attrs, w, rank)
    strides = int_tuple(attrs, "strides", (1,) * rank, rank)
    dilations = int_tuple(attrs, "dilations", (1,) * rank, rank)
    output_padding = int_tuple(attrs, "output_padding", (0,) * rank)
    if len(output_padding) == 2 * rank:  # some exporters write begin and end values; only the end counts
        output_padding = output_padding[rank:]
    if len(output_padding) != rank:
        raise ValueError(f"output_padding {output_padding} must hold {rank} integers")
    output_shape = int_tuple(attrs, "output_shape", None)
    if output_shape is not None and len(output_shape) == rank + 2:
        output_shape = output_shape[2:]
    if output_shape is not None and len(output_shape) != rank:
        raise ValueError(f"output_shape {output_shape} must hold {rank} integers (the spatial shape)")
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if auto_pad not in ("NOTSET", "", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise unsupported(ctx, f"auto_pad={auto_pad!r} is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID")
    pads = transpose_padding(auto_pad, x.shape[2:], kernel, strides, dilations, output_padding, output_shape,
                             int_tuple(attrs, "pads", None))
    y = ctx.add1(f"conv_transpose{rank}d", [x, w],
                 {"strides": strides, "padding": pads, "output_padding": output_padding,
                  "dilations": dilations, "groups": int(attrs.get("group", 1))})
    return add_channel_bias(ctx, y, b)
