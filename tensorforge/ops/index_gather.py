"""Gathers: gather (ONNX Gather / np.take), gather_elements (np.take_along_axis) and gather_nd.

Injective: each output element reads one index element, then one data element at a position
computed from it.  Negative indices count from the end (ONNX); in the compiled kernel an index
out of range is clamped to the border, so bad input never reads outside a buffer (the reference
raises instead).
"""
from __future__ import annotations

import numpy as np

from .. import te
from .common import const_shape, normalize_axis, shape_of
from .index_math import check_index_dtype, safe_index
from .registry import INJECTIVE, OpError, TensorType, op


def _wrapped(indices: np.ndarray, dim: int, what: str) -> np.ndarray:
    """Indices made non-negative; IndexError naming the op when one is out of range."""
    idx = np.asarray(indices).astype(np.int64)
    if idx.size and (idx.min() < -dim or idx.max() >= dim):
        raise IndexError(f"{what}: an index is out of range for an axis of size {dim}")
    return np.where(idx < 0, idx + dim, idx)


# -- gather -------------------------------------------------------------------------------------
@op("gather", pattern=INJECTIVE, attr_defaults={"axis": 0}, narrow=True)
class gather:
    """out[a.., j.., b..] = data[a.., indices[j..], b..] with `indices` taking the place of `axis`."""

    def infer(data: TensorType, indices: TensorType, axis: int = 0) -> TensorType:
        check_index_dtype(indices.dtype, "gather")
        if not data.shape:
            raise OpError("gather: data must have rank >= 1")
        axis = normalize_axis(axis, len(data.shape), "gather")
        return TensorType(tuple(data.shape[:axis]) + tuple(indices.shape) + tuple(data.shape[axis + 1:]), data.dtype)

    def compute(data: te.Tensor, indices: te.Tensor, axis: int = 0) -> te.Tensor:
        shape = const_shape(data)
        axis = normalize_axis(axis, len(shape), "gather")
        q = len(indices.shape)
        out_shape = shape[:axis] + shape_of(indices) + shape[axis + 1:]     # any number of indices

        def f(*o):
            pos = safe_index(indices[o[axis:axis + q]], shape[axis])
            return data[o[:axis] + (pos,) + o[axis + q:]]

        return te.compute(out_shape, f, name="gather", tag="gather")

    def reference(data: np.ndarray, indices: np.ndarray, axis: int = 0) -> np.ndarray:
        axis = normalize_axis(axis, data.ndim, "gather")
        return np.take(data, _wrapped(indices, data.shape[axis], "gather"), axis=axis)


# -- gather_elements ----------------------------------------------------------------------------
@op("gather_elements", pattern=INJECTIVE, attr_defaults={"axis": 0}, narrow=True)
class gather_elements:
    """out[i] = data[i with its `axis` entry replaced by indices[i]]; out has the indices' shape."""

    def infer(data: TensorType, indices: TensorType, axis: int = 0) -> TensorType:
        check_index_dtype(indices.dtype, "gather_elements")
        if len(indices.shape) != len(data.shape) or not data.shape:
            raise OpError(f"gather_elements: indices {tuple(indices.shape)} must have the rank of "
                          f"data {tuple(data.shape)} (>= 1)")
        axis = normalize_axis(axis, len(data.shape), "gather_elements")
        if any(i > d for k, (i, d) in enumerate(zip(indices.shape, data.shape)) if k != axis):
            raise OpError(f"gather_elements: indices {tuple(indices.shape)} are larger than data "
                          f"{tuple(data.shape)} outside axis {axis}")
        return TensorType(tuple(indices.shape), data.dtype)

    def compute(data: te.Tensor, indices: te.Tensor, axis: int = 0) -> te.Tensor:
        shape = const_shape(data)
        axis = normalize_axis(axis, len(shape), "gather_elements")

        def f(*o):
            pos = safe_index(indices[o], shape[axis])
            return data[o[:axis] + (pos,) + o[axis + 1:]]

        return te.compute(const_shape(indices), f, name="gather_elements", tag="gather_elements")

    def reference(data: np.ndarray, indices: np.ndarray, axis: int = 0) -> np.ndarray:
        axis = normalize_axis(axis, data.ndim, "gather_elements")
        idx = _wrapped(indices, data.shape[axis], "gather_elements")
        # take_along_axis needs the other axes to broadcast; ONNX allows them to be smaller
        window = tuple(slice(0, n) if k != axis else slice(None) for k, n in enumerate(idx.shape))
        return np.take_along_axis(data[window], idx, axis=axis)


# -- gather_nd ----------------------------------------------------------------------------------
def gather_nd_shape(data: tuple, indices: tuple, batch_dims: int) -> tuple:
    if not indices:
        raise OpError("gather_nd: indices must have rank >= 1")
    k = int(indices[-1])
    b = int(batch_dims)
    if b < 0 or b >= min(len(data), len(indices)):
        raise OpError(f"gather_nd: batch_dims {b} must be below the ranks of data {data} and indices {indices}")
    if tuple(data[:b]) != tuple(indices[:b]):
        raise OpError(f"gather_nd: the first {b} (batch) dimensions of data {data} and indices {indices} differ")
    if k > len(data) - b:
        raise OpError(f"gather_nd: index tuples of length {k} are too long for data {data} with "
                      f"{b} batch dimension(s)")
    return tuple(indices[:-1]) + tuple(data[b + k:])


@op("gather_nd", pattern=INJECTIVE, attr_defaults={"batch_dims": 0}, narrow=True)
class gather_nd:
    """out[b.., i.., r..] = data[b.., indices[b.., i.., :], r..] (the last indices axis holds a
    partial index into the non-batch axes of data)."""

    def infer(data: TensorType, indices: TensorType, batch_dims: int = 0) -> TensorType:
        check_index_dtype(indices.dtype, "gather_nd")
        return TensorType(gather_nd_shape(tuple(data.shape), tuple(indices.shape), batch_dims), data.dtype)

    def compute(data: te.Tensor, indices: te.Tensor, batch_dims: int = 0) -> te.Tensor:
        dshape, ishape = const_shape(data), const_shape(indices)
        out_shape = gather_nd_shape(dshape, ishape, batch_dims)
        q, k = len(ishape) - 1, ishape[-1]

        def f(*o):
            lead = o[:q]
            picked = tuple(safe_index(indices[lead + (j,)], dshape[batch_dims + j]) for j in range(k))
            return data[o[:batch_dims] + picked + o[q:]]

        return te.compute(out_shape, f, name="gather_nd", tag="gather_nd")

    def reference(data: np.ndarray, indices: np.ndarray, batch_dims: int = 0) -> np.ndarray:
        out_shape = gather_nd_shape(data.shape, indices.shape, batch_dims)
        b, k = batch_dims, indices.shape[-1]
        idx = np.asarray(indices).astype(np.int64)
        for j in range(k):
            idx[..., j] = _wrapped(idx[..., j], data.shape[b + j], "gather_nd")
        batch = int(np.prod(data.shape[:b], dtype=np.int64))
        flat_data = data.reshape((batch,) + data.shape[b:])
        per_batch = int(np.prod(indices.shape[b:-1], dtype=np.int64))
        flat_idx = idx.reshape(batch, per_batch, k)
        if k == 0:                            # empty index tuples pick whole slices
            rows = [np.broadcast_to(flat_data[n], (per_batch,) + flat_data.shape[1:]) for n in range(batch)]
        else:
            rows = [flat_data[n][tuple(flat_idx[n].T)] for n in range(batch)]
        return np.asarray(rows, dtype=data.dtype).reshape(out_shape)
