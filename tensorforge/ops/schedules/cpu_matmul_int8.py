"""`matmul_int8.cpu`: u8 x s8 -> s32 matrix products on the CPU's int8 dot-product units
(AVX-512 VNNI, AVX-VNNI or AMX), by tensorization.

The right operand is packed once (weights: at compile time) by `pack_b_vnni` into column panels
of L lanes holding groups of 4 consecutive k per lane, padded with zeros to whole panels and to a
multiple of 64 in k; that is the operand layout of `vpdpbusd` and of an AMX B tile
(ops/x86_intrin.py).  The computation

    acc[i, j] = sum_k int32(A[i, k]) * int32(Bp[j // L, k // 4, j % L, k % 4])   (padded shape)
    C[i, j]   = acc[i, j]                                                         (M x N)

is scheduled as the register-blocked GEMM: C in (mr x nv*L) tiles, panel loop outside the row
loop so that one (K x nv*L) panel of Bp stays in cache; the tile's accumulator `acc` is a local
buffer attached at the row loop whose (mr x nv*L x kb) loops are tensorized with the block
intrinsic (`kb` < K splits the reduction: reset once, then update per kb step).  `C` copies
the tile out (the place for a requantizing epilogue).  A is copied into a zero-padded buffer
only when M or K does not fill whole tiles, so any shape works.

Knobs: `unit` (the int8 units this CPU has), `mr` (rows per tile; AMX: 16), `nv` (vectors or
tiles per row), `kb` (the k step of one intrinsic call), `order` (panels or rows outermost).
"""
from __future__ import annotations

import numpy as np

from ...ir.expr import const
from ...te.math import if_then_else
from ...te.schedule import create_schedule
from ...te.space import as_config
from ...te.tensor import compute, placeholder, reduce_axis
from ...te.tensor import sum as te_sum
from .. import x86_intrin as X
from ..common import round_up
from . import workload_template

K_ALIGN = 64           # k is padded to this for AMX (the tile depth)
VNNI_K_ALIGN = 4       # ... and for vpdpbusd, whose lanes hold groups of 4 k (more would copy A to pad it)


def k_align(unit: str | None) -> int:
    """The multiple of k that `unit`'s packing pads to."""
    return K_ALIGN if unit in (None, "amx") else VNNI_K_ALIGN


def packed_shape(n: int, k: int, lanes: int, align: int = K_ALIGN) -> tuple:
    return (round_up(n, lanes) // lanes, round_up(k, align) // 4, lanes, 4)


def pack_b_vnni(b: np.ndarray, lanes: int, align: int = K_ALIGN) -> np.ndarray:
    """(K x N) int8 -> (N/L, Kp/4, L, 4): lane l of group g holds b[4g:4g+4, panel*L + l]; Kp is
    K rounded up to `align` (k_align(unit): 64 for AMX tiles, 4 for VNNI)."""
    k, n = b.shape
    kp, np_ = round_up(k, align), round_up(n, lanes)
    padded = np.zeros((kp, np_), np.int8)
    padded[:k, :n] = b
    return np.ascontiguousarray(padded.reshape(kp // 4, 4, np_ // lanes, lanes).transpose(2, 0, 3, 1))


def reference(a: np.ndarray, bp: np.ndarray, n: int, **_attrs) -> np.ndarray:
    """NumPy: unpack Bp and multiply in int32 (wrapping like the hardware)."""
    panels, groups, lanes, _ = bp.shape
    b = bp.transpose(1, 3, 0, 2).reshape(groups * 4, panels * lanes)
    k = a.shape[1]
    return (a.astype(np.int64) @ b[:k, :n].astype(np.int64)).astype(np.int32)


def available_units() -> list[str]:
    """The int8 units of this CPU, best first."""
    have = X.host_features()
    return [u for u in ("amx", "avx512vnni", "avxvnni") if set(X._REQUIRES[u]) <= have]


def _kb_choices(kp: int, unit: str) -> list[int]:
    step = 64 if unit == "amx" else 4
    out = [kb for kb in (kp, 1024, 512, 256, 128, 64) if kb <= kp and kp % kb == 0 and kb % step == 0]
    return sorted(set(out), reverse=True)


@workload_template("matmul_int8.cpu", reference=reference)
def matmul_int8(cfg, target, a, bp, n: int, unit: str | None = None):
    """Schedule (A: M x K uint8) x (Bp: packed int8) -> (C: M x n int32) on the best int8 unit,
    or on `unit` when given.  Returns (schedule, [C])."""
    cfg = as_config(cfg)
    m, k = (int(x.value) for x in a.shape)
    panels, groups, lanes, _ = (int(x.value) for x in bp.shape)
    kp = groups * 4
    units = [unit] if unit else [u for u in available_units() if X.LANES[u] == lanes]
    if not units:
        raise RuntimeError(f"matmul_int8.cpu needs an int8 dot-product unit with {lanes} lanes (AVX-512 "
                           "VNNI or AMX: 16, AVX-VNNI: 8); this CPU has none")
    cfg.define_knob("unit", units, default=units[0])
    unit = cfg["unit"].val
    if X.LANES[unit] != lanes:
        raise ValueError(f"matmul_int8.cpu: Bp is packed for {lanes} lanes but unit {unit} has "
                         f"{X.LANES[unit]}; pack with pack_b_vnni(b, {X.LANES[unit]})")
    amx = unit == "amx"
    cfg.define_knob("mr", [16] if amx else [1, 2, 3, 4, 5, 6, 7, 8], default=16 if amx else min(4, max(1, m)))
    max_nv = min(4, panels)
    cfg.define_knob("nv", list(range(1, max_nv + 1)), default=min(max_nv, 2 if amx else 4))
    kbs = _kb_choices(kp, unit)
    cfg.define_knob("kb", kbs, default=kbs[0])
    cfg.define_knob("order", ["panels", "rows"], default="panels")
    mr, nv, kb = cfg["mr"].val, cfg["nv"].val, cfg["kb"].val
    if panels % nv:
        nv = 1                      # a panel count nv does not divide: one panel per tile
    mp = round_up(m, mr)
    if mp != m or kp != k:
        src = compute((mp, kp), lambda i, kk: if_then_else((i < m) & (kk < k), a[i, kk], const(0, "uint8")),
                      name="A_pad")
    else:
        src = a
    r = reduce_axis((0, kp), name="k")
    acc = compute((mp, panels * lanes), lambda i, j: te_sum(
        src[i, r].astype("int32") * bp[j // lanes, r // 4, j % lanes, r % 4].astype("int32"), axis=r),
        name="acc")
    c = compute((m, n), lambda i, j: acc[i, j], name="C")
    s = create_schedule(c.op)
    if src is not a:
        s[src].compute_root()
    i, j = s[c].op.axis
    io, ii = s[c].split(i, factor=mr)
    jo, ji = s[c].split(j, factor=nv * lanes)
    first, second = (jo, io) if cfg["order"].val == "panels" else (io, jo)
    s[c].reorder(first, second, ii, ji)
    if n % (nv * lanes) == 0:
        s[c].vectorize(ji)
    s[acc].set_scope("local")
    s[acc].compute_at(s[c], second)
    ai, aj = s[acc].op.axis
    (ak,) = s[acc].op.reduce_axis
    if kb < kp:
        ako, aki = s[acc].split(ak, factor=kb)
        s[acc].reorder(ako, ai, aj, aki)
    s[acc].tensorize(ai, X.block_intrin(unit, mr, nv, kb))
    if target.num_cores > 1:
        s[c].parallel(first)
    return s, [c]


def matmul_int8_workload(m: int, n: int, k: int, target, cfg=None, unit: str | None = None):
    """Placeholders for an (m x k) x (k x n) int8 product with Bp packed for the CPU's unit, and
    the scheduled computation: (schedule, [A, Bp, C])."""
    unit = unit or X.int8_unit()
    lanes = X.LANES.get(unit or "", 16)
    a = placeholder((m, k), "uint8", name="A")
    bp = placeholder(packed_shape(n, k, lanes), "int8", name="Bp")
    s, (c,) = matmul_int8(cfg, target, a, bp, n=n, unit=unit)
    return s, [a, bp, c]
