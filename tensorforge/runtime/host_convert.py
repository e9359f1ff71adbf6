"""Host kernels that convert to and from the narrow storage types (float8, float4, int4, int2).

C has no float8 or 4-bit arithmetic, and the rounding rules ONNX asks for (round to nearest
even into a 3-bit mantissa, saturation, the power-of-two float8e8m0 with three rounding modes)
would be long expressions per element.  These conversions run in NumPy through ml_dtypes, which
implements the types' bit layouts and round-to-nearest-even casts; the rules ONNX adds on top
are applied here, before ml_dtypes' cast:

* to float8e4m3fn / e4m3fnuz / e5m2 / e5m2fnuz with saturate=1 (the default): values beyond the
  largest finite value, infinities included, become +-that value; NaN stays NaN.  With
  saturate=0 ml_dtypes' own rule applies: NaN for types without infinity, +-inf for e5m2.
* to float8e8m0 (a power of two, no sign): `round_mode` "up" (the default) rounds a value that
  is not a power of two to the next one, "down" to the one below, "nearest" to the nearer one
  (ties, 1.5 * 2^e, go up).  With saturate, results stay within [2^-127, 2^127] and infinity
  becomes 2^127; without, what leaves the range (zero included) and infinity become NaN.
* to float4e2m1: ml_dtypes' cast (it saturates to +-6; the type has no NaN).
* to int4 / uint4 / int2 / uint2: integers wrap (the low bits are kept, two's complement);
  floats truncate toward zero (ONNX leaves out-of-range values undefined).
* from any narrow type: the exact value, then NumPy's cast to the target.

Every element is stored unpacked, one per byte, low bits first, as ml_dtypes stores it; BitCast
reinterprets those bits.  Quantization to and from the narrow types (QuantizeLinear /
DequantizeLinear) scales in float32 and converts with the same rules.
"""
from __future__ import annotations

import numpy as np

from ..ir import dtype as dt

FLOAT8 = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")
ROUND_MODES = ("up", "down", "nearest")


def _as_float64(x: np.ndarray) -> np.ndarray:
    """The exact values of `x` as float64 (exact for every type but int64 / uint64 beyond 2^53)."""
    return np.asarray(x).astype(np.float64)


def _to_e8m0(x: np.ndarray, saturate: bool, round_mode: str) -> np.ndarray:
    """float8e8m0 from the float32 bits of `x`: the biased exponent, moved by the rounding.

    Invariant: a float32 with biased exponent e and mantissa m is 2^(e-127) * (1 + m/2^23), so its
    power-of-two neighbours are 2^(e-127) (exponent e) and 2^(e-126) (exponent e + 1)."""
    bits = np.asarray(x, np.float32).view(np.uint32)
    exp = ((bits >> 23) & 0xFF).astype(np.int32)
    man = bits & 0x7FFFFF
    special = exp == 0xFF                          # inf or NaN
    nan = special & (man != 0)
    if round_mode == "up":
        up = man != 0
    elif round_mode == "down":
        up = np.zeros(exp.shape, bool)
    else:
        up = (man > 0x400000) | ((man == 0x400000) & (exp > 0))
    out = exp + up.astype(np.int32)
    if saturate:
        out = np.where(special & ~nan, 0xFE, np.minimum(out, 0xFE))
    else:
        out = np.where(special | (out > 0xFE) | ((exp == 0) & (man == 0)), 0xFF, out)
    out = np.where(nan, 0xFF, out)
    return out.astype(np.uint8).view(dt.to_numpy("float8_e8m0fnu"))


def cast_narrow(x: np.ndarray, dtype: str, saturate: int = 1, round_mode: str = "up") -> np.ndarray:
    """`x` converted to `dtype` with ONNX Cast's rules (see the module docstring); one side of the
    conversion is a narrow type."""
    x = np.asarray(x)
    target = dt.to_numpy(dtype)
    src = x.dtype.name
    if src == dtype:
        return x.copy()
    with np.errstate(all="ignore"):
        if dtype in FLOAT8:
            v = _as_float64(x)
            if saturate:
                lo, hi = dt.value_range(dtype)
                v = np.clip(v, lo, hi)
            return v.astype(target)
        if dtype == "float8_e8m0fnu":
            if round_mode not in ROUND_MODES:
                raise ValueError(f"cast: round_mode must be one of {', '.join(ROUND_MODES)}, got {round_mode!r}")
            return _to_e8m0(_as_float64(x).astype(np.float32), bool(saturate), round_mode)
        if dtype in dt.NARROW_INTS and dt.is_float(src) and dt.is_narrow(src):
            return x.astype(np.float32).astype(target)
        if dtype in dt.NARROW_INTS and (dt.is_integer(src) or dt.is_bool(src)) and not dt.is_narrow(src):
            # wrap: keep the low bits (as int64 first, so wide unsigned values keep theirs too)
            nbits = dt.bits(dtype)
            low = x.astype(np.int64) & ((1 << nbits) - 1)
            if dt.is_int(dtype):
                low = np.where(low >= 1 << (nbits - 1), low - (1 << nbits), low)
            return low.astype(np.int8).astype(target)
        if dt.is_bool(dtype):
            return _as_float64(x) != 0
        if dt.is_narrow(src) and dt.is_float(src) and dt.is_integer(dtype):
            return x.astype(np.float64).astype(target)
        return x.astype(target)


def bitcast(x: np.ndarray, dtype: str) -> np.ndarray:
    """The bits of each element of `x` read as `dtype`, which has the same bit width (ONNX BitCast;
    little-endian, as NumPy stores on every platform tensorforge runs on)."""
    x = np.asarray(x)
    if dt.bits(x.dtype.name) != dt.bits(dtype):
        raise ValueError(f"bitcast: {x.dtype.name} has {dt.bits(x.dtype.name)} bits and {dtype} "
                         f"{dt.bits(dtype)}; BitCast needs equal widths")
    out = np.ascontiguousarray(x).view(dt.to_numpy(dtype))
    return out != 0 if dt.is_bool(dtype) else out.copy()


def param_broadcast(p: np.ndarray, x_shape: tuple, axis: int, block_size: int) -> np.ndarray:
    """A quantization parameter (scale or zero point) laid over x's shape: one value for the tensor,
    one per element of `axis`, or (block_size > 0) one per block of block_size elements along it."""
    p = np.asarray(p)
    if not x_shape:
        return p.reshape(())
    ax = axis % len(x_shape)
    if block_size:
        return np.repeat(p, block_size, axis=ax)[tuple(slice(0, n) for n in x_shape)]
    if p.size == 1 and p.ndim <= 1:
        return p.reshape(())
    return p.reshape([-1 if d == ax else 1 for d in range(len(x_shape))])


def quantize_narrow(x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None = None, axis: int = 1,
                    block_size: int = 0, dtype: str = "int4", saturate: int = 1) -> np.ndarray:
    """ONNX QuantizeLinear into a narrow type, or with a float8e8m0 scale.  Integers: saturate(round_half_even(x / scale) + zp);
    float8: cast(x / scale) with the float8 saturation rule (the zero point is 0 by definition);
    float4: cast(x / scale + zp)."""
    x = np.asarray(x)
    fl = np.float64 if x.dtype == np.float64 else np.float32
    with np.errstate(all="ignore"):
        v = x.astype(fl) / param_broadcast(scale, x.shape, axis, block_size).astype(fl)
        zp = None if zero_point is None else param_broadcast(zero_point, x.shape, axis, block_size)
        if dt.is_integer(dtype):
            v = np.rint(v)
            if zp is not None:
                v = v + zp.astype(fl)
            lo, hi = dt.value_range(dtype)
            return np.clip(v, lo, hi).astype(dt.to_numpy(dtype))
        if dtype == "float4_e2m1fn" and zp is not None:
            v = v + zp.astype(fl)
        return cast_narrow(v, dtype, saturate)


def dequantize_narrow(x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None = None, axis: int = 1,
                      block_size: int = 0, dtype: str = "") -> np.ndarray:
    """ONNX DequantizeLinear from a narrow type or with a float8e8m0 scale: (x - zp) * scale in the scale's precision, then
    the result type (`dtype`, else the scale's)."""
    x = np.asarray(x)
    scale = np.asarray(scale)
    fl = np.float64 if scale.dtype == np.float64 else np.float32
    with np.errstate(all="ignore"):
        v = x.astype(fl)
        if zero_point is not None:
            v = v - param_broadcast(zero_point, x.shape, axis, block_size).astype(fl)
        out = v * param_broadcast(scale, x.shape, axis, block_size).astype(fl)
        return out.astype(dt.to_numpy(dtype or scale.dtype.name))
