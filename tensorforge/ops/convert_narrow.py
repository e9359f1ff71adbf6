"""Conversions that involve the narrow storage types (ops): cast_narrow, bitcast, quantize_narrow and
dequantize_narrow.

The narrow types (float8 variants, float4_e2m1fn, int4, uint4, int2, uint2; ir/dtype.NARROW_TYPES)
are only stored and moved by generated kernels.  Converting into or out of them takes rounding
rules C cannot express cheaply, so these four ops are OPAQUE: the executor runs their host kernels
(runtime/host_convert.py, through ml_dtypes) between the compiled kernels, and the same
functions are their NumPy references.

* cast_narrow(x, dtype, saturate, round_mode): ONNX Cast / CastLike where either side is narrow.
* bitcast(x, dtype): ONNX BitCast, the bits of each element read as another type of equal width
  (any two types, narrow or not).
* quantize_narrow(x, scale, zero_point, axis, block_size, dtype, saturate): ONNX QuantizeLinear
  into a narrow type, or into an integer type with a float8e8m0 scale (MX formats); per tensor,
  per axis or blocked.
* dequantize_narrow(x, scale, zero_point, axis, block_size, dtype): ONNX DequantizeLinear out of a
  narrow type, or with a float8e8m0 scale.
"""
from __future__ import annotations

import numpy as np

from ..ir import dtype as dt
from ..runtime import host_convert
from .quant_linear import param_mode
from .registry import OPAQUE, OpError, TensorType, op

FLOATS = ("float16", "bfloat16", "float32", "float64")
WIDE_QUANT = ("int8", "uint8", "int16", "uint16", "int32")    # with a float8e8m0 (power of two) scale


def _check_type(opname: str, what: str, dtype: object) -> str:
    if not isinstance(dtype, str) or dtype not in dt.SCALAR_TYPES:
        raise OpError(f"{opname}: {what} must be one of {', '.join(dt.SCALAR_TYPES)}, got {dtype!r}")
    return dtype


@op("cast_narrow", pattern=OPAQUE, attr_defaults={"saturate": 1, "round_mode": "up"}, narrow=True)
class cast_narrow:
    def infer(x: TensorType, dtype: str, saturate: int = 1, round_mode: str = "up") -> TensorType:
        target = _check_type("cast_narrow", "dtype", dtype)
        if not (dt.is_narrow(x.dtype) or dt.is_narrow(target)):
            raise OpError(f"cast_narrow: converts to or from a narrow type, got {x.dtype} -> {target}; use cast")
        if round_mode not in host_convert.ROUND_MODES:
            raise OpError(f"cast_narrow: round_mode must be one of {', '.join(host_convert.ROUND_MODES)}, "
                          f"got {round_mode!r}")
        return TensorType(tuple(x.shape), target)

    def reference(x: np.ndarray, dtype: str, saturate: int = 1, round_mode: str = "up") -> np.ndarray:
        return host_convert.cast_narrow(x, dtype, saturate, round_mode)


@op("bitcast", pattern=OPAQUE, narrow=True)
class bitcast:
    def infer(x: TensorType, dtype: str) -> TensorType:
        target = _check_type("bitcast", "dtype", dtype)
        if dt.bits(x.dtype) != dt.bits(target):
            raise OpError(f"bitcast: {x.dtype} has {dt.bits(x.dtype)} bits but {target} has {dt.bits(target)}; "
                          "the types must be equally wide")
        return TensorType(tuple(x.shape), target)

    def reference(x: np.ndarray, dtype: str) -> np.ndarray:
        return host_convert.bitcast(x, dtype)


def _check_params(opname: str, x: TensorType, scale: TensorType, zero_point: TensorType | None, axis: int,
                  block_size: int) -> None:
    if scale.dtype not in FLOATS and scale.dtype != "float8_e8m0fnu":
        raise OpError(f"{opname}: scale has dtype {scale.dtype}; expected one of {', '.join(FLOATS)}")
    param_mode(opname, tuple(x.shape), tuple(scale.shape), axis, block_size)
    if zero_point is not None:
        param_mode(opname, tuple(x.shape), tuple(zero_point.shape), axis, block_size, "zero point")


@op("quantize_narrow", pattern=OPAQUE, narrow=True,
    attr_defaults={"axis": 1, "block_size": 0, "dtype": "int4", "saturate": 1})
class quantize_narrow:
    def infer(x: TensorType, scale: TensorType, zero_point: TensorType | None = None, axis: int = 1,
              block_size: int = 0, dtype: str = "int4", saturate: int = 1) -> TensorType:
        allowed = tuple(t for t in dt.NARROW_TYPES if t != "float8_e8m0fnu") + WIDE_QUANT
        if _check_type("quantize_narrow", "dtype", dtype) not in allowed:
            raise OpError(f"quantize_narrow: dtype must be one of {', '.join(allowed)}, got {dtype}")
        if x.dtype not in FLOATS + ("int32",):
            raise OpError(f"quantize_narrow: x has dtype {x.dtype}; expected a float or int32")
        if zero_point is not None and zero_point.dtype != dtype:
            raise OpError(f"quantize_narrow: zero point dtype {zero_point.dtype} differs from the result dtype {dtype}")
        _check_params("quantize_narrow", x, scale, zero_point, axis, block_size)
        return TensorType(tuple(x.shape), dtype)

    def reference(x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None = None, axis: int = 1,
                  block_size: int = 0, dtype: str = "int4", saturate: int = 1) -> np.ndarray:
        return host_convert.quantize_narrow(x, scale, zero_point, axis, block_size, dtype, saturate)


@op("dequantize_narrow", pattern=OPAQUE, narrow=True, attr_defaults={"axis": 1, "block_size": 0, "dtype": ""})
class dequantize_narrow:
    def infer(x: TensorType, scale: TensorType, zero_point: TensorType | None = None, axis: int = 1,
              block_size: int = 0, dtype: str = "") -> TensorType:
        if not (dt.is_narrow(x.dtype) or x.dtype in WIDE_QUANT):
            raise OpError(f"dequantize_narrow: x has dtype {x.dtype}; expected a narrow or 8/16-bit integer type")
        if zero_point is not None and zero_point.dtype != x.dtype:
            raise OpError(f"dequantize_narrow: zero point dtype {zero_point.dtype} differs from x's {x.dtype}")
        _check_params("dequantize_narrow", x, scale, zero_point, axis, block_size)
        out = dtype or scale.dtype
        if out not in FLOATS:
            raise OpError(f"dequantize_narrow: dtype must be one of {', '.join(FLOATS)}, got {out!r}")
        return TensorType(tuple(x.shape), out)

    def reference(x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None = None, axis: int = 1,
                  block_size: int = 0, dtype: str = "") -> np.ndarray:
        return host_convert.dequantize_narrow(x, scale, zero_point, axis, block_size, dtype)
