"""ONNX Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Expand, Shape, Size, NonZero -> tensorforge
ops (frontend -> Graph).

* Reshape reads its target shape from a constant input (opset 5+; an attribute before), keeping
  ONNX's 0 (copy) and -1 (infer) entries and `allowzero` (opset 14) for the op to resolve.
* Squeeze / Unsqueeze take `axes` as an attribute before opset 13 and as an input from it on.
* Shape and Size become constants: shapes are static (opset 15's start/end slice the shape).
* NonZero is folded when its input is a constant; otherwise its output shape depends on the
  data: the converter raises DataDependentShape and the staged model runs it on the host
  (frontend/onnx_host/data_dependent.py).
"""
from __future__ import annotations

import numpy as np

from ..onnx import DataDependentShape, converter
from .transform_util import const_ints, ints_attr_or_input


@converter("Reshape")
def convert_reshape(ctx, inputs, attrs):
    if ctx.opset < 5:
        shape = tuple(attrs.get("shape", ()))
    else:
        shape = const_ints(ctx, inputs[1], "Reshape shape")
    return ctx.add1("reshape", [inputs[0]], {"shape": shape, "allowzero": int(attrs.get("allowzero", 0))})


@converter("Flatten")
def convert_flatten(ctx, inputs, attrs):
    return ctx.add1("flatten", [inputs[0]], {"axis": int(attrs.get("axis", 1))})


@converter("Squeeze")
def convert_squeeze(ctx, inputs, attrs):
    axes = ints_attr_or_input(ctx, inputs, attrs, "axes", 1, since=13)
    return ctx.add1("squeeze", [inputs[0]], {"axes": axes if axes else None})


@converter("Unsqueeze")
def convert_unsqueeze(ctx, inputs, attrs):
    axes = ints_attr_or_input(ctx, inputs, attrs, "axes", 1, since=13)
    if axes is None:
        raise ValueError("Unsqueeze needs axes")
    return ctx.add1("unsqueeze", [inputs[0]], {"axes": axes})


@converter("Transpose")
def convert_transpose(ctx, inputs, attrs):
    perm = attrs.get("perm")
    return ctx.add1("transpose", [inputs[0]], {"perm": tuple(perm) if perm else None})


@converter("Expand", since=8)
def convert_expand(ctx, inputs, attrs):
    return ctx.add1("expand", [inputs[0]], {"shape": const_ints(ctx, inputs[1], "Expand shape")})


@converter("Shape")
def convert_shape(ctx, inputs, attrs):
    shape = inputs[0].shape
    start, end = attrs.get("start", 0), attrs.get("end", None)
    return ctx.const(np.asarray(shape[slice(start, end)], dtype=np.int64).reshape(-1))


@converter("Size")
def convert_size(ctx, inputs, attrs):
    return ctx.const(np.asarray(inputs[0].size, dtype=np.int64))


@converter("NonZero", since=9)
def convert_non_zero(ctx, inputs, attrs):
    x = inputs[0]
    if ctx.is_const(x):   # a constant input gives a constant (static) result
        return ctx.const(np.asarray(np.nonzero(ctx.value_of(x)), dtype=np.int64).reshape(x.ndim, -1))
    raise DataDependentShape(
        f"node {ctx.node_name} (NonZero, opset {ctx.opset}): the output shape depends on the input "
        "values (the number of nonzero elements)")
