"""ONNX Constant, ConstantOfShape, Range, EyeLike, Trilu and OneHot -> tensorforge (frontend ->
Graph).

* Constant and Range (all inputs constant) become graph constants (a Constant of strings is
  made on the host); a Range with a computed bound has a data-dependent length: the staged model
  specializes it on the bound's value.  From opset 27 a float16 / bfloat16 Range counts in its
  `stash_type` (float32 by default) and is cast at the end.
* ConstantOfShape becomes a constant up to FOLD_LIMIT elements (so shape arithmetic downstream
  folds too), a `constant_of_shape` node beyond.
* OneHot reads depth and values (off, on) from constant inputs; the output takes values' dtype.
"""
from __future__ import annotations

import numpy as np

from ...ops.registry import OpError
from ..onnx import RunOnHost, converter
from .transform_util import check_array_dtype, const_ints, const_scalar, input_at, onnx_dtype, present

FOLD_LIMIT = 1 << 20


@converter("Constant")
def convert_constant(ctx, inputs, attrs):
    if "value_string" in attrs or "value_strings" in attrs or \
            ("value" in attrs and np.asarray(attrs["value"]).dtype.kind in "OUS"):
        raise RunOnHost(f"node {ctx.node_name} (Constant) holds strings, which only host ops read")
    if "value" in attrs:
        return ctx.const(check_array_dtype(ctx, np.asarray(attrs["value"])))
    if "value_float" in attrs:
        return ctx.const(np.asarray(attrs["value_float"], np.float32))
    if "value_floats" in attrs:
        return ctx.const(np.asarray(attrs["value_floats"], np.float32).reshape(-1))
    if "value_int" in attrs:
        return ctx.const(np.asarray(attrs["value_int"], np.int64))
    if "value_ints" in attrs:
        return ctx.const(np.asarray(attrs["value_ints"], np.int64).reshape(-1))
    kind = next(iter(attrs), "nothing")
    raise NotImplementedError(f"node {ctx.node_name} (Constant, opset {ctx.opset}): a constant given as "
                              f"{kind} is not supported (strings and sparse tensors are not)")


@converter("ConstantOfShape", since=9)
def convert_constant_of_shape(ctx, inputs, attrs):
    shape = const_ints(ctx, inputs[0], "ConstantOfShape input")
    value = np.asarray(attrs.get("value", np.zeros(1, np.float32)))
    check_array_dtype(ctx, value)
    if value.size != 1:
        raise OpError(f"constant_of_shape: value must hold one element, got {value.size}")
    if any(d < 0 for d in shape):
        raise OpError(f"constant_of_shape: shape {shape} has a negative dimension")
    if int(np.prod(shape, dtype=np.int64)) <= FOLD_LIMIT:
        return ctx.const(np.full(shape, value.reshape(-1)[0], dtype=value.dtype))
    return ctx.add1("constant_of_shape", [], {"shape": shape, "value": value.reshape(-1)[0].item(),
                                              "dtype": value.dtype.name})


@converter("Range", since=11)
def convert_range(ctx, inputs, attrs):
    start, limit, delta = (const_scalar(ctx, v, f"Range {w}") for v, w in zip(inputs, ("start", "limit", "delta")))
    if delta == 0:
        raise OpError("range: delta must not be 0")
    dtype = inputs[0].dtype
    # opset 27: float16 / bfloat16 ranges are computed in `stash_type` (default float32) and cast
    stash = dtype
    if dtype in ("float16", "bfloat16") and ctx.opset >= 27:
        stash = onnx_dtype(ctx, int(attrs.get("stash_type", 1)))
    values = np.arange(*(np.asarray(v, dtype).astype(stash) for v in (start, limit, delta)))
    return ctx.const(values.astype(dtype))


@converter("EyeLike", since=9)
def convert_eye_like(ctx, inputs, attrs):
    dtype = onnx_dtype(ctx, int(attrs["dtype"])) if "dtype" in attrs else None
    return ctx.add1("eye_like", [inputs[0]], {"k": int(attrs.get("k", 0)), "dtype": dtype})


@converter("Trilu", since=14)
def convert_trilu(ctx, inputs, attrs):
    kv = input_at(inputs, 1)
    k = int(const_scalar(ctx, kv, "Trilu k")) if present(kv) else 0
    return ctx.add1("trilu", [inputs[0]], {"k": k, "upper": int(attrs.get("upper", 1))})


@converter("OneHot", since=9)
def convert_one_hot(ctx, inputs, attrs):
    indices, depth_v, values_v = inputs[0], inputs[1], inputs[2]
    depth = const_scalar(ctx, depth_v, "OneHot depth")
    values = np.asarray(ctx.value_of(values_v, "OneHot values")).reshape(-1)
    if values.size != 2:
        raise OpError(f"one_hot: values must hold (off_value, on_value), got {values.size} element(s)")
    check_array_dtype(ctx, values)
    return ctx.add1("one_hot", [indices], {"depth": int(depth), "axis": int(attrs.get("axis", -1)),
                                           "off_value": values[0].item(), "on_value": values[1].item(),
                                           "dtype": values.dtype.name})
