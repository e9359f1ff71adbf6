"""Products of two quantized activations on the int8 dot-product units (VNNI): attention's
Q K^T and P V, whose right operand is only known at run time.

    pack_act_vnni(b)[.., p, g, l, c] = b[.., 4g + c, L p + l] - shift        (zero past K and N)
    matmul_act_vnni(a, bp)[.., i, j] = sum_k (a[.., i, k] - za) * (b[.., k, j] - zb)

`vpdpbusd` multiplies unsigned by signed bytes, and both activations are usually uint8.  The
packing moves b to int8 on the way (shift 128 for uint8 b, 0 for int8 b), into the operand
layout of `ops/schedules/cpu_matmul_int8.pack_b_vnni` (column panels of L lanes, groups of 4
consecutive k per lane).  The zero points and the shift come back as rank-1 terms:

    sum_k (a - za)(b - zb) = sum_k a bs  +  (shift - zb) rowsum(a)[i]  -  za colsum(bs)[j]
                             -  za shift K  +  K za zb                     (bs = b - shift)

all in int32 and exact (|sum| < 2^31 for K < 2^15).  The sums over the padded depth see zero
bytes only.  Stages of matmul_act_vnni: "A_pad" (a with rows padded to a multiple of 4 once
M >= 8, and k to the packed depth; absent when nothing is padded), "acc" (the int32 products
over the padded shape), "rowsum", "ones" (a row of ones) and "colsum" (the ones times the
packed b: the column sums on the unit), and the main stage "matmul_act_vnni" (the
corrections added); a is uint8 and the batch axes of a and bp are equal.  The CPU template is
`matmul_integer_vnni.cpu`'s blocked GEMM, one batch at a time.
"""
from __future__ import annotations

import numpy as np

from .. import te
from ..ir.expr import const
from .common import const_shape, round_up
from .quant_integer_vnni import padded_rows
from .registry import COMPLEX, INJECTIVE, OpError, TensorType, op


def act_packed_shape(shape: tuple, lanes: int) -> tuple:
    """The packed shape of a (.., K, N) operand: (.., N/L, Kp/4, L, 4), K rounded up to 4."""
    *batch, k, n = shape
    return (*batch, round_up(n, lanes) // lanes, round_up(k, 4) // 4, lanes, 4)


@op("pack_act_vnni", INJECTIVE)
class pack_act_vnni:
    """b (.., K, N) 8-bit -> (.., N/L, Kp/4, L, 4) int8 holding b - shift, zeros past K and N."""

    @staticmethod
    def infer(b: TensorType, lanes: int, shift: int) -> TensorType:
        if b is None or b.dtype not in ("uint8", "int8") or len(b.shape) < 2:
            raise OpError(f"pack_act_vnni: expects an 8-bit operand of rank 2 or more, got "
                          f"{None if b is None else (tuple(b.shape), b.dtype)}")
        if int(shift) != (128 if b.dtype == "uint8" else 0):
            raise OpError(f"pack_act_vnni: a {b.dtype} operand needs shift {128 if b.dtype == 'uint8' else 0} "
                          f"to become int8, got {shift}")
        return TensorType(act_packed_shape(tuple(b.shape), int(lanes)), "int8")

    @staticmethod
    def compute(b: te.Tensor, lanes: int, shift: int) -> te.Tensor:
        *batch, k, n = const_shape(b)
        lanes, shift = int(lanes), int(shift)

        def element(*ix):
            *bx, p, g, l, c = ix
            kk, nn = g * 4 + c, p * lanes + l
            value = (b[(*bx, kk, nn)].astype("int32") - shift).astype("int8")
            return te.if_then_else((kk < k) & (nn < n), value, const(0, "int8"))

        return te.compute(act_packed_shape((*batch, k, n), lanes), element, name="pack_act_vnni")

    @staticmethod
    def reference(b: np.ndarray, lanes: int, shift: int) -> np.ndarray:
        *batch, k, n = b.shape
        out_shape = act_packed_shape(b.shape, int(lanes))
        kp, np_ = out_shape[-3] * 4, out_shape[-4] * int(lanes)
        padded = np.zeros((*batch, kp, np_), np.int32)
        padded[..., :k, :n] = b.astype(np.int32) - int(shift)
        blocks = padded.reshape(*batch, kp // 4, 4, np_ // int(lanes), int(lanes))
        order = tuple(range(len(batch))) + tuple(len(batch) + d for d in (2, 0, 3, 1))
        return np.ascontiguousarray(blocks.transpose(order)).astype(np.int8)


@op("matmul_act_vnni", COMPLEX, schedule={"cpu": "matmul_integer_vnni.cpu"})
class matmul_act_vnni:
    """sum_k (a - za)(b - zb) with b given packed (pack_act_vnni, shift) and K = a's depth."""

    @staticmethod
    def infer(a: TensorType, bp: TensorType, units: int, za: int, zb: int, shift: int) -> TensorType:
        if a is None or bp is None or a.dtype != "uint8" or bp.dtype != "int8":
            raise OpError("matmul_act_vnni: expects a uint8 a and an int8 packed b")
        if len(a.shape) < 2 or len(bp.shape) != len(a.shape) + 2 or bp.shape[-1] != 4:
            raise OpError(f"matmul_act_vnni: a (.., M, K) and b packed (.., N/L, Kp/4, L, 4) of the same batch "
                          f"axes, got shapes {tuple(a.shape)} and {tuple(bp.shape)}")
        *batch, m, k = a.shape
        *bbatch, panels, groups, lanes, _ = bp.shape
        if tuple(batch) != tuple(bbatch) or k > groups * 4 or not (panels - 1) * lanes < int(units) <= panels * lanes:
            raise OpError(f"matmul_act_vnni: a {tuple(a.shape)} or units={units} do not fit the packed b "
                          f"{tuple(bp.shape)}")
        return TensorType((*batch, m, int(units)), "int32")

    @staticmethod
    def compute(a: te.Tensor, bp: te.Tensor, units: int, za: int, zb: int, shift: int) -> te.Tensor:
        *batch, m, k = const_shape(a)
        *_, panels, groups, lanes, _ = const_shape(bp)
        kp, mp, units = groups * 4, padded_rows(m), int(units)
        za, zb, shift = int(za), int(zb), int(shift)
        if (mp, kp) != (m, k):
            src = te.compute((*batch, mp, kp), lambda *ix: te.if_then_else(
                (ix[-2] < m) & (ix[-1] < k), a[ix], const(0, "uint8")), name="A_pad")
        else:
            src = a
        r = te.reduce_axis((0, kp), name="k")
        acc = te.compute((*batch, mp, panels * lanes), lambda *ix: te.sum(
            src[(*ix[:-1], r)].astype("int32")
            * bp[(*ix[:-2], ix[-1] // lanes, r // 4, ix[-1] % lanes, r % 4)].astype("int32"), axis=r), name="acc")
        rk = te.reduce_axis((0, k), name="rk")
        rowsum = te.compute((*batch, m), lambda *ix: te.sum(a[(*ix, rk)].astype("int32"), axis=rk), name="rowsum")
        # the column sums are one more row of products, with a row of ones: the unit computes
        # them from the packed operand (4 bytes per lane), at 1/M of the product's cost
        ones = te.compute((1, kp), lambda i, kk: const(1, "uint8"), name="ones")
        rc = te.reduce_axis((0, kp), name="rc")
        colsum = te.compute((*batch, 1, panels * lanes), lambda *ix: te.sum(
            ones[ix[-2], rc].astype("int32")
            * bp[(*ix[:-2], ix[-1] // lanes, rc // 4, ix[-1] % lanes, rc % 4)].astype("int32"), axis=rc),
            name="colsum")
        row_coef, fixed = shift - zb, k * za * (zb - shift)
        return te.compute((*batch, m, units), lambda *ix: acc[ix] + rowsum[ix[:-1]] * const(row_coef, "int32")
                          - colsum[(*ix[:-2], 0, ix[-1])] * const(za, "int32") + const(fixed, "int32"),
                          name="matmul_act_vnni", tag="matmul_act_vnni")

    @staticmethod
    def reference(a: np.ndarray, bp: np.ndarray, units: int, za: int, zb: int, shift: int) -> np.ndarray:
        *batch, m, k = a.shape
        nb = len(batch)
        b = bp.astype(np.int64).transpose(tuple(range(nb)) + tuple(nb + d for d in (1, 3, 0, 2)))
        b = b.reshape(*batch, bp.shape[-3] * 4, bp.shape[-4] * bp.shape[-2])[..., :k, :int(units)] + int(shift)
        return np.matmul(a.astype(np.int64) - int(za), b - int(zb)).astype(np.int32)
