"""Comparisons, boolean logic and bitwise ops (ops -> TE).

equal, less, less_or_equal, greater and greater_or_equal compare any numeric dtype (equal also
bool) and give bool; float16 compares exactly (legalization widens both sides to float32, which
holds every float16) and NaN compares unequal to everything, as in NumPy.  logical_not,
logical_and, logical_or and logical_xor work on bools.

Bitwise ops on integers: bitwise_and, bitwise_or, bitwise_xor, bitwise_not, left_shift and
right_shift.

The expression language has no bit operators, so these are written in integer arithmetic that
C compilers turn back into bit instructions.  Signed values are first reinterpreted as the
unsigned type of the same width (a cast: two's complement modulo 2**n), where

    and(a, b) = sum over bits k of 2**k * bit_k(a) * bit_k(b),   bit_k(u) = u // 2**k % 2
    or = a + b - and,   xor = a + b - 2 * and,   not = (2**n - 1) - a      (all modulo 2**n)

and the result is cast back.  Shifts follow ONNX BitShift (opset 28, which matches opset 11 on
unsigned types): a left shift multiplies by 2**s modulo 2**n, a right shift divides rounding
down (arithmetic shift for signed types); a shift amount that is negative or at least the bit
width gives what the sign fill alone gives (-1 for a right shift of a negative value, else 0).
"""
from __future__ import annotations

import numpy as np

from .. import te
from ..ir import dtype as dt
from .elemwise_base import ALL, BOOL, INTEGERS, NUMERIC, SIGNED, binary_op, lit, np_lit, unary_op

# -- comparisons and boolean logic ----------------------------------------------------------------

binary_op("equal", lambda a, b: a == b, np.equal, ALL, out_dtype="bool")
binary_op("less", lambda a, b: a < b, np.less, NUMERIC, out_dtype="bool")
binary_op("less_or_equal", lambda a, b: a <= b, np.less_equal, NUMERIC, out_dtype="bool")
binary_op("greater", lambda a, b: a > b, np.greater, NUMERIC, out_dtype="bool")
binary_op("greater_or_equal", lambda a, b: a >= b, np.greater_equal, NUMERIC, out_dtype="bool")

binary_op("logical_and", lambda a, b: a & b, np.logical_and, BOOL)
binary_op("logical_or", lambda a, b: a | b, np.logical_or, BOOL)
binary_op("logical_xor", lambda a, b: a != b, np.logical_xor, BOOL)

unary_op("logical_not", lambda x: ~x, np.logical_not, BOOL)


# -- bitwise --------------------------------------------------------------------------------------

def _unsigned(dtype: str) -> str:
    return f"uint{dt.bits(dtype)}"


def _bit(u: te.Expr, k: int) -> te.Expr:
    return (u // lit(1 << k, u.dtype)) % lit(2, u.dtype)


def _and_unsigned(a: te.Expr, b: te.Expr) -> te.Expr:
    total = None
    for k in range(dt.bits(a.dtype)):
        term = _bit(a, k) * _bit(b, k) * lit(1 << k, a.dtype)
        total = term if total is None else total + term
    return total


def _bitwise(kind: str):
    def fn(a: te.Expr, b: te.Expr) -> te.Expr:
        udt = _unsigned(a.dtype)
        ua, ub = a.astype(udt), b.astype(udt)
        both = _and_unsigned(ua, ub)
        if kind == "and":
            out = both
        elif kind == "or":
            out = ua + ub - both
        else:
            out = ua + ub - lit(2, udt) * both
        return out.astype(a.dtype)
    return fn


binary_op("bitwise_and", _bitwise("and"), np.bitwise_and, INTEGERS)
binary_op("bitwise_or", _bitwise("or"), np.bitwise_or, INTEGERS)
binary_op("bitwise_xor", _bitwise("xor"), np.bitwise_xor, INTEGERS)


def _not(a: te.Expr) -> te.Expr:
    udt = _unsigned(a.dtype)
    return (lit((1 << dt.bits(udt)) - 1, udt) - a.astype(udt)).astype(a.dtype)


unary_op("bitwise_not", _not, np.invert, INTEGERS)


# -- shifts ---------------------------------------------------------------------------------------

def _pow2(s: te.Expr, nbits: int, udt: str) -> te.Expr:
    """2**s in `udt` for 0 <= s < nbits, as a product over the bits of s of 2**(2**k) or 1."""
    out = lit(1, udt)
    k = 0
    while (1 << k) < nbits:
        factor = te.if_then_else(_bit(s, k) == lit(1, s.dtype), lit(1 << (1 << k), udt), lit(1, udt))
        out = out * factor
        k += 1
    return out


def _left(a: te.Expr, s: te.Expr) -> te.Expr:
    nbits, udt = dt.bits(a.dtype), _unsigned(a.dtype)
    zero = lit(0, a.dtype)
    in_range = te.all(s >= zero, s < lit(nbits, a.dtype))
    shifted = (a.astype(udt) * _pow2(s, nbits, udt)).astype(a.dtype)
    return te.if_then_else(in_range, shifted, zero)


def _right(a: te.Expr, s: te.Expr) -> te.Expr:
    nbits = dt.bits(a.dtype)
    zero = lit(0, a.dtype)
    if a.dtype not in SIGNED:
        in_range = s < lit(nbits, a.dtype)
        return te.if_then_else(in_range, a // _pow2(s, nbits, a.dtype), zero)
    # Arithmetic shift = floor division by 2**s.  A shift by nbits - 1 or more leaves only the
    # sign fill, and 2**(nbits - 1) does not fit the signed type, so it joins the fill case.
    in_range = te.all(s >= zero, s < lit(nbits - 1, a.dtype))
    fill = te.if_then_else(a < zero, lit(-1, a.dtype), zero)
    return te.if_then_else(in_range, a // _pow2(s, nbits, a.dtype), fill)


def np_shift(a: np.ndarray, s: np.ndarray, left: bool) -> np.ndarray:
    """Reference shifts with the out-of-range rule above."""
    a, s = np.broadcast_arrays(a, s)
    nbits = np.iinfo(a.dtype).bits
    valid = (s >= 0) & (s < nbits)
    safe = np.where(valid, s, 0).astype(a.dtype)
    if left:
        udt = np.dtype(f"uint{nbits}")
        shifted = np.left_shift(a.astype(udt), safe.astype(udt))   # wraps modulo 2**nbits
        return np.where(valid, shifted.astype(a.dtype), np_lit(0, a.dtype))
    shifted = np.right_shift(a, safe)
    fill = np.where(a < 0, np_lit(-1, a.dtype), np_lit(0, a.dtype)) if a.dtype.kind == "i" \
        else np.zeros(a.shape, a.dtype)
    return np.where(valid, shifted, fill)


binary_op("left_shift", _left, lambda a, s: np_shift(a, s, True), INTEGERS)
binary_op("right_shift", _right, lambda a, s: np_shift(a, s, False), INTEGERS)
