"""Broadcasting arithmetic (ops -> TE): add, sub, mul, div and mod of two tensors, and
maximum, minimum, sum and mean of one or more (ONNX Max, Min, Sum, Mean).

All inputs share one dtype (the frontends insert casts).  Integer semantics are ONNX's, which
for these ops are C's, made total the way NumPy makes them:

* integer `div` truncates toward zero; x / 0 is 0, and MIN / -1 wraps to MIN (C would trap);
* `mod` with fmod=0 takes the divisor's sign (floor modulo, Python's %); with fmod=1 it takes
  the dividend's sign (C's fmod / %).  x mod 0 is 0 for integers and NaN for floats;
* add, sub and mul wrap around on overflow.

The N-input ops fold left to right, ((x0 op x1) op x2) ..., in the inputs' dtype, which is the
order (and rounding) of the NumPy reference; mean divides the sum by N at the end.  maximum and
minimum propagate NaN from any input, as np.maximum / np.minimum do.
"""
from __future__ import annotations

from functools import reduce
from typing import Callable

import numpy as np

from .. import te
from ..ir.expr import Div
from .common import broadcast_shape
from .elemwise_base import (
    FLOATS,
    NUMERIC,
    SIGNED,
    binary_op,
    broadcast_compute,
    check_attrs,
    common_dtype,
    fresh,
    is_float,
    lit,
    nan_max,
    nan_min,
)
from .registry import INJECTIVE, OpDef, OpError, TensorType, register

binary_op("add", lambda a, b: a + b, np.add, NUMERIC)
binary_op("sub", lambda a, b: a - b, np.subtract, NUMERIC)
binary_op("mul", lambda a, b: a * b, np.multiply, NUMERIC)


# -- division -------------------------------------------------------------------------------------

def trunc_div(a: te.Expr, b: te.Expr) -> te.Expr:
    """Integer a / b rounded toward zero, total: x / 0 = 0 and MIN / -1 = MIN."""
    zero = lit(0, a.dtype)
    q = Div(a, b)                      # C integer division truncates toward zero
    if a.dtype in SIGNED:              # MIN / -1 overflows (and traps on x86); -MIN wraps to MIN
        q = te.if_then_else(b == lit(-1, a.dtype), zero - a, q)
    return te.if_then_else(b == zero, zero, q)


def _div(a, b):
    return a / b if is_float(a.dtype) else trunc_div(a, b)


def np_trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """NumPy integer division rounded toward zero, with the same totality rules as `trunc_div`."""
    q = np.floor_divide(a, b)
    r = np.remainder(a, b)
    fix = (r != 0) & ((a < 0) != (b < 0))
    return q + fix.astype(q.dtype)


def _np_div(a, b):
    return np.true_divide(a, b).astype(a.dtype) if is_float(a.dtype.name) else np_trunc_div(a, b)


binary_op("div", _div, _np_div, NUMERIC)


# -- modulo ---------------------------------------------------------------------------------------

def _float_mod(a, b, fmod):
    r = te.fmod(a, b)
    if fmod:
        return r
    # Floor modulo from the C remainder: move a nonzero remainder whose sign differs from the
    # divisor's by one divisor (exactly what np.mod does; also right for infinite divisors).
    zero = lit(0.0, a.dtype)
    return te.if_then_else(te.all(r != zero, (r < zero) != (b < zero)), r + b, r)


def _int_mod(a, b, fmod):
    zero = lit(0, a.dtype)
    # fmod: C's remainder, sign of the dividend; else floor modulo, sign of the divisor.
    r = a - Div(a, b) * b if fmod else a % b
    undefined = b == zero              # x mod 0 is 0 (NumPy)
    if a.dtype in SIGNED:              # MIN % -1 traps in C; the answer is 0
        undefined = te.any(undefined, b == lit(-1, a.dtype))
    return te.if_then_else(undefined, zero, r)


def _mod(a, b, fmod=0):
    return _float_mod(a, b, fmod) if is_float(a.dtype) else _int_mod(a, b, fmod)


def _np_mod(a, b, fmod=0):
    return np.fmod(a, b) if fmod else np.mod(a, b)


def _check_mod(dtype: str, fmod=0) -> None:
    if fmod not in (0, 1):
        raise OpError(f"mod: fmod must be 0 (floor modulo) or 1 (C fmod), got {fmod!r}")


binary_op("mod", _mod, _np_mod, NUMERIC, attr_defaults={"fmod": 0}, validate=_check_mod)


# -- N inputs ------------------------------------------------------------------------------------

def _variadic(name: str, combine: Callable, np_combine: Callable, dtypes, finish=None, np_finish=None) -> OpDef:
    """Register `name`: the left fold of `combine` over all inputs, then `finish(acc, n)`."""

    def infer(*types: TensorType, **attrs) -> TensorType:
        check_attrs(name, attrs, ())
        if not types or any(t is None for t in types):
            raise OpError(f"{name}: takes one or more inputs, none of them absent")
        dtype = common_dtype(name, types, dtypes)
        return TensorType(broadcast_shape(*[t.shape for t in types], op=name), dtype)

    def compute(*tensors):
        def body(*xs):
            acc = reduce(combine, xs)
            return finish(acc, len(xs)) if finish else acc
        return broadcast_compute(name, tensors, body)

    def reference(*arrays):
        shape = np.broadcast_shapes(*[a.shape for a in arrays])
        with np.errstate(all="ignore"):
            acc = reduce(np_combine, arrays)
            if np_finish:
                acc = np_finish(acc, len(arrays))
        return fresh(acc, shape, arrays[0].dtype)

    return register(OpDef(name, INJECTIVE, infer, reference, compute))


_variadic("maximum", nan_max, np.maximum, NUMERIC)
_variadic("minimum", nan_min, np.minimum, NUMERIC)
_variadic("sum", lambda a, b: a + b, np.add, NUMERIC)
_variadic("mean", lambda a, b: a + b, np.add, FLOATS,
          finish=lambda acc, n: acc / lit(float(n), acc.dtype),
          np_finish=lambda acc, n: acc / np.asarray(n, acc.dtype))
