"""pow(base, exponent) with mixed dtypes (ops -> TE), as ONNX Pow: the result has the base's
dtype; the arithmetic happens in NumPy's promotion of the two dtypes.

* A floating-point promotion computes `pow` in that type and casts to the base's dtype (so an
  int32 base with a float exponent truncates the real power toward zero).
* An integer promotion computes the exact power with wrap-around, by square-and-multiply over
  the exponent's bits: one `Let` per step keeps the expression linear in the bit count.  A
  negative exponent gives 1 / base**-e truncated toward zero: 1 for base 1, +-1 for base -1,
  0 otherwise (also for base 0, where NumPy would raise).
"""
from __future__ import annotations

import numpy as np

from .. import te
from ..ir import dtype as dt
from ..ir.expr import Let, Var
from .common import broadcast_shape
from .elemwise_base import NUMERIC, SIGNED, broadcast_compute, check_attrs, check_dtype, is_float, lit
from .registry import INJECTIVE, OpDef, OpError, TensorType, register


def work_dtype(base: str, exponent: str) -> str:
    """The dtype pow computes in: NumPy's promotion of the two."""
    return np.result_type(np.dtype(base), np.dtype(exponent)).name


def _bits_of(e: te.Expr, k: int) -> te.Expr:
    """Bit k of the unsigned value e, as a bool."""
    return (e // lit(1 << k, e.dtype)) % lit(2, e.dtype) == lit(1, e.dtype)


def _square_and_multiply(base: te.Expr, exponent: te.Expr, nbits: int) -> te.Expr:
    """base ** exponent modulo 2**bits(base) for unsigned `base` and `exponent` (same dtype)."""
    udt = base.dtype
    one = lit(1, udt)
    bindings = []
    power = Var("pow_p0", udt)
    bindings.append((power, base))
    acc = one
    for k in range(nbits):
        step = Var(f"pow_r{k + 1}", udt)
        bindings.append((step, acc * te.if_then_else(_bits_of(exponent, k), power, one)))
        acc = step
        if k + 1 < nbits:
            nxt = Var(f"pow_p{k + 1}", udt)
            bindings.append((nxt, power * power))
            power = nxt
    result = acc
    for var, value in reversed(bindings):
        result = Let(var, value, result)
    return result


def int_pow(base: te.Expr, exponent: te.Expr) -> te.Expr:
    """Exact integer power with wrap-around; both operands of one integer dtype."""
    work = base.dtype
    nbits = dt.bits(work)
    udt = f"uint{max(nbits, 32)}"       # unsigned arithmetic wraps without undefined behaviour
    positive = _square_and_multiply(base.astype(udt), exponent.astype(udt), nbits).astype(work)
    if work not in SIGNED:
        return positive
    one, zero = lit(1, work), lit(0, work)
    odd = exponent % lit(2, work) != zero
    negative = te.if_then_else(base == one, one, te.if_then_else(
        base == lit(-1, work), te.if_then_else(odd, lit(-1, work), one), zero))
    return te.if_then_else(exponent < zero, negative, positive)


def np_int_pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The reference of `int_pow` (a and b of one integer dtype)."""
    negative = b < 0
    positive = np.power(a, np.where(negative, 0, b).astype(b.dtype))
    if not negative.any():
        return positive
    one = np.ones((), a.dtype)
    odd = (b % 2) != 0
    neg = np.where(a == 1, one, np.where(a == -1, np.where(odd, -one, one), np.zeros((), a.dtype)))
    return np.where(negative, neg, positive)


def _pow_expr(a: te.Expr, b: te.Expr, out_dtype: str) -> te.Expr:
    work = work_dtype(a.dtype, b.dtype)
    a, b = a.astype(work), b.astype(work)
    value = te.pow(a, b) if is_float(work) else int_pow(a, b)
    return value.astype(out_dtype)


class _Pow:
    @staticmethod
    def infer(base: TensorType, exponent: TensorType, **attrs) -> TensorType:
        check_attrs("pow", attrs, ())
        if base is None or exponent is None:
            raise OpError("pow: takes two inputs (base, exponent)")
        check_dtype("pow", "base", base.dtype, NUMERIC)
        check_dtype("pow", "exponent", exponent.dtype, NUMERIC)
        return TensorType(broadcast_shape(base.shape, exponent.shape, op="pow"), base.dtype)

    @staticmethod
    def compute(base: te.Tensor, exponent: te.Tensor) -> te.Tensor:
        return broadcast_compute("pow", [base, exponent], lambda a, b: _pow_expr(a, b, base.dtype))

    @staticmethod
    def reference(base: np.ndarray, exponent: np.ndarray) -> np.ndarray:
        work = work_dtype(base.dtype.name, exponent.dtype.name)
        a, b = np.broadcast_arrays(base.astype(work), exponent.astype(work))
        with np.errstate(all="ignore"):
            out = np.power(a, b) if is_float(work) else np_int_pow(a, b)
            return np.asarray(out).astype(base.dtype)


register(OpDef("pow", INJECTIVE, _Pow.infer, _Pow.reference, _Pow.compute))
