"""Data types as plain strings ("float32", "int8", "bool", "float32x16" for a 16-lane vector).

Every expression carries one.  This module parses them, promotes them for binary operations and
maps them to NumPy; the code generators map them to their own type names.

bfloat16 (8 exponent bits like float32, 7 mantissa bits) is a float type; NumPy knows it through
the ml_dtypes package (a dependency of onnx), imported when first needed.

The narrow types (NARROW_TYPES: the float8 variants, float4_e2m1fn, int4, uint4, int2, uint2) carry
ml_dtypes' names and semantics.  Each element is stored in one byte (as NumPy and ml_dtypes store
them, unpacked), so C kernels move them as `uint8_t`.  They are storage types: graphs move,
convert, quantize and dequantize them, and arithmetic on them is refused (`is_narrow`).
"""
from __future__ import annotations

import re

import numpy as np

SCALAR_TYPES = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64",
    "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
    "float4_e2m1fn", "int4", "uint4", "int2", "uint2",
)
NARROW_TYPES = SCALAR_TYPES[-10:]
NARROW_FLOATS = NARROW_TYPES[:6]
NARROW_INTS = NARROW_TYPES[6:]
_PATTERN = re.compile(r"^(bool|int|uint|float|bfloat)(\d*)(_e\d+m\d+(?:fnuz|fnu|fn)?)?(?:x(\d+))?$")


def check(dtype: str) -> str:
    """Return `dtype` in canonical form or raise ValueError naming it."""
    if isinstance(dtype, np.dtype) or isinstance(dtype, type):
        dtype = np.dtype(dtype).name
    if not isinstance(dtype, str) or element_of(dtype) not in SCALAR_TYPES:
        raise ValueError(f"unsupported dtype {dtype!r}; expected one of {', '.join(SCALAR_TYPES)}")
    if element_of(dtype) == "bfloat16" or element_of(dtype) in NARROW_TYPES:
        _ml_dtypes()        # registers the names with NumPy, so np.dtype("bfloat16") works from here on
    return dtype


_PARSED: dict[str, tuple[str, int, int]] = {}


def _parse(dtype: str) -> tuple[str, int, int]:
    """(type code, bits, lanes) of a dtype name, parsed once per name (the IR asks for every
    expression it builds)."""
    hit = _PARSED.get(dtype)
    if hit is not None:
        return hit
    m = _PATTERN.match(dtype)
    if m is None:
        raise ValueError(f"unsupported dtype {dtype!r}")
    code, bits, lanes = m.group(1), m.group(2), m.group(4)
    nbits = 8 if code == "bool" else int(bits) if bits else 32
    parsed = _PARSED[dtype] = (code, nbits, int(lanes) if lanes else 1)
    return parsed


def lanes(dtype: str) -> int:
    return _parse(dtype)[2]


def bits(dtype: str) -> int:
    return _parse(dtype)[1]


def element_of(dtype: str) -> str:
    """The scalar type of a (possibly vector) dtype."""
    return dtype.split("x")[0] if "x" in dtype else dtype


def with_lanes(dtype: str, n: int) -> str:
    base = element_of(dtype)
    return base if n == 1 else f"{base}x{n}"


def is_float(dtype: str) -> bool:
    return element_of(dtype).startswith(("float", "bfloat"))


def is_int(dtype: str) -> bool:
    return element_of(dtype).startswith("int")


def is_uint(dtype: str) -> bool:
    return element_of(dtype).startswith("uint")


def is_integer(dtype: str) -> bool:
    """Signed or unsigned integer (not bool)."""
    return is_int(dtype) or is_uint(dtype)


def is_bool(dtype: str) -> bool:
    return element_of(dtype) == "bool"


def is_narrow(dtype: str) -> bool:
    """A storage-only type (float8, float4, int4, uint4, int2, uint2): moved and converted, never
    computed with."""
    return element_of(dtype) in NARROW_TYPES


def is_extension(dtype: str) -> bool:
    """A type NumPy knows only through ml_dtypes (bfloat16 and the narrow types): its .npy files and
    buffer protocol do not describe it."""
    return element_of(dtype) == "bfloat16" or is_narrow(dtype)


def itemsize(dtype: str) -> int:
    code, nbits, n = _parse(dtype)
    return max(1, nbits // 8) * n


def to_numpy(dtype: str) -> np.dtype:
    elem = element_of(dtype)
    if elem == "bfloat16" or elem in NARROW_TYPES:
        return np.dtype(getattr(_ml_dtypes(), elem))
    return np.dtype(elem)


def bfloat16() -> np.dtype:
    """NumPy's bfloat16 dtype (from ml_dtypes, imported here, lazily)."""
    return np.dtype(_ml_dtypes().bfloat16)


def _ml_dtypes():
    try:
        import ml_dtypes
    except ImportError:  # pragma: no cover
        raise ImportError("bfloat16, float8 and 4-bit arrays need the ml_dtypes package: "
                          "pip install ml_dtypes") from None
    return ml_dtypes


def value_range(dtype: str) -> tuple:
    """(lowest, highest) finite value of a numeric scalar type, narrow types included."""
    elem = element_of(dtype)
    np_type = to_numpy(elem)
    if is_float(elem):
        info = _ml_dtypes().finfo(np_type)
        return float(info.min), float(info.max)
    info = _ml_dtypes().iinfo(np_type) if elem in NARROW_TYPES else np.iinfo(np_type)
    return int(info.min), int(info.max)


def promote(a: str, b: str) -> str:
    """The dtype of a binary operation between values of dtypes `a` and `b` (lanes must agree).

    Floats beat integers, wider beats narrower, signed int beats unsigned of the same width
    (widened one step), bool is the weakest.
    """
    if a == b:
        return a
    la, lb = lanes(a), lanes(b)
    if la != lb and la != 1 and lb != 1:
        raise TypeError(f"cannot combine vectors of {la} and {lb} lanes")
    n = max(la, lb)
    ea, eb = element_of(a), element_of(b)
    if "bfloat16" in (ea, eb) and is_float(ea) and is_float(eb):   # with another float: float32 or wider
        other = eb if ea == "bfloat16" else ea
        return with_lanes("float64" if other == "float64" else "float32", n)
    if is_float(ea) != is_float(eb):  # an integer meets a float: the float type wins, as in TVM
        return with_lanes(ea if is_float(ea) else eb, n)
    result = np.promote_types(np.dtype(ea), np.dtype(eb)).name
    if is_integer(ea) and is_integer(eb) and result not in SCALAR_TYPES:
        result = "int64"
    return with_lanes(result, n)


def random_array(shape, dtype: str, rng: np.random.Generator, low=-1.0, high=1.0) -> np.ndarray:
    """Random data of `dtype`: uniform floats in [low, high), small integers, random bools
    (inputs for checks and measurements)."""
    if is_float(dtype):
        return rng.uniform(low, high, size=shape).astype(to_numpy(dtype))
    if is_bool(dtype):
        return rng.integers(0, 2, size=shape).astype(bool)
    vmin, vmax = value_range(dtype)
    lo, hi = max(vmin, -100), min(vmax, 100)
    return rng.integers(lo, hi + 1, size=shape).astype(to_numpy(dtype))
