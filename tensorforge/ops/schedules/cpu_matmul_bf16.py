"""`matmul_bf16.cpu`: the fused group of a bfloat16 matrix product with float32 accumulation
(ops/nn_dense_bf16.py) and its epilogue on AVX-512 BF16 or AMX: the blocked GEMM of
cpu_matmul_int8_group.py with the `vdpbf16ps` or `tdpbf16ps` block intrinsic (ops/x86_bf16.py).
Knobs: unit (AMX when the CPU has bf16 tiles and the rows come in 16s), mr (rows per tile), nv
(vectors or tiles per row), kb (the k step of one intrinsic call), order."""
from __future__ import annotations

from ...te.space import as_config
from .. import x86_bf16 as B
from . import template
from .common import const_shape
from .cpu_matmul_int8_group import _stage, schedule_block_gemm


@template("matmul_bf16.cpu", tunable=True)
def matmul_bf16(s, master_outs, outs, target, cfg=None) -> None:
    cfg = as_config(cfg)
    acc = _stage(master_outs[0], "acc")
    mp = const_shape(acc)[0]
    kp = int(acc.op.reduce_axis[0].dom.extent.value)
    units = (["amx"] if B.has_amx_bf16() and mp % 16 == 0 else []) + (["avx512bf16"] if B.has_bf16_unit() else [])
    if not units:
        raise RuntimeError("matmul_bf16.cpu needs AVX-512 BF16 (vdpbf16ps) or AMX bf16; this CPU has neither")
    cfg.define_knob("unit", units, default=units[0])
    unit = cfg["unit"].val
    kbs = sorted({kb for kb in (kp, 1024, 512, 256, 128, 64, 32) if kb <= kp and kp % kb == 0}, reverse=True)
    rows = [16] if unit == "amx" else [r for r in range(1, 9) if mp % r == 0]
    schedule_block_gemm(s, master_outs, outs, target, cfg, B.LANES, rows, 16 if unit == "amx" else None,
                        2 if unit == "amx" else 4, kbs, lambda mr, nv, kb: B.block_intrin(unit, mr, nv, kb))
