"""matmul in bfloat16 with float32 accumulation, the right operand packed for `vdpbf16ps`.

    matmul_bf16(x, wp)[i, j] = sum_k f32(bf16(x[i, k])) * f32(w[k, j])

x is (M, K) float32, rounded to bfloat16 on the way in (stage "A_pad": rows padded to a
multiple of 4 once M >= 8, k to wp's depth); wp is the (K, N) weight rounded to bfloat16 and
packed by `pack_b_bf16` (ops/x86_bf16.py); the result is float32 (M, units).  The products of
two bfloat16 values are exact in float32, so the only roundings are the operands' and the
float32 sum's.  `graph/passes/lower_precision` introduces the op for precision="bf16" on CPUs
with AVX-512 BF16; its template `matmul_bf16.cpu` tensorizes "acc" with the block intrinsic.
Pattern complex-out-fusable.
"""
from __future__ import annotations

import numpy as np

from .. import te
from ..ir.expr import const
from .common import const_shape
from .quant_integer_vnni import padded_rows
from .registry import COMPLEX, OpError, TensorType, op
from .x86_bf16 import unpack_b_bf16


@op("matmul_bf16", COMPLEX, schedule={"cpu": "matmul_bf16.cpu"})
class matmul_bf16:
    @staticmethod
    def infer(x: TensorType, wp: TensorType, units: int) -> TensorType:
        if x is None or wp is None:
            raise OpError("matmul_bf16: needs x and the packed weight")
        if x.dtype != "float32" or wp.dtype != "bfloat16":
            raise OpError(f"matmul_bf16: expects float32 x and a bfloat16 packed weight, got {x.dtype} and {wp.dtype}")
        if len(x.shape) != 2 or len(wp.shape) != 4 or wp.shape[3] != 2:
            raise OpError(f"matmul_bf16: x must be 2-D and the weight packed (N/16, Kp/2, 16, 2), got shapes "
                          f"{tuple(x.shape)} and {tuple(wp.shape)}")
        panels, groups, lanes, _ = wp.shape
        if x.shape[1] > groups * 2 or not (panels - 1) * lanes < int(units) <= panels * lanes:
            raise OpError(f"matmul_bf16: x {tuple(x.shape)} or units={units} do not fit the packed weight "
                          f"{tuple(wp.shape)}")
        return TensorType((x.shape[0], int(units)), "float32")

    @staticmethod
    def compute(x: te.Tensor, wp: te.Tensor, units: int) -> te.Tensor:
        m, k = const_shape(x)
        panels, groups, lanes, _ = const_shape(wp)
        kp, mp = groups * 2, padded_rows(m)
        src = te.compute((mp, kp), lambda i, kk: te.if_then_else((i < m) & (kk < k), x[i, kk].astype("bfloat16"),
                                                                 const(0.0, "bfloat16")), name="A_pad")
        r = te.reduce_axis((0, kp), name="k")
        acc = te.compute((mp, panels * lanes), lambda i, j: te.sum(
            src[i, r].astype("float32") * wp[j // lanes, r // 2, j % lanes, r % 2].astype("float32"), axis=r),
            name="acc")
        return te.compute((m, int(units)), lambda i, j: acc[i, j], name="matmul_bf16", tag="matmul_bf16")

    @staticmethod
    def reference(x: np.ndarray, wp: np.ndarray, units: int) -> np.ndarray:
        from ..ir.dtype import to_numpy
        w = unpack_b_bf16(wp)[:x.shape[1], :int(units)].astype(np.float32)
        return x.astype(to_numpy("bfloat16")).astype(np.float32) @ w
