"""Constant folding: the value of an operation on constants, computed in the operation's dtype.

Integers wrap to their width (two's complement for signed types), floats are rounded to their
precision through NumPy, and floor division and modulo follow Python (which is also our IR's
semantics).  Anything that has no well-defined constant value (division by zero, a float that
does not fit an integer cast, arithmetic on bool) is left unfolded: the folders return None.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable

import numpy as np

from ..ir import dtype as dt
from ..ir import expr as E

_ARITH = (E.Add, E.Sub, E.Mul, E.Div, E.FloorDiv, E.FloorMod, E.Min, E.Max)
_CMP: dict[type, Callable[[Any, Any], Any]] = {
    E.EQ: lambda a, b: a == b, E.NE: lambda a, b: a != b, E.LT: lambda a, b: a < b,
    E.LE: lambda a, b: a <= b, E.GT: lambda a, b: a > b, E.GE: lambda a, b: a >= b}


@functools.lru_cache(maxsize=None)
def int_range(dtype: str) -> tuple[int, int]:
    """The inclusive value range of an integer or bool dtype."""
    if dt.is_bool(dtype):
        return 0, 1
    nbits = dt.bits(dtype)
    if dt.is_uint(dtype):
        return 0, (1 << nbits) - 1
    return -(1 << (nbits - 1)), (1 << (nbits - 1)) - 1


_bits = functools.lru_cache(maxsize=None)(dt.bits)


def wrap_int(value: int, dtype: str) -> int:
    """`value` reduced to the width of the integer `dtype` (bool: nonzero is 1)."""
    if dt.is_bool(dtype):
        return int(value != 0)
    nbits = _bits(dtype)
    value &= (1 << nbits) - 1
    if dt.is_int(dtype) and value >= 1 << (nbits - 1):
        value -= 1 << nbits
    return value


def signed_rep(value: int, dtype: str) -> int:
    """The representative of `value` modulo 2**bits in the signed range of that width.

    Used to print unsigned coefficients as subtraction (`x - 1` rather than `x + 4294967295`).
    """
    if dt.is_bool(dtype):
        return int(value != 0)
    nbits = _bits(dtype)
    value &= (1 << nbits) - 1
    return value - (1 << nbits) if value >= 1 << (nbits - 1) else value


def round_float(value: float, dtype: str) -> float:
    """`value` rounded to the precision of the float `dtype`."""
    if dt.element_of(dtype) == "float64":
        return float(value)
    with np.errstate(all="ignore"):
        return float(np.array(value, dtype=dt.to_numpy(dtype)))


def _np_float_op(cls: type, a: float, b: float, dtype: str):
    t = dt.to_numpy(dtype).type
    x, y = t(a), t(b)
    with np.errstate(all="ignore"):
        if cls is E.Add:
            return x + y
        if cls is E.Sub:
            return x - y
        if cls is E.Mul:
            return x * y
        if cls is E.Div:
            return x / y
        if cls is E.FloorDiv:
            return np.floor_divide(x, y)
        if cls is E.FloorMod:
            return np.mod(x, y)
    return None


def fold_binary(cls: type, a: E.Expr, b: E.Expr, dtype: str) -> E.Expr | None:
    """Fold `cls(a, b)` when both are scalar constants; None when there is no safe constant."""
    if not isinstance(a, (E.IntImm, E.FloatImm)) or not isinstance(b, (E.IntImm, E.FloatImm)):
        return None
    x, y = a.value, b.value
    if cls in _CMP:
        return E.IntImm(dtype, int(_CMP[cls](x, y)))
    if cls is E.And:
        return E.IntImm(dtype, int(bool(x) and bool(y)))
    if cls is E.Or:
        return E.IntImm(dtype, int(bool(x) or bool(y)))
    if cls not in _ARITH or dt.is_bool(dtype) or dt.lanes(dtype) != 1:
        return None
    if dt.is_float(dtype):
        if cls in (E.Min, E.Max):
            if math.isnan(x) or math.isnan(y):
                return None
            return E.FloatImm(dtype, round_float(min(x, y) if cls is E.Min else max(x, y), dtype))
        if cls in (E.Div, E.FloorDiv, E.FloorMod) and y == 0:
            return None
        return E.FloatImm(dtype, round_float(float(_np_float_op(cls, x, y, dtype)), dtype))
    x, y = int(x), int(y)
    if cls is E.Add:
        r = x + y
    elif cls is E.Sub:
        r = x - y
    elif cls is E.Mul:
        r = x * y
    elif cls is E.Min:
        r = min(x, y)
    elif cls is E.Max:
        r = max(x, y)
    elif y == 0:
        return None
    elif cls is E.FloorDiv:
        r = x // y
    elif cls is E.FloorMod:
        r = x % y
    else:  # Div on integers is C division: truncate toward zero
        q = abs(x) // abs(y)
        r = q if (x >= 0) == (y >= 0) else -q
    return E.IntImm(dtype, wrap_int(r, dtype))


def fold_not(a: E.Expr) -> E.Expr | None:
    if isinstance(a, E.IntImm):
        return E.IntImm(a.dtype, int(not a.value))
    return None


def fold_cast(dtype: str, value: E.Expr) -> E.Expr | None:
    """Fold `Cast(dtype, value)` of a scalar constant with C conversion rules."""
    if not isinstance(value, (E.IntImm, E.FloatImm)) or dt.lanes(dtype) != 1:
        return None
    v = value.value
    if dt.is_float(dtype):
        return E.FloatImm(dtype, round_float(float(v), dtype))
    if dt.is_bool(dtype):
        return E.IntImm(dtype, int(v != 0))
    if isinstance(v, float):
        if not math.isfinite(v):
            return None
        t = math.trunc(v)
        lo, hi = int_range(dtype)
        if not lo <= t <= hi:
            return None  # undefined behaviour in C: leave it to the target
        return E.IntImm(dtype, t)
    return E.IntImm(dtype, wrap_int(int(v), dtype))
