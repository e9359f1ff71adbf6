"""Ops that generate values from positions: constant_of_shape, range, eye_like, trilu, one_hot.

All injective.  constant_of_shape and range take no tensor input (their shapes are attributes;
the ONNX converter usually folds them to constants); eye_like reads only its input's shape;
trilu keeps a triangle of the last two axes; one_hot compares each index with the position along
the new axis.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .. import te
from ..ir import dtype as dt
from .common import const_shape
from .index_math import check_int_tuple
from .registry import INJECTIVE, OpError, TensorType, op


def _scalar(value, dtype: str):
    """`value` as a Python scalar of the dtype's kind."""
    if dt.is_bool(dtype):
        return bool(value)
    return float(value) if dt.is_float(dtype) else int(value)


# -- constant_of_shape --------------------------------------------------------------------------
@op("constant_of_shape", pattern=INJECTIVE, attr_defaults={"value": 0.0, "dtype": "float32"})
class constant_of_shape:
    """A tensor of `shape` filled with `value`."""

    def infer(shape: Sequence[int], value: float = 0.0, dtype: str = "float32") -> TensorType:
        shape = check_int_tuple(shape, "constant_of_shape", "shape")
        if any(d < 0 for d in shape):
            raise OpError(f"constant_of_shape: shape {shape} has a negative dimension")
        return TensorType(shape, dt.check(dtype))

    def compute(shape: Sequence[int], value: float = 0.0, dtype: str = "float32") -> te.Tensor:
        fill = te.const(_scalar(value, dtype), dtype)
        return te.compute(tuple(shape), lambda *i: fill, name="constant_of_shape", tag="constant_of_shape")

    def reference(shape: Sequence[int], value: float = 0.0, dtype: str = "float32") -> np.ndarray:
        return np.full(tuple(shape), _scalar(value, dtype), dtype=dtype)


# -- range --------------------------------------------------------------------------------------
def range_length(start, limit, delta) -> int:
    """ONNX Range's element count: max(ceil((limit - start) / delta), 0)."""
    if delta == 0:
        raise OpError("range: delta must not be 0")
    if all(isinstance(v, (int, np.integer)) for v in (start, limit, delta)):
        return max(-((int(start) - int(limit)) // int(delta)), 0)
    return max(int(math.ceil((float(limit) - float(start)) / float(delta))), 0)


@op("range", pattern=INJECTIVE)
class range_:
    """start, start + delta, ... up to (not including) limit."""

    def infer(start, limit, delta, dtype: str) -> TensorType:
        return TensorType((range_length(start, limit, delta),), dt.check(dtype))

    def compute(start, limit, delta, dtype: str) -> te.Tensor:
        n = range_length(start, limit, delta)
        first, step = te.const(_scalar(start, dtype), dtype), te.const(_scalar(delta, dtype), dtype)
        return te.compute((n,), lambda i: first + i.astype(dtype) * step, name="range", tag="range")

    def reference(start, limit, delta, dtype: str) -> np.ndarray:
        n = range_length(start, limit, delta)
        kind = np.float64 if dt.is_float(dtype) else np.int64
        values = kind(_scalar(start, dtype)) + np.arange(n, dtype=kind) * kind(_scalar(delta, dtype))
        return values.astype(dtype)


# -- eye_like -----------------------------------------------------------------------------------
@op("eye_like", pattern=INJECTIVE, attr_defaults={"k": 0, "dtype": None})
class eye_like:
    """Ones on the k-th diagonal of a 2-D tensor shaped like `x` (dtype: `dtype` or x's)."""

    def infer(x: TensorType, k: int = 0, dtype: str | None = None) -> TensorType:
        if len(x.shape) != 2:
            raise OpError(f"eye_like: input must be 2-D, got shape {tuple(x.shape)}")
        return TensorType(tuple(x.shape), dt.check(dtype or x.dtype))

    def compute(x: te.Tensor, k: int = 0, dtype: str | None = None) -> te.Tensor:
        dtype = dtype or x.dtype
        one, zero = te.const(_scalar(1, dtype), dtype), te.const(_scalar(0, dtype), dtype)
        return te.compute(const_shape(x), lambda i, j: te.if_then_else(j - i == k, one, zero),
                          name="eye_like", tag="eye_like")

    def reference(x: np.ndarray, k: int = 0, dtype: str | None = None) -> np.ndarray:
        return np.eye(x.shape[0], x.shape[1], k=k, dtype=dtype or x.dtype)


# -- trilu --------------------------------------------------------------------------------------
@op("trilu", pattern=INJECTIVE, attr_defaults={"k": 0, "upper": 1})
class trilu:
    """Keep the upper (j - i >= k) or lower (j - i <= k) triangle of the last two axes; zero the rest."""

    def infer(x: TensorType, k: int = 0, upper: int = 1) -> TensorType:
        if len(x.shape) < 2:
            raise OpError(f"trilu: input must have rank >= 2, got shape {tuple(x.shape)}")
        return TensorType(tuple(x.shape), x.dtype)

    def compute(x: te.Tensor, k: int = 0, upper: int = 1) -> te.Tensor:
        zero = te.const(_scalar(0, x.dtype), x.dtype)

        def f(*idx):
            i, j = idx[-2], idx[-1]
            keep = (j - i >= k) if upper else (j - i <= k)
            return te.if_then_else(keep, x[idx], zero)

        return te.compute(const_shape(x), f, name="trilu", tag="trilu")

    def reference(x: np.ndarray, k: int = 0, upper: int = 1) -> np.ndarray:
        return np.triu(x, k) if upper else np.tril(x, k)


# -- one_hot ------------------------------------------------------------------------------------
def one_hot_shape(shape: tuple, depth: int, axis: int) -> tuple[int, tuple]:
    rank = len(shape)
    if not -rank - 1 <= axis <= rank:
        raise OpError(f"one_hot: axis {axis} is out of range for indices of rank {rank}")
    if int(depth) < 1:
        raise OpError(f"one_hot: depth must be >= 1, got {depth}")
    axis = axis + rank + 1 if axis < 0 else axis
    return axis, tuple(shape[:axis]) + (int(depth),) + tuple(shape[axis:])


@op("one_hot", pattern=INJECTIVE, attr_defaults={"axis": -1, "on_value": 1.0, "off_value": 0.0,
                                                 "dtype": "float32"})
class one_hot:
    """out[.., d, ..] = on_value where the index (negative ones counted from depth) equals d, else
    off_value; indices outside [-depth, depth) give a row of off_value."""

    def infer(indices: TensorType, depth: int, axis: int = -1, on_value: float = 1.0,
              off_value: float = 0.0, dtype: str = "float32") -> TensorType:
        if indices.dtype == "bool":
            raise OpError("one_hot: indices must be numbers, got bool")
        _, shape = one_hot_shape(tuple(indices.shape), depth, axis)
        return TensorType(shape, dt.check(dtype))

    def compute(indices: te.Tensor, depth: int, axis: int = -1, on_value: float = 1.0,
                off_value: float = 0.0, dtype: str = "float32") -> te.Tensor:
        axis, shape = one_hot_shape(const_shape(indices), depth, axis)
        on, off = te.const(_scalar(on_value, dtype), dtype), te.const(_scalar(off_value, dtype), dtype)

        def f(*o):
            idx = indices[o[:axis] + o[axis + 1:]].astype("int64")
            idx = te.if_then_else(idx < 0, idx + int(depth), idx)
            return te.if_then_else(idx == o[axis].astype("int64"), on, off)

        return te.compute(shape, f, name="one_hot", tag="one_hot")

    def reference(indices: np.ndarray, depth: int, axis: int = -1, on_value: float = 1.0,
                  off_value: float = 0.0, dtype: str = "float32") -> np.ndarray:
        axis, shape = one_hot_shape(indices.shape, depth, axis)
        idx = np.asarray(indices).astype(np.int64)
        idx = np.where(idx < 0, idx + int(depth), idx)
        positions = np.arange(int(depth)).reshape((-1,) + (1,) * (indices.ndim - axis))
        hot = np.expand_dims(idx, axis) == positions
        return np.where(hot, _scalar(on_value, dtype), _scalar(off_value, dtype)).astype(dtype)
