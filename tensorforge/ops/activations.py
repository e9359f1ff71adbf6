"""Piecewise-linear activations (ops -> TE): relu, leaky_relu, prelu, thresholded_relu,
hard_sigmoid, hard_swish and shrink.

Each is a select on a comparison, written so that NaN passes through wherever NumPy's
maximum/minimum would propagate it (relu(NaN) is NaN, not 0).  Scalar parameters are
attributes (Python floats) rounded once to the input's dtype, as NumPy rounds a Python float
meeting a float16 array.
"""
from __future__ import annotations

import numpy as np

from .. import te
from .elemwise_base import (
    FLOATS,
    NUMERIC,
    broadcast_compute,
    broadcasts_to,
    check_attrs,
    check_dtype,
    check_number_attrs,
    is_float,
    lit,
    np_lit,
    unary_op,
)
from .registry import INJECTIVE, OpDef, OpError, TensorType, register


def _validator(op: str):
    def validate(dtype: str, **attrs) -> None:
        check_number_attrs(op, **attrs)
    return validate


def clamp01(t: te.Expr) -> te.Expr:
    """t limited to [0, 1], NaN kept."""
    t = te.if_then_else(t < lit(0.0, t.dtype), lit(0.0, t.dtype), t)
    return te.if_then_else(t > lit(1.0, t.dtype), lit(1.0, t.dtype), t)


def np_clamp01(t: np.ndarray) -> np.ndarray:
    t = np.where(t < 0, np_lit(0, t.dtype), t)
    return np.where(t > 1, np_lit(1, t.dtype), t)


# -- relu family ----------------------------------------------------------------------------------

unary_op("relu", lambda x: te.if_then_else(x < lit(0, x.dtype), lit(0, x.dtype), x),
         lambda x: np.where(x < 0, np_lit(0, x.dtype), x), NUMERIC)


def _leaky(x, alpha=0.01):
    return te.if_then_else(x > lit(0.0, x.dtype), x, x * lit(alpha, x.dtype))


def _np_leaky(x, alpha=0.01):
    return np.where(x > 0, x, x * np_lit(alpha, x.dtype))


unary_op("leaky_relu", _leaky, _np_leaky, FLOATS, attr_defaults={"alpha": 0.01},
         validate=_validator("leaky_relu"))


def _thresholded(x, alpha=1.0):
    return te.if_then_else(x > lit(alpha, x.dtype), x, lit(0.0, x.dtype))


def _np_thresholded(x, alpha=1.0):
    return np.where(x > np_lit(alpha, x.dtype), x, np_lit(0, x.dtype))


unary_op("thresholded_relu", _thresholded, _np_thresholded, FLOATS, attr_defaults={"alpha": 1.0},
         validate=_validator("thresholded_relu"))


class _PRelu:
    """prelu(x, slope): x where x > 0, else x * slope; slope broadcasts to x's shape."""

    @staticmethod
    def infer(x: TensorType, slope: TensorType, **attrs) -> TensorType:
        check_attrs("prelu", attrs, ())
        if x is None or slope is None:
            raise OpError("prelu: takes two inputs (x, slope)")
        check_dtype("prelu", "x", x.dtype, NUMERIC)
        if slope.dtype != x.dtype:
            raise OpError(f"prelu: slope has dtype {slope.dtype} but x has {x.dtype}")
        if not broadcasts_to(slope.shape, x.shape):
            raise OpError(f"prelu: slope of shape {tuple(slope.shape)} does not broadcast to x's shape "
                          f"{tuple(x.shape)}")
        return TensorType(tuple(x.shape), x.dtype)

    @staticmethod
    def compute(x: te.Tensor, slope: te.Tensor) -> te.Tensor:
        return broadcast_compute("prelu", [x, slope],
                                 lambda v, s: te.if_then_else(v > lit(0, v.dtype), v, v * s))

    @staticmethod
    def reference(x: np.ndarray, slope: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.where(x > 0, x, x * slope).astype(x.dtype, copy=False)


register(OpDef("prelu", INJECTIVE, _PRelu.infer, _PRelu.reference, _PRelu.compute))


# -- hard sigmoid / swish -------------------------------------------------------------------------

def _hard_sigmoid(x, alpha=0.2, beta=0.5):
    return clamp01(x * lit(alpha, x.dtype) + lit(beta, x.dtype))


def _np_hard_sigmoid(x, alpha=0.2, beta=0.5):
    return np_clamp01(x * np_lit(alpha, x.dtype) + np_lit(beta, x.dtype))


unary_op("hard_sigmoid", _hard_sigmoid, _np_hard_sigmoid, FLOATS, attr_defaults={"alpha": 0.2, "beta": 0.5},
         validate=_validator("hard_sigmoid"))

unary_op("hard_swish", lambda x: x * _hard_sigmoid(x, 1.0 / 6.0, 0.5),
         lambda x: x * _np_hard_sigmoid(x, 1.0 / 6.0, 0.5), FLOATS)


# -- shrink ---------------------------------------------------------------------------------------

def _shrink(x, bias=0.0, lambd=0.5):
    # Integers compute in float64 and truncate back, as ONNX's reference does.
    v = x if is_float(x.dtype) else x.astype("float64")
    lo, hi = lit(-lambd, v.dtype), lit(lambd, v.dtype)
    b = lit(bias, v.dtype)
    out = te.if_then_else(v < lo, v + b, te.if_then_else(v > hi, v - b, lit(0.0, v.dtype)))
    return out.astype(x.dtype)


def _np_shrink(x, bias=0.0, lambd=0.5):
    v = x if is_float(x.dtype.name) else x.astype(np.float64)
    lo, hi, b = np_lit(-lambd, v.dtype), np_lit(lambd, v.dtype), np_lit(bias, v.dtype)
    return np.where(v < lo, v + b, np.where(v > hi, v - b, np_lit(0, v.dtype))).astype(x.dtype)


def _check_shrink(dtype: str, bias=0.0, lambd=0.5) -> None:
    check_number_attrs("shrink", bias=bias, lambd=lambd)
    if lambd < 0:
        raise OpError(f"shrink: lambd must be >= 0, got {lambd}")


unary_op("shrink", _shrink, _np_shrink, NUMERIC, attr_defaults={"bias": 0.0, "lambd": 0.5},
         validate=_check_shrink)
