"""matmul_integer with the right operand packed for the int8 dot-product units (VNNI, AMX).

    matmul_integer_vnni(a, bp, corr)[i, j] = sum_k int32(a[i, k]) * int32(b[k, j]) - corr[j]

a is (M, K) uint8; bp is b (K, N) int8 packed by `pack_b_vnni` (ops/schedules/cpu_matmul_int8.py:
column panels of L lanes holding groups of 4 consecutive k, zero-padded in k and n); corr is
int32 (N,).  With a's zero point za and b's zero point 0 (symmetric weights, what quantization
tools write), matmul_integer(a, b, za, 0)[i, j] = sum_k a b - za * sum_k b[k, j]: corr is the
second term, computed once at compile time.  The graph pass `alter_layout_int8` introduces the
op; its CPU template `matmul_integer_vnni.cpu` tensorizes the sum on the unit and applies the
requantizing epilogue to each register tile.

Stages: "A_pad" (a with rows padded to a multiple of 4 once M >= 8, and k to bp's depth; absent
when nothing is padded), "acc" (the int32 sum over the padded shape), and the main stage
"matmul_integer_vnni" (M x N, the correction subtracted).  Pattern complex-out-fusable.
"""
from __future__ import annotations

import numpy as np

from .. import te
from ..ir.expr import const
from .common import const_shape
from .registry import COMPLEX, OpError, TensorType, op


def padded_rows(m: int) -> int:
    """Rows of the accumulator: m itself below 8 (one row tile), else a multiple of 4."""
    return m if m < 8 else -(-m // 4) * 4


def unpack_b(bp: np.ndarray) -> np.ndarray:
    """(N/L, Kp/4, L, 4) -> (Kp, N/L * L): the inverse of pack_b_vnni before the padding is cut."""
    panels, groups, lanes, _ = bp.shape
    return bp.transpose(1, 3, 0, 2).reshape(groups * 4, panels * lanes)


@op("matmul_integer_vnni", COMPLEX, schedule={"cpu": "matmul_integer_vnni.cpu"})
class matmul_integer_vnni:
    @staticmethod
    def infer(a: TensorType, bp: TensorType, corr: TensorType, units: int) -> TensorType:
        if a is None or bp is None or corr is None:
            raise OpError("matmul_integer_vnni: needs a, the packed b and the correction")
        if a.dtype != "uint8" or bp.dtype != "int8" or corr.dtype != "int32":
            raise OpError(f"matmul_integer_vnni: expects uint8 a, int8 packed b and int32 correction, got "
                          f"{a.dtype}, {bp.dtype} and {corr.dtype}")
        if len(a.shape) != 2 or len(bp.shape) != 4 or bp.shape[3] != 4:
            raise OpError(f"matmul_integer_vnni: a must be 2-D and b packed (N/L, Kp/4, L, 4), got shapes "
                          f"{tuple(a.shape)} and {tuple(bp.shape)}")
        panels, groups, lanes, _ = bp.shape
        if a.shape[1] > groups * 4 or not (panels - 1) * lanes < int(units) <= panels * lanes:
            raise OpError(f"matmul_integer_vnni: a {tuple(a.shape)} or units={units} do not fit the packed "
                          f"b {tuple(bp.shape)}")
        if tuple(corr.shape) != (int(units),):
            raise OpError(f"matmul_integer_vnni: the correction must have shape ({units},), got {tuple(corr.shape)}")
        return TensorType((a.shape[0], int(units)), "int32")

    @staticmethod
    def compute(a: te.Tensor, bp: te.Tensor, corr: te.Tensor, units: int) -> te.Tensor:
        m, k = const_shape(a)
        panels, groups, lanes, _ = const_shape(bp)
        kp, mp = groups * 4, padded_rows(m)
        if (mp, kp) != (m, k):
            src = te.compute((mp, kp), lambda i, kk: te.if_then_else((i < m) & (kk < k), a[i, kk],
                                                                     const(0, "uint8")), name="A_pad")
        else:
            src = a
        r = te.reduce_axis((0, kp), name="k")
        acc = te.compute((mp, panels * lanes), lambda i, j: te.sum(
            src[i, r].astype("int32") * bp[j // lanes, r // 4, j % lanes, r % 4].astype("int32"), axis=r),
            name="acc")
        return te.compute((m, int(units)), lambda i, j: acc[i, j] - corr[j], name="matmul_integer_vnni",
                          tag="matmul_integer_vnni")

    @staticmethod
    def reference(a: np.ndarray, bp: np.ndarray, corr: np.ndarray, units: int) -> np.ndarray:
        b = unpack_b(bp)[:a.shape[1], :int(units)]
        return (a.astype(np.int64) @ b.astype(np.int64) - corr.astype(np.int64)).astype(np.int32)
