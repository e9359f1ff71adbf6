"""ONNX normalizations -> batch_norm, instance_norm, layer_norm, lp_normalization,
mean_variance_normalization, lrn; GroupNormalization -> reshape / reduce_mean / elementwise ops.

BatchNormalization is converted in inference form only.  It counts as training, and is rejected,
when training_mode=1 (opset >= 14) or when the node uses the running-mean / variance outputs
(opsets 7-13 signal training that way).  Opset <= 6's is_test attribute is ignored, as ONNX
Runtime does: with one output the node is an inference.  LayerNormalization returns Mean and
InvStdDev only when the node uses them (the op's `stash` attribute).
"""
from __future__ import annotations

import numpy as np

from ..onnx import converter
from .nn_common import reject_extra_outputs, unsupported, wants_output


def _same_dtype(ctx, v, dtype: str, what: str):
    """`v` in `dtype`: constants are cast here, run-time values must already match."""
    if v is None or v.dtype == dtype:
        return v
    if ctx.is_const(v):
        return ctx.const(ctx.value_of(v).astype(dtype))
    raise unsupported(ctx, f"{what} has dtype {v.dtype} but X has {dtype}; mixed dtypes are only "
                           "supported for constant parameters")


@converter("BatchNormalization")
def batch_normalization(ctx, inputs: list, attrs: dict):
    if ctx.opset >= 14 and int(attrs.get("training_mode", 0)):
        raise unsupported(ctx, "training_mode=1 (batch statistics) is not supported; only inference")
    reject_extra_outputs(ctx, 1, "they exist only in training mode, which is not supported")
    if int(attrs.get("spatial", 1)) != 1:
        raise unsupported(ctx, "spatial=0 (per-activation statistics) is not supported")
    x = inputs[0]
    if len(inputs) < 5 or any(v is None for v in inputs[:5]):
        raise ValueError("inputs X, scale, B, input_mean and input_var are all required")
    params = [_same_dtype(ctx, v, x.dtype, what) for v, what in zip(inputs[1:5], ("scale", "B", "mean", "var"))]
    return ctx.add1("batch_norm", [x, *params], {"epsilon": float(attrs.get("epsilon", 1e-5)), "axis": 1})


@converter("InstanceNormalization")
def instance_normalization(ctx, inputs: list, attrs: dict):
    x, scale, bias = inputs[0], inputs[1], inputs[2]
    scale, bias = _same_dtype(ctx, scale, x.dtype, "scale"), _same_dtype(ctx, bias, x.dtype, "B")
    return ctx.add1("instance_norm", [x, scale, bias], {"epsilon": float(attrs.get("epsilon", 1e-5))})


@converter("LayerNormalization")
def layer_normalization(ctx, inputs: list, attrs: dict):
    stash_type = int(attrs.get("stash_type", 1))
    if stash_type != 1:
        raise unsupported(ctx, f"stash_type={stash_type} is not supported (only 1, float32)")
    x = inputs[0]
    scale = _same_dtype(ctx, inputs[1], x.dtype, "Scale")
    bias = _same_dtype(ctx, inputs[2] if len(inputs) > 2 else None, x.dtype, "B")
    stash = wants_output(ctx, 1) or wants_output(ctx, 2)
    outs = ctx.add("layer_norm", [x, scale, bias], {"axis": int(attrs.get("axis", -1)),
                                                    "epsilon": float(attrs.get("epsilon", 1e-5)), "stash": stash})
    return outs if stash else outs[:1]


@converter("LpNormalization")
def lp_normalization(ctx, inputs: list, attrs: dict):
    p = int(attrs.get("p", 2))
    if p not in (1, 2):
        raise ValueError(f"p={p} must be 1 or 2")
    return ctx.add1("lp_normalization", [inputs[0]], {"axis": int(attrs.get("axis", -1)), "p": p})


@converter("MeanVarianceNormalization")
def mean_variance_normalization(ctx, inputs: list, attrs: dict):
    axes = attrs.get("axes", (0, 2, 3))
    axes = tuple(int(a) for a in np.atleast_1d(axes))
    return ctx.add1("mean_variance_normalization", [inputs[0]], {"axes": axes})


@converter("LRN")
def lrn(ctx, inputs: list, attrs: dict):
    if "size" not in attrs:
        raise ValueError("the attribute size is required")
    return ctx.add1("lrn", [inputs[0]], {"size": int(attrs["size"]), "alpha": float(attrs.get("alpha", 1e-4)),
                                         "beta": float(attrs.get("beta", 0.75)), "bias": float(attrs.get("bias", 1.0))})


_STASH_TYPES = {1: "float32", 11: "float64", 10: "float16", 16: "bfloat16"}


def _per_channel(ctx, v, groups: int, channels: int, rank: int):
    """A GroupNormalization-18 per-group parameter repeated over each group's channels, shaped
    (C, 1, .., 1) to broadcast over (N, C, spatial..)."""
    if tuple(v.shape) != (groups,):
        raise ValueError(f"scale and bias have shape {tuple(v.shape)}; GroupNormalization-18 takes one "
                         f"value per group, ({groups},)")
    v = ctx.add1("expand", [ctx.add1("reshape", [v], {"shape": (groups, 1)})], {"shape": (groups, channels // groups)})
    return ctx.add1("reshape", [v], {"shape": (channels,) + (1,) * rank})


@converter("GroupNormalization", since=18)
def group_normalization(ctx, inputs: list, attrs: dict):
    """y = scale * (x - mean) / sqrt(var + epsilon) + bias with mean and variance over each
    instance's group of C / num_groups channels (and all spatial positions).  Opset 18 gives
    scale and bias per group, opset 21 per channel; from 21 the normalization runs in
    stash_type (float32 by default) and is cast back to X's type before the scale and bias."""
    x, scale, bias = inputs[0], inputs[1], inputs[2]
    if len(x.shape) < 2:
        raise ValueError(f"X has shape {tuple(x.shape)}; it must be (N, C, ..) with rank >= 2")
    n, c, rank = x.shape[0], x.shape[1], len(x.shape) - 2
    groups = int(attrs["num_groups"])
    if groups <= 0 or c % groups:
        raise ValueError(f"num_groups={groups} must divide the {c} channels")
    eps = float(attrs.get("epsilon", 1e-5))
    stash = x.dtype
    if ctx.opset >= 21:
        kind = int(attrs.get("stash_type", 1))
        if kind not in _STASH_TYPES:
            raise ValueError(f"stash_type={kind} is not a floating point type")
        stash = _STASH_TYPES[kind]
    xs = x if stash == x.dtype else ctx.add1("cast", [x], {"dtype": stash})
    grouped = ctx.add1("reshape", [xs], {"shape": (n, groups, -1)})
    mean = ctx.add1("reduce_mean", [grouped], {"axes": (2,), "keepdims": 1})
    centred = ctx.add1("sub", [grouped, mean])
    var = ctx.add1("reduce_mean", [ctx.add1("mul", [centred, centred])], {"axes": (2,), "keepdims": 1})
    std = ctx.add1("sqrt", [ctx.add1("add", [var, ctx.const(np.asarray(eps, stash))])])
    y = ctx.add1("reshape", [ctx.add1("div", [centred, std])], {"shape": tuple(x.shape)})
    y = y if stash == x.dtype else ctx.add1("cast", [y], {"dtype": x.dtype})
    if ctx.opset >= 21:
        for v, what in ((scale, "scale"), (bias, "bias")):
            if tuple(v.shape) != (c,):
                raise ValueError(f"{what} has shape {tuple(v.shape)}; it must be ({c},), one value per channel")
        scale = ctx.add1("reshape", [scale], {"shape": (c,) + (1,) * rank})
        bias = ctx.add1("reshape", [bias], {"shape": (c,) + (1,) * rank})
    else:
        scale, bias = _per_channel(ctx, scale, groups, c, rank), _per_channel(ctx, bias, groups, c, rank)
    return ctx.add1("add", [ctx.add1("mul", [y, scale]), bias])
