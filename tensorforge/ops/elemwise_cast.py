"""Type conversion and copying (ops -> TE): cast(x, dtype=...) and identity(x).

`cast` converts every element to `dtype` the way C and NumPy both do for in-range values:
floats to integers truncate toward zero, integers to narrower integers wrap around (two's
complement), anything to bool is `x != 0` (NaN is true), bool to numbers is 0 / 1, and
float-to-float conversions round to nearest even.  Float-to-integer conversion of a value
outside the target's range (or of NaN) is undefined, as in ONNX.

`identity` copies its input (ONNX Identity, inference-mode Dropout); graph passes may remove it.
"""
from __future__ import annotations

import numpy as np

from .. import te
from ..ir import dtype as dt
from .elemwise_base import ALL, check_attrs, check_dtype
from .registry import INJECTIVE, OpDef, OpError, TensorType, register


class _Cast:
    @staticmethod
    def infer(x: TensorType, **attrs) -> TensorType:
        check_attrs("cast", attrs, ("dtype",))
        if x is None:
            raise OpError("cast: input x is required")
        target = attrs.get("dtype")
        if not isinstance(target, str) or target not in dt.SCALAR_TYPES:
            raise OpError(f"cast: dtype must be one of {', '.join(dt.SCALAR_TYPES)}, got {target!r}")
        check_dtype("cast", "x", x.dtype, ALL)
        return TensorType(tuple(x.shape), target)

    @staticmethod
    def compute(x: te.Tensor, dtype: str) -> te.Tensor:
        return te.compute(x.shape, lambda *i: x[i].astype(dtype), name="cast", tag="cast")

    @staticmethod
    def reference(x: np.ndarray, dtype: str) -> np.ndarray:
        with np.errstate(all="ignore"):
            return x.astype(dtype)


register(OpDef("cast", INJECTIVE, _Cast.infer, _Cast.reference, _Cast.compute))


class _Identity:
    @staticmethod
    def infer(x: TensorType, **attrs) -> TensorType:
        check_attrs("identity", attrs, ())
        if x is None:
            raise OpError("identity: input x is required")
        check_dtype("identity", "x", x.dtype, ALL + dt.NARROW_TYPES)
        return TensorType(tuple(x.shape), x.dtype)

    @staticmethod
    def compute(x: te.Tensor) -> te.Tensor:
        return te.compute(x.shape, lambda *i: x[i], name="identity", tag="identity")

    @staticmethod
    def reference(x: np.ndarray) -> np.ndarray:
        return x.copy()


register(OpDef("identity", INJECTIVE, _Identity.infer, _Identity.reference, _Identity.compute, narrow=True))
