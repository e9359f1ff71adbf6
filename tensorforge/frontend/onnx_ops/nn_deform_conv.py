"""ONNX DeformConv (opset 19, 2-D) -> deform_im2col + one grouped matmul (+ bias) (frontend ->
Graph).

The sampled windows cols (N, C, KH, KW, OH, OW) are regrouped as (N, group, C/group * KH * KW,
OH * OW) and multiplied by the weights (group, OC/group, C/group * KH * KW), giving (N, group,
OC/group, OH * OW), which is the output (N, OC, OH, OW) once reshaped.
"""
from __future__ import annotations

from ...ops.nn_deform import deform_output_hw
from ..onnx import converter
from .nn_common import add_channel_bias, int_tuple
from .transform_util import input_at


@converter("DeformConv", since=19)
def deform_conv(ctx, inputs: list, attrs: dict):
    x, w, offset = inputs[0], inputs[1], inputs[2]
    bias, mask = input_at(inputs, 3), input_at(inputs, 4)
    if len(x.shape) != 4:
        raise NotImplementedError(f"node {ctx.node_name} (DeformConv, opset {ctx.opset}): X has shape "
                                  f"{tuple(x.shape)}; only 2-D data (N, C, H, W) is supported")
    n, c = x.shape[:2]
    oc = w.shape[0]
    group = int(attrs.get("group", 1))
    if len(w.shape) != 4 or group < 1 or c != w.shape[1] * group or oc % group:
        raise ValueError(f"W has shape {tuple(w.shape)}; with group={group} and X {tuple(x.shape)} it must be "
                         f"(OC, {c // max(group, 1)}, KH, KW) with OC divisible by {group}")
    kernel = int_tuple(attrs, "kernel_shape", w.shape[2:], 2)
    if tuple(kernel) != tuple(w.shape[2:]):
        raise ValueError(f"kernel_shape {kernel} disagrees with the weight's spatial shape {tuple(w.shape[2:])}")
    strides = int_tuple(attrs, "strides", (1, 1), 2)
    pads = int_tuple(attrs, "pads", (0, 0, 0, 0), 4)
    dilations = int_tuple(attrs, "dilations", (1, 1), 2)
    oh, ow = deform_output_hw(x.shape[2:], kernel, strides, pads, dilations)
    cols = ctx.add1("deform_im2col", [x, offset, mask] if mask is not None else [x, offset],
                    {"kernel": kernel, "strides": strides, "pads": pads, "dilations": dilations,
                     "offset_group": int(attrs.get("offset_group", 1))})
    k = (c // group) * kernel[0] * kernel[1]
    cols = ctx.add1("reshape", [cols], {"shape": (n, group, k, oh * ow)})
    weights = ctx.add1("reshape", [w], {"shape": (group, oc // group, k)})
    y = ctx.add1("reshape", [ctx.add1("matmul", [weights, cols])], {"shape": (n, oc, oh, ow)})
    return add_channel_bias(ctx, y, bias)
