"""Helpers shared by the elementwise ONNX converters: attribute picking, the pre-opset-7
`broadcast`/`axis` attributes, and ONNX element types as tensorforge dtypes."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ...ir import dtype as dt


def pick(attrs: dict, names: Sequence[str]) -> dict:
    """The attributes in `names` that the node sets (op defaults cover the rest); drops legacy
    ones such as `consumed_inputs`."""
    return {k: attrs[k] for k in names if k in attrs}


def input_at(inputs: list, k: int):
    """Input k, or None when the node leaves it out (trailing optional inputs may be missing)."""
    return inputs[k] if k < len(inputs) else None


def legacy_broadcast(ctx, a, b, attrs: dict):
    """Apply opsets 1-6 broadcasting, where `broadcast=1` with `axis` aligns B's dimensions with
    A's starting at `axis` (NumPy aligns trailing dimensions, which covers axis omitted)."""
    if ctx.opset >= 7 or not attrs.get("broadcast", 0) or "axis" not in attrs or b is None:
        return a, b
    axis = attrs["axis"]
    axis = axis + len(a.shape) if axis < 0 else axis
    trailing = len(a.shape) - axis - len(b.shape)
    if trailing < 0:
        raise ValueError(f"legacy broadcast: B of shape {b.shape} does not fit A of shape {a.shape} at axis {axis}")
    if trailing == 0:
        return a, b
    if not ctx.is_const(b):
        raise NotImplementedError(
            f"node {ctx.node_name} ({ctx.op_type}, opset {ctx.opset}): broadcast=1 with axis={attrs['axis']} "
            "is only supported when B is a constant")
    value = ctx.value_of(b, "B")
    return a, ctx.const(value.reshape(tuple(value.shape) + (1,) * trailing))


def onnx_dtype(ctx, elem_type: int) -> str:
    """The tensorforge dtype of ONNX element type `elem_type`; NotImplementedError for the ones
    tensorforge lacks (bfloat16, float8, int4, string, complex, ...)."""
    from onnx import TensorProto, helper
    try:
        label = TensorProto.DataType.Name(elem_type)
    except ValueError:
        raise ValueError(f"node {ctx.node_name} ({ctx.op_type}): unknown ONNX element type {elem_type}") from None
    try:
        name = np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name
    except Exception:
        name = ""
    if name not in dt.SCALAR_TYPES:
        raise NotImplementedError(
            f"node {ctx.node_name} ({ctx.op_type}, opset {ctx.opset}): element type {label} is not supported; "
            f"tensorforge supports {', '.join(dt.SCALAR_TYPES)}")
    return name


def scalar_of(ctx, v, what: str):
    """The Python number held by the constant one-element tensor `v`."""
    value = np.asarray(ctx.value_of(v, what))
    if value.size != 1:
        raise ValueError(f"{what} must be a scalar, got shape {value.shape}")
    item = value.reshape(()).item()
    return float(item) if value.dtype.kind == "f" else int(item)


def widen_narrow(ctx, v):
    """`v` converted exactly to a type kernels compute with when it has a narrow storage type
    (float8 / float4 -> float32, int4 / int2 -> int8, uint4 / uint2 -> uint8; every value, NaN and
    infinities included, survives), else `v` itself."""
    if not dt.is_narrow(v.dtype):
        return v
    wide = "float32" if dt.is_float(v.dtype) else "int8" if dt.is_int(v.dtype) else "uint8"
    return ctx.add1("cast_narrow", [v], {"dtype": wide})


def to_narrow(ctx, v, dtype: str):
    """`v` (from `widen_narrow`) converted back to the narrow type `dtype`; `v` when not narrow."""
    if not dt.is_narrow(dtype):
        return v
    return ctx.add1("cast_narrow", [v], {"dtype": dtype, "saturate": 0, "round_mode": "nearest"})
