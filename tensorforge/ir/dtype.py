"""Data types as plain strings ("float32", "int8", "bool", "float32x16" for a 16-lane vector).

Every expression carries one.  This module parses them, promotes them for binary operations and
maps them to NumPy; the code generators map them to their own type names.

bfloat16 (8 exponent bits like float32, 7 mantissa bits) is a float type; NumPy knows it through
the ml_dtypes package (a dependency of onnx), imported when first needed.
"""
from __future__ import annotations

import re

import numpy as np

SCALAR_TYPES = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64",
)
_PATTERN = re.compile(r"^(bool|int|uint|float|bfloat)(\d*)(?:x(\d+))?$")


def check(dtype: str) -> str:
    """Return `dtype` in canonical form or raise ValueError naming it."""
    if isinstance(dtype, np.dtype) or isinstance(dtype, type):
        dtype = np.dtype(dtype).name
    if not isinstance(dtype, str) or element_of(dtype) not in SCALAR_TYPES:
        raise ValueError(f"unsupported dtype {dtype!r}; expected one of {', '.join(SCALAR_TYPES)}")
    if element_of(dtype) == "bfloat16":
        bfloat16()          # registers the name with NumPy, so np.dtype("bfloat16") works from here on
    return dtype


def _parse(dtype: str) -> tuple[str, int, int]:
    m = _PATTERN.match(dtype)
    if m is None:
        raise ValueError(f"unsupported dtype {dtype!r}")
    code, bits, lanes = m.group(1), m.group(2), m.group(3)
    nbits = 8 if code == "bool" else int(bits) if bits else 32
    return code, nbits, int(lanes) if lanes else 1


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


def itemsize(dtype: str) -> int:
    code, nbits, n = _parse(dtype)
    return max(1, nbits // 8) * n


def to_numpy(dtype: str) -> np.dtype:
    if element_of(dtype) == "bfloat16":
        return bfloat16()
    return np.dtype(element_of(dtype))


def bfloat16() -> np.dtype:
    """NumPy's bfloat16 dtype (from ml_dtypes, imported here, lazily)."""
    try:
        import ml_dtypes
    except ImportError:  # pragma: no cover
        raise ImportError("bfloat16 arrays need the ml_dtypes package: pip install ml_dtypes") from None
    return np.dtype(ml_dtypes.bfloat16)


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
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -100), min(info.max, 100)
    return rng.integers(lo, hi + 1, size=shape).astype(dtype)
