"""Smooth activations (ops -> TE): sigmoid, tanh, softplus, softsign, elu, selu, celu, mish,
gelu (exact or tanh approximation) and swish.  Floating-point inputs only.

Formulas are chosen to stay finite where the textbook form overflows, and the NumPy reference
spells the same operations in the same order:

    softplus(x) = max(x, 0) + log1p(exp(-|x|))           (never exp of a large positive x)
    elu(x)      = x if x > 0 else alpha * expm1(x)
    celu(x)     = max(x, 0) + min(alpha * expm1(x / alpha), 0)
    gelu(x)     = 0.5 * x * (1 + erf(x / sqrt(2)))   or   0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
"""
from __future__ import annotations

import math

import numpy as np

from .. import te
from .elemwise_base import FLOATS, check_number_attrs, lit, np_lit, unary_op
from .elemwise_unary import erf_array
from .registry import OpError


def _via_float32(fn):
    """A reference that computes float16 in float32 and rounds once, as a single intrinsic call
    does after legalization."""
    def ref(x, **attrs):
        if x.dtype == np.float16:
            return fn(x.astype(np.float32), **attrs).astype(np.float16)
        return fn(x, **attrs)
    return ref


def _np_sigmoid(x):
    one = np_lit(1, x.dtype)
    return one / (one + np.exp(-x))


unary_op("sigmoid", te.sigmoid, _via_float32(_np_sigmoid), FLOATS)
unary_op("tanh", te.tanh, np.tanh, FLOATS)


# -- softplus, softsign, mish ---------------------------------------------------------------------

def softplus_expr(x: te.Expr) -> te.Expr:
    zero = lit(0.0, x.dtype)
    return te.if_then_else(x > zero, x, zero) + te.log1p(te.exp(-te.abs(x)))


def np_softplus(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, np_lit(0, x.dtype)) + np.log1p(np.exp(-np.abs(x)))


unary_op("softplus", softplus_expr, np_softplus, FLOATS)
unary_op("softsign", lambda x: x / (lit(1.0, x.dtype) + te.abs(x)),
         lambda x: x / (np_lit(1, x.dtype) + np.abs(x)), FLOATS)
unary_op("mish", lambda x: x * te.tanh(softplus_expr(x)), lambda x: x * np.tanh(np_softplus(x)), FLOATS)


# -- exponential linear units ---------------------------------------------------------------------

def _elu(x, alpha=1.0):
    return te.if_then_else(x > lit(0.0, x.dtype), x, lit(alpha, x.dtype) * te.expm1(x))


def _np_elu(x, alpha=1.0):
    return np.where(x > 0, x, np_lit(alpha, x.dtype) * np.expm1(x))


def _validator(op: str, nonzero: str | None = None):
    def validate(dtype: str, **attrs) -> None:
        check_number_attrs(op, **attrs)
        if nonzero is not None and attrs.get(nonzero) == 0:
            raise OpError(f"{op}: {nonzero} must be nonzero")
    return validate


unary_op("elu", _elu, _np_elu, FLOATS, attr_defaults={"alpha": 1.0}, validate=_validator("elu"))

SELU_ALPHA = 1.67326319217681884765625
SELU_GAMMA = 1.05070102214813232421875


def _selu(x, alpha=SELU_ALPHA, gamma=SELU_GAMMA):
    return _elu(x, alpha) * lit(gamma, x.dtype)


def _np_selu(x, alpha=SELU_ALPHA, gamma=SELU_GAMMA):
    return _np_elu(x, alpha) * np_lit(gamma, x.dtype)


unary_op("selu", _selu, _np_selu, FLOATS, attr_defaults={"alpha": SELU_ALPHA, "gamma": SELU_GAMMA},
         validate=_validator("selu"))


def _celu(x, alpha=1.0):
    zero, a = lit(0.0, x.dtype), lit(alpha, x.dtype)
    t = a * te.expm1(x / a)
    return te.if_then_else(x > zero, x, zero) + te.if_then_else(t > zero, zero, t)


def _np_celu(x, alpha=1.0):
    zero, a = np_lit(0, x.dtype), np_lit(alpha, x.dtype)
    t = a * np.expm1(x / a)
    return np.where(x > 0, x, zero) + np.where(t > 0, zero, t)


unary_op("celu", _celu, _np_celu, FLOATS, attr_defaults={"alpha": 1.0}, validate=_validator("celu", "alpha"))


# -- gelu, swish ----------------------------------------------------------------------------------

_TANH_C = math.sqrt(2.0 / math.pi)


def _gelu(x, approximate="none"):
    half, one = lit(0.5, x.dtype), lit(1.0, x.dtype)
    if approximate == "tanh":
        inner = lit(_TANH_C, x.dtype) * (x + lit(0.044715, x.dtype) * (x * x * x))
        return half * x * (one + te.tanh(inner))
    return half * x * (one + te.erf(x * lit(math.sqrt(0.5), x.dtype)))


def _np_gelu(x, approximate="none"):
    half, one = np_lit(0.5, x.dtype), np_lit(1, x.dtype)
    if approximate == "tanh":
        inner = np_lit(_TANH_C, x.dtype) * (x + np_lit(0.044715, x.dtype) * (x * x * x))
        return half * x * (one + np.tanh(inner))
    return half * x * (one + erf_array(x * np_lit(math.sqrt(0.5), x.dtype)))


def _check_gelu(dtype: str, approximate="none") -> None:
    if approximate not in ("none", "tanh"):
        raise OpError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


unary_op("gelu", _gelu, _np_gelu, FLOATS, attr_defaults={"approximate": "none"}, validate=_check_gelu)


def _swish(x, alpha=1.0):
    return x * te.sigmoid(lit(alpha, x.dtype) * x)


def _np_swish(x, alpha=1.0):
    return x * _via_float32(_np_sigmoid)(np_lit(alpha, x.dtype) * x).astype(x.dtype)


unary_op("swish", _swish, _np_swish, FLOATS, attr_defaults={"alpha": 1.0}, validate=_validator("swish"))
