"""topk: the k largest (or smallest) elements along an axis and their int64 indices.

OPAQUE: sorting does not fit a tensor expression, so the executor runs the NumPy kernel of
runtime/host_kernels.py.  Order
as ONNX: by value (descending for largest), equal values by ascending index; `sorted=0` leaves the
order unspecified, and this kernel returns it sorted.
"""
from __future__ import annotations

import numpy as np

from ..runtime import host_kernels
from .common import normalize_axis
from .registry import OPAQUE, OpError, TensorType, op


def _check(x: TensorType | np.ndarray, k: int, axis: int) -> int:
    shape = tuple(x.shape)
    if not shape:
        raise OpError("topk: input must have rank >= 1")
    a = normalize_axis(axis, len(shape), "topk")
    if not 0 <= int(k) <= shape[a]:
        raise OpError(f"topk: k = {k} must be in [0, {shape[a]}] (the size of axis {a} of {shape})")
    return a


@op("topk", pattern=OPAQUE, attr_defaults={"axis": -1, "largest": 1, "sorted": 1})
class topk:
    def infer(x: TensorType, k: int, axis: int = -1, largest: int = 1, sorted: int = 1) -> tuple:  # noqa: A002
        if x.dtype == "bool":
            raise OpError("topk: bool input is not supported")
        a = _check(x, k, axis)
        shape = list(x.shape)
        shape[a] = int(k)
        return TensorType(tuple(shape), x.dtype), TensorType(tuple(shape), "int64")

    def split_axes(rank: int, k: int, axis: int = -1, **_) -> tuple:
        return tuple(a for a in range(rank) if a != normalize_axis(axis, rank, "topk"))

    def reference(x: np.ndarray, k: int, axis: int = -1, largest: int = 1, sorted: int = 1) -> tuple:  # noqa: A002
        _check(x, k, axis)
        return host_kernels.topk(x, k, axis, largest, sorted)
