"""Helpers shared by the ONNX converters of the transform, index and reduction families: reading
the tensor inputs that are really attributes (shapes, axes, pads, starts/ends, scales, k, ...) as
plain Python values, and ONNX element types as tensorforge dtypes."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...ir import dtype as dt


def input_at(inputs: list, k: int):
    """Input k, or None when the node leaves it out (trailing optional inputs may be missing)."""
    return inputs[k] if k < len(inputs) else None


def present(v: Any) -> bool:
    """True for a given input that is not an empty tensor (ONNX marks "absent" both ways)."""
    return v is not None and v.size > 0


def const_ints(ctx, v, what: str) -> tuple:
    """A constant integer input as a tuple of Python ints (a scalar gives a 1-tuple)."""
    arr = np.asarray(ctx.value_of(v, what))
    if arr.size and not (np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_):
        raise ValueError(f"{what} must hold integers, got dtype {arr.dtype}")
    return tuple(int(x) for x in arr.reshape(-1))


def const_floats(ctx, v, what: str) -> tuple:
    return tuple(float(x) for x in np.asarray(ctx.value_of(v, what)).reshape(-1))


def const_scalar(ctx, v, what: str):
    """A constant one-element input as a Python number."""
    arr = np.asarray(ctx.value_of(v, what))
    if arr.size != 1:
        raise ValueError(f"{what} must hold exactly one value, got shape {arr.shape}")
    return arr.reshape(-1)[0].item()


def ints_attr_or_input(ctx, inputs: list, attrs: dict, name: str, index: int, since: int):
    """An int-list parameter that is attribute `name` before opset `since` and input `index`
    from it on; None when the node gives neither."""
    if ctx.opset < since:
        value = attrs.get(name)
        return None if value is None else tuple(int(x) for x in value)
    v = input_at(inputs, index)
    if v is None:
        return None
    return const_ints(ctx, v, name)


def onnx_dtype(ctx, elem_type: int) -> str:
    """The tensorforge dtype of an ONNX element type; NotImplementedError for the ones tensorforge
    lacks (bfloat16, float8, int4, string, complex, ...), naming the node and the opset."""
    from onnx import TensorProto, helper
    try:
        label = TensorProto.DataType.Name(elem_type)
        name = np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name
    except Exception:
        label, name = str(elem_type), ""
    if name not in dt.SCALAR_TYPES:
        raise NotImplementedError(f"node {ctx.node_name} ({ctx.op_type}, opset {ctx.opset}): element type "
                                  f"{label} is not supported")
    return name


def check_array_dtype(ctx, arr: np.ndarray) -> np.ndarray:
    """`arr` unchanged when tensorforge supports its dtype, else NotImplementedError."""
    if arr.dtype.name not in dt.SCALAR_TYPES:
        raise NotImplementedError(f"node {ctx.node_name} ({ctx.op_type}, opset {ctx.opset}): element type "
                                  f"{arr.dtype} is not supported")
    return arr
