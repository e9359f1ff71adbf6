"""Scatters: scatter_elements (ONNX ScatterElements / Scatter) and scatter_nd (ONNX ScatterND).

Both are OPAQUE kernels run on arrays by the executor (runtime/host_kernels.py): an output element may receive any number of
updates, decided by index values known only at run time, which a TE compute could express only as
a search over every index per output element.  The kernels use NumPy's unbuffered `ufunc.at`, so
repeated indices combine with the reduction (none: the last update wins, as in ONNX Runtime).
"""
from __future__ import annotations

import numpy as np

from ..runtime import host_kernels
from .common import normalize_axis
from .index_math import check_index_dtype
from .registry import OPAQUE, OpError, TensorType, op

REDUCTIONS = ("none", "add", "mul", "max", "min")


def _check_reduction(reduction: str, op_name: str, dtype: str) -> None:
    if reduction not in REDUCTIONS:
        raise OpError(f"{op_name}: reduction {reduction!r} is not one of {REDUCTIONS}")
    if reduction in ("add", "mul") and dtype == "bool":
        raise OpError(f"{op_name}: reduction {reduction} is not defined for bool data")


@op("scatter_elements", pattern=OPAQUE, attr_defaults={"axis": 0, "reduction": "none"})
class scatter_elements:
    """out = data; out[i with its `axis` entry replaced by indices[i]] (op)= updates[i]."""

    def infer(data: TensorType, indices: TensorType, updates: TensorType, axis: int = 0,
              reduction: str = "none") -> TensorType:
        check_index_dtype(indices.dtype, "scatter_elements")
        _check_reduction(reduction, "scatter_elements", data.dtype)
        if tuple(indices.shape) != tuple(updates.shape) or len(indices.shape) != len(data.shape):
            raise OpError(f"scatter_elements: indices {tuple(indices.shape)} and updates "
                          f"{tuple(updates.shape)} must have one shape, of the rank of data {tuple(data.shape)}")
        if updates.dtype != data.dtype:
            raise OpError(f"scatter_elements: updates have dtype {updates.dtype}, data {data.dtype}")
        normalize_axis(axis, max(len(data.shape), 1), "scatter_elements")
        return TensorType(tuple(data.shape), data.dtype)

    def reference(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, axis: int = 0,
                  reduction: str = "none") -> np.ndarray:
        normalize_axis(axis, data.ndim, "scatter_elements")
        return host_kernels.scatter_elements(data, indices, updates, axis, reduction)


def scatter_nd_check(data: tuple, indices: tuple, updates: tuple) -> None:
    if not indices:
        raise OpError("scatter_nd: indices must have rank >= 1")
    k = int(indices[-1])
    if k > len(data):
        raise OpError(f"scatter_nd: index tuples of length {k} are too long for data of rank {len(data)}")
    expected = tuple(indices[:-1]) + tuple(data[k:])
    if tuple(updates) != expected:
        raise OpError(f"scatter_nd: updates have shape {tuple(updates)}, expected {expected} "
                      f"(indices {tuple(indices)}, data {tuple(data)})")


@op("scatter_nd", pattern=OPAQUE, attr_defaults={"reduction": "none"})
class scatter_nd:
    """out = data; out[indices[i.., :]] (op)= updates[i..] (each index tuple names a slice)."""

    def infer(data: TensorType, indices: TensorType, updates: TensorType, reduction: str = "none") -> TensorType:
        check_index_dtype(indices.dtype, "scatter_nd")
        _check_reduction(reduction, "scatter_nd", data.dtype)
        scatter_nd_check(tuple(data.shape), tuple(indices.shape), tuple(updates.shape))
        if updates.dtype != data.dtype:
            raise OpError(f"scatter_nd: updates have dtype {updates.dtype}, data {data.dtype}")
        return TensorType(tuple(data.shape), data.dtype)

    def reference(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, reduction: str = "none") -> np.ndarray:
        scatter_nd_check(data.shape, indices.shape, updates.shape)
        return host_kernels.scatter_nd(data, indices, updates, reduction)
