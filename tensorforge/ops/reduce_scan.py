"""cumsum and cumprod (ONNX CumSum / CumProd with exclusive / reverse) as REDUCTIONs over a
triangular domain.

out[.., i, ..] = sum (product) of x[.., k, ..] over the k the flags select:  k <= i (plain),
k < i (exclusive), k >= i (reverse), k > i (both); an empty selection gives the identity (0 or
1).  Written as a full-length reduce axis with a `where` condition: O(n^2) along the axis,
simple and exact; a scan template can replace the schedule without changing what is computed.
Integers wrap in their dtype; float16 accumulates in float32.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import te
from .common import const_shape, normalize_axis
from .reduce import accum_dtype
from .registry import REDUCTION, OpDef, OpError, TensorType, register

_SCANS: dict[str, tuple[Any, Any, int]] = {  # op name -> (TE reducer, NumPy scan, identity)
    "cumsum": (te.sum, np.cumsum, 0),
    "cumprod": (te.prod, np.cumprod, 1),
}


def _selected(k, i, exclusive: int, reverse: int):
    if reverse:
        return k > i if exclusive else k >= i
    return k < i if exclusive else k <= i


def _make(name: str) -> OpDef:
    reducer, np_scan, identity = _SCANS[name]

    def infer(x: TensorType, axis: int, exclusive: int = 0, reverse: int = 0) -> TensorType:
        if not x.shape:
            raise OpError(f"{name}: input must have rank >= 1")
        if x.dtype == "bool":
            raise OpError(f"{name}: bool input is not supported")
        normalize_axis(axis, len(x.shape), name)
        return TensorType(tuple(x.shape), x.dtype)

    def compute(x: te.Tensor, axis: int, exclusive: int = 0, reverse: int = 0) -> Any:
        shape = const_shape(x)
        a = normalize_axis(axis, len(shape), name)
        acc = accum_dtype(x.dtype)

        def f(*o: Any) -> Any:
            k = te.reduce_axis((0, shape[a]), name="k")
            value = x[o[:a] + (k,) + o[a + 1:]].astype(acc)
            return reducer(value, axis=k, where=_selected(k.var, o[a], exclusive, reverse))

        if acc == x.dtype:
            return te.compute(shape, f, name=name, tag=name)
        total: Any = te.compute(shape, f, name=f"{name}_acc")
        return te.compute(shape, lambda *o: total[o].astype(x.dtype), name=name, tag=name)

    def reference(x: np.ndarray, axis: int, exclusive: int = 0, reverse: int = 0) -> np.ndarray:
        a = normalize_axis(axis, x.ndim, name)
        acc = accum_dtype(x.dtype.name)
        v = np.flip(x, a) if reverse else x
        out = np_scan(v, axis=a, dtype=acc)
        if exclusive and x.shape[a]:          # shift by one: out[0] = identity, out[i] = scan of v[:i]
            head = np.full_like(np.take(out, [0], axis=a), identity)
            out = np.concatenate([head, np.take(out, np.arange(x.shape[a] - 1), axis=a)], axis=a)
        out = np.flip(out, a) if reverse else out
        return out.astype(x.dtype)

    return OpDef(name, REDUCTION, infer, reference, compute,
                 attr_defaults={"exclusive": 0, "reverse": 0})


SCAN_OPS: dict[str, OpDef] = {name: register(_make(name)) for name in _SCANS}
