"""det: the determinant of each square matrix in the last two axes (ONNX Det).

OPAQUE: a pivoted LU factorization does not fit a tensor expression, so the executor runs the
NumPy kernel of runtime/host_kernels.py, which is also the reference.  (..., M, M) -> (...).
"""
from __future__ import annotations

import numpy as np

from ..runtime import host_kernels
from .registry import OPAQUE, OpError, TensorType, op

_FLOATS = ("float16", "bfloat16", "float32", "float64")


def _check(shape: tuple, dtype: str) -> None:
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise OpError(f"det: input has shape {tuple(shape)}; it must be (..., M, M), square in the last two axes")
    if dtype not in _FLOATS:
        raise OpError(f"det: input has dtype {dtype}; it must be floating point")


@op("det", pattern=OPAQUE)
class det:
    def infer(x: TensorType) -> TensorType:
        _check(tuple(x.shape), x.dtype)
        return TensorType(tuple(x.shape[:-2]), x.dtype)

    def split_axes(rank: int) -> tuple:
        return tuple(range(rank - 2))     # each matrix of the batch on its own

    def reference(x: np.ndarray) -> np.ndarray:
        _check(x.shape, x.dtype.name)
        return host_kernels.det(x)
