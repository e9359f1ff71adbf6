"""Selection ops (ops -> TE): where(cond, x, y) and clip(x, min?, max?).

`where` broadcasts all three inputs; `cond` is bool, x and y share any dtype.

`clip` bounds x from below and above.  Each bound is either a constant attribute (`min=`,
`max=`, a Python number; what frontends pass when the model's bound is a constant) or an
optional tensor input broadcastable to x (a bound computed at run time), or absent.  It is
computed as `t = lo if x < lo else x; hi if t > hi else t`, so NaN passes through and a lower
bound above the upper bound gives the upper bound (np.clip, ONNX Clip).  Integer attribute
bounds outside the dtype's range are clamped to it.
"""
from __future__ import annotations

import numpy as np

from .. import te
from .common import broadcast_shape, shape_of
from .elemwise_base import (
    ALL,
    BOOL,
    NUMERIC,
    broadcast_compute,
    broadcasts_to,
    check_attrs,
    check_dtype,
    fresh,
    is_float,
    lit,
)
from .registry import INJECTIVE, OpDef, OpError, TensorType, register

# -- where ----------------------------------------------------------------------------------------

class _Where:
    @staticmethod
    def infer(cond: TensorType, x: TensorType, y: TensorType, **attrs) -> TensorType:
        check_attrs("where", attrs, ())
        if cond is None or x is None or y is None:
            raise OpError("where: takes three inputs (condition, x, y)")
        check_dtype("where", "condition", cond.dtype, BOOL)
        check_dtype("where", "x", x.dtype, ALL)
        if x.dtype != y.dtype:
            raise OpError(f"where: x has dtype {x.dtype} but y has {y.dtype}; they must match")
        return TensorType(broadcast_shape(cond.shape, x.shape, y.shape, op="where"), x.dtype)

    @staticmethod
    def compute(cond: te.Tensor, x: te.Tensor, y: te.Tensor) -> te.Tensor:
        return broadcast_compute("where", [cond, x, y], te.if_then_else)

    @staticmethod
    def reference(cond: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.where(cond, x, y).astype(x.dtype, copy=False)


register(OpDef("where", INJECTIVE, _Where.infer, _Where.reference, _Where.compute))


# -- clip -----------------------------------------------------------------------------------------

def _attr_bound(value, dtype: str, which: str):
    """The attribute bound as a Python number valid for `dtype` (None when absent)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise OpError(f"clip: {which} must be a number or None, got {value!r}")
    if is_float(dtype):
        return float(value)
    if isinstance(value, float) and not value.is_integer():
        raise OpError(f"clip: {which}={value} is not an integer, but x has dtype {dtype}")
    info = np.iinfo(dtype)
    return min(max(int(value), int(info.min)), int(info.max))


def _check_bound(x: TensorType, bound: TensorType | None, attr, which: str) -> None:
    if bound is None:
        return
    if attr is not None:
        raise OpError(f"clip: {which} is given both as an input and as an attribute")
    if bound.dtype != x.dtype:
        raise OpError(f"clip: the {which} input has dtype {bound.dtype} but x has {x.dtype}")
    if not broadcasts_to(bound.shape, x.shape):
        raise OpError(f"clip: the {which} input of shape {tuple(bound.shape)} does not broadcast to "
                      f"x's shape {tuple(x.shape)}")


class _Clip:
    @staticmethod
    def infer(x: TensorType, lo: TensorType | None = None, hi: TensorType | None = None, **attrs) -> TensorType:
        check_attrs("clip", attrs, ("min", "max"))
        if x is None:
            raise OpError("clip: input x is required")
        check_dtype("clip", "x", x.dtype, NUMERIC)
        lo_attr = _attr_bound(attrs.get("min"), x.dtype, "min")
        hi_attr = _attr_bound(attrs.get("max"), x.dtype, "max")
        _check_bound(x, lo, lo_attr, "min")
        _check_bound(x, hi, hi_attr, "max")
        return TensorType(tuple(x.shape), x.dtype)

    @staticmethod
    def compute(x: te.Tensor, lo: te.Tensor | None = None, hi: te.Tensor | None = None,
                min=None, max=None) -> te.Tensor:  # noqa: A002 - ONNX's attribute names
        lo_c = _attr_bound(min, x.dtype, "min")
        hi_c = _attr_bound(max, x.dtype, "max")

        def body(v, lo_v, hi_v):
            low = lo_v if lo_v is not None else (lit(lo_c, x.dtype) if lo_c is not None else None)
            high = hi_v if hi_v is not None else (lit(hi_c, x.dtype) if hi_c is not None else None)
            if low is not None:
                v = te.if_then_else(v < low, low, v)
            if high is not None:
                v = te.if_then_else(v > high, high, v)
            return v

        return broadcast_compute("clip", [x, lo, hi], body, shape=shape_of(x))

    @staticmethod
    def reference(x: np.ndarray, lo: np.ndarray | None = None, hi: np.ndarray | None = None,
                  min=None, max=None) -> np.ndarray:  # noqa: A002
        low = lo if lo is not None else _attr_bound(min, x.dtype.name, "min")
        high = hi if hi is not None else _attr_bound(max, x.dtype.name, "max")
        out = x
        if low is not None:
            low = np.asarray(low, x.dtype)
            out = np.where(out < low, low, out)
        if high is not None:
            high = np.asarray(high, x.dtype)
            out = np.where(out > high, high, out)
        return fresh(out, x.shape, x.dtype)


register(OpDef("clip", INJECTIVE, _Clip.infer, _Clip.reference, _Clip.compute,
               attr_defaults={"min": None, "max": None}))
