"""matmul with a constant right operand packed into column panels (the GEMM micro-kernel layout).

    matmul_packed(x, wp)[..., i, j] = sum_k x[..., i, k_offset + k] * wp[j // nr, k, j % nr]   (k < K)

x is (..., M, K); wp is (P, K, nr): the (K, N) weight cut into P = ceil(N / nr) panels of nr
columns, each panel contiguous in k and zero-padded past column N.  `units` (N) is an attribute,
since the padding hides it.  With `k_offset` the product is a partial one over x[..., k_offset:
k_offset + K] of a longer x: one chunk of a reduction that `alter_layout_matmul` cut because the
weight's panels outgrew the L2 cache (absent, x's last axis is K).  The CPU template
`matmul_packed.cpu` accumulates an (mr x nr) tile of the output in registers and streams one
panel with unit stride.  The graph pass `alter_layout_matmul` introduces the op for float32
matmuls whose right operand is a constant, packing the weight at compile time.  Pattern
complex-out-fusable; the main stage, named and tagged "matmul_packed", covers whole panels
(P * nr columns); when N < P * nr a stage "matmul_packed_cols" keeps the first N.
"""
from __future__ import annotations

import numpy as np

from .. import te
from .common import const_shape
from .registry import COMPLEX, OpError, TensorType, op


def pack_columns(w: np.ndarray, nr: int) -> np.ndarray:
    """(K, N) -> (ceil(N / nr), K, nr), zero-padded past column N."""
    k, n = w.shape
    panels, full = -(-n // nr), n // nr
    # one pass over the weight, no padded copy of it (VGG's 25088 x 4096 took 1.5 s with one)
    out = np.empty((panels, k, nr), dtype=w.dtype)
    out[:full] = w[:, :full * nr].reshape(k, full, nr).transpose(1, 0, 2)
    if full < panels:
        out[full] = 0
        out[full, :, :n - full * nr] = w[:, full * nr:]
    return out


def unpack_columns(wp: np.ndarray, units: int) -> np.ndarray:
    """The inverse of `pack_columns`: (P, K, nr) -> (K, units)."""
    p, k, nr = wp.shape
    return np.ascontiguousarray(wp.transpose(1, 0, 2).reshape(k, p * nr)[:, :units])


@op("matmul_packed", COMPLEX, schedule={"cpu": "matmul_packed.cpu"})
class matmul_packed:
    @staticmethod
    def infer(x: TensorType, wp: TensorType, units: int, k_offset: int | None = None) -> TensorType:
        if x is None or wp is None:
            raise OpError("matmul_packed: needs x and the packed weight")
        if x.dtype != wp.dtype:
            raise OpError(f"matmul_packed: operand dtypes differ ({x.dtype} and {wp.dtype})")
        if len(x.shape) < 2 or len(wp.shape) != 3:
            raise OpError(f"matmul_packed: x must have rank >= 2 and the packed weight rank 3, got shapes "
                          f"{tuple(x.shape)} and {tuple(wp.shape)}")
        panels, k, nr = wp.shape
        if k_offset is None and x.shape[-1] != k:
            raise OpError(f"matmul_packed: x {tuple(x.shape)} and packed weight {tuple(wp.shape)} disagree on "
                          f"the reduced axis ({x.shape[-1]} vs {k})")
        if k_offset is not None and not 0 <= int(k_offset) <= x.shape[-1] - k:
            raise OpError(f"matmul_packed: a chunk of {k} at k_offset {k_offset} does not fit the reduced axis "
                          f"of x {tuple(x.shape)}")
        if not (panels - 1) * nr < int(units) <= panels * nr:
            raise OpError(f"matmul_packed: units={units} does not fit {panels} panels of {nr} columns")
        return TensorType(tuple(x.shape[:-1]) + (int(units),), x.dtype)

    @staticmethod
    def compute(x: te.Tensor, wp: te.Tensor, units: int, k_offset: int | None = None) -> te.Tensor:
        xshape = const_shape(x)
        panels, k, nr = const_shape(wp)
        rk = te.reduce_axis((0, k), name="k")
        lead = len(xshape) - 1

        def body(*idx):
            j = idx[lead]
            return te.sum(x[(*idx[:lead], rk + int(k_offset) if k_offset else rk)] * wp[j // nr, rk, j % nr], axis=rk)

        # the main stage covers whole panels, so a register tile never needs a column guard; the
        # output is its first `units` columns
        full = te.compute(tuple(xshape[:-1]) + (panels * nr,), body, name="matmul_packed", tag="matmul_packed",
                          attrs={"nr": nr})
        if panels * nr == int(units):
            return full
        return te.compute(tuple(xshape[:-1]) + (int(units),), lambda *i: full[i], name="matmul_packed_cols")

    @staticmethod
    def reference(x: np.ndarray, wp: np.ndarray, units: int, k_offset: int | None = None) -> np.ndarray:
        k0 = int(k_offset or 0)
        return np.matmul(x[..., k0:k0 + wp.shape[1]], unpack_columns(wp, int(units))).astype(x.dtype)
