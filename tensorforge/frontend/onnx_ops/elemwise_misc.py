"""ONNX Clip, Cast, CastLike, Identity and Dropout -> tensorforge ops (frontend -> Graph).

* Clip: opsets 1-10 give the bounds as attributes (opsets 6-10 default to +-FLT_MAX); opset 11
  gives them as optional inputs, which become attributes when constant and stay tensor inputs
  when the model computes them.
* Cast / CastLike become `cast` to a tensorforge dtype, or `cast_narrow` (a host kernel with
  ONNX's float8 saturation and float8e8m0 rounding rules: `saturate`, opset 19+, and
  `round_mode`, opset 24+) when either side is a narrow type (float8, float4, int4, int2, ...).
  A cast to or from strings runs on the host (frontend/onnx_host/cast_string.py); other element
  types tensorforge lacks (complex, ...) raise NotImplementedError.
* BitCast (26+) becomes `bitcast`: each element's bits read as the `to` type of equal width.
* Dropout in inference is an identity, and an all-true mask (all-ones of X's type before opset
  10) when the node asks for one.  training_mode=True with a nonzero ratio draws a random mask:
  the staged model runs it on the host (frontend/onnx_host/random_ops.py).
"""
from __future__ import annotations

import numpy as np

from ...ir import dtype as dt
from ..onnx import RunOnHost, converter
from .elemwise_util import input_at, onnx_dtype, scalar_of

FLT_MAX = float(np.finfo(np.float32).max)


@converter("Identity")
def convert_identity(ctx, inputs, attrs):
    return ctx.add1("identity", [inputs[0]])


# -- Clip -----------------------------------------------------------------------------------------

@converter("Clip")
def convert_clip(ctx, inputs, attrs):
    x = inputs[0]
    if ctx.opset < 11:
        default = FLT_MAX if ctx.opset >= 6 else None
        lo, hi = attrs.get("min", -default if default else None), attrs.get("max", default)
        return ctx.add1("clip", [x], {"min": lo, "max": hi})
    tensors, bounds = [x, None, None], {"min": None, "max": None}
    for k, key in ((1, "min"), (2, "max")):
        v = input_at(inputs, k)
        if v is None:
            continue
        if ctx.is_const(v):
            bounds[key] = scalar_of(ctx, v, f"Clip {key}")
        else:
            tensors[k] = v
    return ctx.add1("clip", tensors, bounds)


# -- Cast -----------------------------------------------------------------------------------------

@converter("Cast")
def convert_cast(ctx, inputs, attrs):
    to = attrs.get("to")
    if to is None:
        raise ValueError("Cast: the 'to' attribute is required")
    if isinstance(to, str):   # opsets 1-5 spell the type as a string
        from onnx import TensorProto
        to = TensorProto.DataType.Value(to.upper())
    if int(to) == 8:          # TensorProto.STRING: formatting numbers as text runs on the host
        raise RunOnHost(f"node {ctx.node_name} (Cast) casts to strings, which runs on the host")
    return _cast(ctx, inputs[0], onnx_dtype(ctx, int(to)), attrs)


@converter("CastLike", since=15)
def convert_cast_like(ctx, inputs, attrs):
    return _cast(ctx, inputs[0], inputs[1].dtype, attrs)


def _cast(ctx, x, dtype: str, attrs: dict):
    if not (dt.is_narrow(x.dtype) or dt.is_narrow(dtype)):
        return ctx.add1("cast", [x], {"dtype": dtype})
    if x.dtype == dtype:
        return ctx.add1("identity", [x])
    saturate = int(attrs.get("saturate", 1)) if ctx.opset >= 19 else 1
    round_mode = str(attrs.get("round_mode", "up")) if ctx.opset >= 24 else "up"
    return ctx.add1("cast_narrow", [x], {"dtype": dtype, "saturate": saturate, "round_mode": round_mode})


@converter("BitCast", since=26)
def convert_bitcast(ctx, inputs, attrs):
    to = attrs.get("to")
    if to is None:
        raise ValueError("BitCast: the 'to' attribute is required")
    dtype = onnx_dtype(ctx, int(to))
    if dtype == inputs[0].dtype:
        return ctx.add1("identity", [inputs[0]])
    return ctx.add1("bitcast", [inputs[0]], {"dtype": dtype})


# -- Dropout --------------------------------------------------------------------------------------

def _training(ctx, inputs) -> bool:
    """Whether the node really drops values: training_mode is true and the ratio nonzero.  Both
    must be constants (value_of raises a RuntimeValueError naming the input otherwise)."""
    mode = input_at(inputs, 2)
    if mode is None or not bool(np.asarray(ctx.value_of(mode, "training_mode")).reshape(-1)[0]):
        return False
    ratio = input_at(inputs, 1)
    return ratio is None or scalar_of(ctx, ratio, "ratio") != 0    # the default ratio is 0.5


@converter("Dropout")
def convert_dropout(ctx, inputs, attrs):
    x = inputs[0]
    if ctx.opset >= 12 and _training(ctx, inputs):
        raise RunOnHost(f"node {ctx.node_name} (Dropout, opset {ctx.opset}): training-mode dropout draws "
                        "a random mask")
    out = ctx.add1("identity", [x])
    if len(ctx.outputs) < 2 or not ctx.outputs[1]:
        return out
    mask_dtype = "bool" if ctx.opset >= 10 else x.dtype
    return [out, ctx.const(np.ones(x.shape, mask_dtype))]
