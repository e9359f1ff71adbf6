"""Unary math ops (ops -> TE): abs, neg, sign, exp, log, sqrt, reciprocal, rounding,
trigonometric and hyperbolic functions, erf, isnan and isinf.

Each is one `unary_op` record: a TE scalar function and the NumPy function it must agree with.
Transcendental functions take floating-point inputs only (as in ONNX); abs, neg and sign take
every numeric dtype with NumPy's integer semantics (abs and neg wrap around at the minimum).
"""
from __future__ import annotations

import math

import numpy as np

from .. import te
from .elemwise_base import FLOATS, NUMERIC, UNSIGNED, is_float, lit, np_lit, unary_op
from .registry import OpError

# -- float intrinsics: one TE intrinsic, one NumPy ufunc ---------------------------------------------

_INTRINSICS = {
    "exp": (te.exp, np.exp), "log": (te.log, np.log), "sqrt": (te.sqrt, np.sqrt),
    "floor": (te.floor, np.floor), "ceil": (te.ceil, np.ceil),
    "round": (te.round, np.rint),            # both round half to even
    "sin": (te.sin, np.sin), "cos": (te.cos, np.cos), "tan": (te.tan, np.tan),
    "asin": (te.asin, np.arcsin), "acos": (te.acos, np.arccos), "atan": (te.atan, np.arctan),
    "sinh": (te.sinh, np.sinh), "cosh": (te.cosh, np.cosh), "asinh": (te.asinh, np.arcsinh),
    "acosh": (te.acosh, np.arccosh), "atanh": (te.atanh, np.arctanh),
}

for _name, (_te_fn, _np_fn) in _INTRINSICS.items():
    unary_op(_name, _te_fn, _np_fn, FLOATS)


def erf_array(x: np.ndarray) -> np.ndarray:
    """The error function of a float array, in its dtype (float16 is computed in float32 and
    rounded once, as the compiled code does)."""
    work = x.astype(np.float32) if x.dtype == np.float16 else x
    try:
        from scipy.special import erf
        out = erf(work)
    except ImportError:  # pragma: no cover - scipy is optional
        out = np.vectorize(math.erf, otypes=[np.float64])(work)
    return np.asarray(out).astype(x.dtype)


unary_op("erf", te.erf, erf_array, FLOATS)


def _reciprocal(x):
    return lit(1.0, x.dtype) / x


unary_op("reciprocal", _reciprocal, lambda x: np_lit(1.0, x.dtype) / x, FLOATS)


# -- every numeric dtype -----------------------------------------------------------------------------

unary_op("abs", te.abs, np.abs, NUMERIC)


def _neg(x):
    # Multiplying by -1 is exact IEEE negation (it keeps the sign of zero); integers wrap.
    if is_float(x.dtype):
        return x * lit(-1.0, x.dtype)
    return lit(0, x.dtype) - x


def _np_neg(x):
    return np.negative(x)


unary_op("neg", _neg, _np_neg, NUMERIC)


def _sign(x):
    one, zero = lit(1, x.dtype), lit(0, x.dtype)
    if x.dtype in UNSIGNED:
        return te.if_then_else(x > zero, one, zero)
    # Zero and NaN map to themselves, as np.sign does.
    rest = x if is_float(x.dtype) else zero
    return te.if_then_else(x > zero, one, te.if_then_else(x < zero, lit(-1, x.dtype), rest))


unary_op("sign", _sign, np.sign, NUMERIC)


# -- predicates ----------------------------------------------------------------------------------

unary_op("isnan", te.isnan, np.isnan, FLOATS, out_dtype="bool")


def _isinf(x, detect_positive: int = 1, detect_negative: int = 1):
    pos = x == lit(math.inf, x.dtype)
    neg = x == lit(-math.inf, x.dtype)
    if detect_positive and detect_negative:
        return te.isinf(x)
    if detect_positive:
        return pos
    if detect_negative:
        return neg
    return te.const(False, "bool")


def _np_isinf(x, detect_positive: int = 1, detect_negative: int = 1):
    if detect_positive and detect_negative:
        return np.isinf(x)
    if detect_positive:
        return np.isposinf(x)
    if detect_negative:
        return np.isneginf(x)
    return np.zeros(x.shape, bool)


def _check_isinf(dtype: str, detect_positive=1, detect_negative=1) -> None:
    for key, v in (("detect_positive", detect_positive), ("detect_negative", detect_negative)):
        if v not in (0, 1, True, False):
            raise OpError(f"isinf: {key} must be 0 or 1, got {v!r}")


unary_op("isinf", _isinf, _np_isinf, FLOATS, out_dtype="bool",
         attr_defaults={"detect_positive": 1, "detect_negative": 1}, validate=_check_isinf)
