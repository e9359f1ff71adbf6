"""ONNX normalizations -> batch_norm, instance_norm, layer_norm, lp_normalization,
mean_variance_normalization, lrn; RMSNormalization as plain graph ops (its ONNX function body:
cast to the stash type, mean of squares over [axis, rank), divide by its root, cast back, scale),
which the fuser makes one kernel; GroupNormalization -> reshape / reduce_mean / elementwise ops.

BatchNormalization in inference normalizes with the given mean and variance.  In training
(training_mode=1 from opset 14; from opset 7 to 13 a node that uses the running-mean / variance
outputs) it normalizes with the batch's own statistics (population variance over every axis but
the channels) and returns the updated running statistics, input * momentum + batch * (1 -
momentum), and before opset 14 also the batch mean and variance.  Opset <= 6's is_test attribute
is ignored, as ONNX Runtime does: with one output the node is an inference.  LayerNormalization returns Mean and
InvStdDev only when the node uses them (the op's `stash` attribute).
"""
from __future__ import annotations

import numpy as np

from ..onnx import converter
from .elemwise_util import onnx_dtype
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
    training = int(attrs.get("training_mode", 0)) if ctx.opset >= 14 else \
        any(wants_output(ctx, k) for k in range(1, len(ctx.outputs)))
    if training and ctx.opset >= 7:
        return _batch_norm_training(ctx, inputs, attrs)
    reject_extra_outputs(ctx, 1, "they exist only in training mode")
    if int(attrs.get("spatial", 1)) != 1:
        raise unsupported(ctx, "spatial=0 (per-activation statistics) is not supported")
    x = inputs[0]
    if len(inputs) < 5 or any(v is None for v in inputs[:5]):
        raise ValueError("inputs X, scale, B, input_mean and input_var are all required")
    params = [_same_dtype(ctx, v, x.dtype, what) for v, what in zip(inputs[1:5], ("scale", "B", "mean", "var"))]
    return ctx.add1("batch_norm", [x, *params], {"epsilon": float(attrs.get("epsilon", 1e-5)), "axis": 1})


def _batch_norm_training(ctx, inputs: list, attrs: dict) -> list:
    x = inputs[0]
    if len(inputs) < 5 or any(v is None for v in inputs[:5]):
        raise ValueError("inputs X, scale, B, input_mean and input_var are all required")
    if int(attrs.get("spatial", 1)) != 1:
        raise unsupported(ctx, "spatial=0 (per-activation statistics) is not supported")
    scale, bias, mean_in, var_in = (_same_dtype(ctx, v, x.dtype, what)
                                    for v, what in zip(inputs[1:5], ("scale", "B", "mean", "var")))
    axes = tuple(k for k in range(x.ndim) if k != 1)
    channels = (x.shape[1],)
    per_channel = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    mean = ctx.add1("reduce_mean", [x], {"axes": axes, "keepdims": 1})
    centered = ctx.add1("sub", [x, mean])
    var = ctx.add1("reduce_mean", [ctx.add1("mul", [centered, centered])], {"axes": axes, "keepdims": 1})
    eps = ctx.const(np.array(float(attrs.get("epsilon", 1e-5)), dtype=x.dtype))
    normalized = ctx.add1("div", [centered, ctx.add1("sqrt", [ctx.add1("add", [var, eps])])])
    y = ctx.add1("add", [ctx.add1("mul", [normalized, ctx.add1("reshape", [scale], {"shape": per_channel})]),
                         ctx.add1("reshape", [bias], {"shape": per_channel})])
    batch_mean = ctx.add1("reshape", [mean], {"shape": channels})
    batch_var = ctx.add1("reshape", [var], {"shape": channels})
    momentum = float(attrs.get("momentum", 0.9))
    keep, take = (ctx.const(np.array(v, dtype=x.dtype)) for v in (momentum, 1.0 - momentum))

    def running(old, new):
        return ctx.add1("add", [ctx.add1("mul", [old, keep]), ctx.add1("mul", [new, take])])

    outs = [y, running(mean_in, batch_mean), running(var_in, batch_var)]
    return outs if ctx.opset >= 14 else outs + [batch_mean, batch_var]


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


@converter("RMSNormalization", since=23)
def rms_normalization(ctx, inputs: list, attrs: dict):
    x, scale = inputs[0], inputs[1]
    rank = len(x.shape)
    axis = int(attrs.get("axis", -1))
    if not -rank <= axis < rank:
        raise ValueError(f"axis={axis} is out of range for X of rank {rank}")
    axis %= rank
    stash = onnx_dtype(ctx, int(attrs.get("stash_type", 1)))
    xs = ctx.add1("cast", [x], {"dtype": stash}) if x.dtype != stash else x
    eps = ctx.const(np.array(float(attrs.get("epsilon", 1e-5)), dtype=np.float32).astype(stash))
    mean_sq = ctx.add1("reduce_mean", [ctx.add1("mul", [xs, xs])],
                       {"axes": tuple(range(axis, rank)), "keepdims": 1})
    normalized = ctx.add1("div", [xs, ctx.add1("sqrt", [ctx.add1("add", [mean_sq, eps])])])
    if normalized.dtype != x.dtype:
        normalized = ctx.add1("cast", [normalized], {"dtype": x.dtype})
    return ctx.add1("mul", [normalized, _same_dtype(ctx, scale, x.dtype, "scale")])


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
