"""Register-blocked CPU templates for matrix products: `matmul.cpu` (any float32 matmul, operands
as they come) and `matmul_packed.cpu` (the right operand packed into column panels at compile
time, see ops/nn_dense_packed.py).

Both compute the output in (mr x nr) tiles, the GEMM micro-kernel of testing/gemm.py: the tile
accumulates in a local buffer that the C compiler keeps in SIMD registers (mr rows unrolled, the
nr columns as nr / lanes vectors), with the k loop outside the tile.  The tile loops run panel
first (columns outer, rows inner), so one (K x nr) panel of the right operand stays in cache
while every row tile uses it.  An elementwise epilogue (bias, activation, residual add) is
applied to the tile as it leaves the registers; the accumulator is then the master stage itself,
attached inside the epilogue's tile loop.  Non-dividing tiles leave peeled tails.  The schedule
itself is the default point of the tunable GEMM in autotune/templates.py, which declares the knobs.
"""
from __future__ import annotations

from . import template
from .cpu import _const_extent, _shape, complex_out, reads_only_at

REGISTERS = {16: 32, 8: 16, 4: 16}     # SIMD lanes of float32 -> vector registers (AVX-512, AVX2, SSE)


def _ext(iv) -> int:
    return _const_extent(iv, 0)


def panel_width(m: int, n: int, lanes: int) -> int:
    """Columns per tile, 2 to 4 vectors: the width that wastes the fewest columns past n, ties
    going to 3, 2, then 4 vectors (with 3 x 8 or 2 x 12 accumulator tiles), or for fewer than 4 rows
    to 4, 3, then 2 vectors (a GEMV: more independent accumulators, longer contiguous reads)."""
    if n <= lanes:
        return lanes
    if m < 4:
        choices = (4, 3, 2)
    else:
        choices = (3, 2, 4) if lanes >= 16 else (2, 3)
    return min((v * lanes for v in choices), key=lambda nr: (-(-n // nr) * nr - n, choices.index(nr // lanes)))


def row_tile(m: int, nr: int, lanes: int) -> int:
    """Rows per tile: as many as the accumulators' register budget allows (three quarters of the
    vector registers), evened out so that the row tiles have similar sizes."""
    budget = (REGISTERS.get(lanes, 16) * 3) // 4
    mr_max = max(1, budget // max(1, nr // lanes))
    tiles = -(-m // mr_max)
    return max(1, -(-m // tiles))


def _main_stage(s, master_outs):
    """The reduction stage of the master op (its output, or the stage before a dtype cast)."""
    t = master_outs[0]
    while not t.op.reduce_axis:
        ins = t.op.input_tensors()
        if len(ins) != 1:
            return None
        t = ins[0]
    return t


def _elementwise_reader(s, out, main) -> bool:
    """Whether `out` reads `main` only at its own index (so it can take the tile from registers);
    `main` may be wider than `out` (whole panels)."""
    own = tuple(iv.var for iv in s[out].op.axis)
    return _shape(out)[:-1] == _shape(main)[:-1] and reads_only_at(s, out, main, own)


def _blockable(main, target) -> bool:
    return (main is not None and main.dtype == "float32" and len(main.op.axis) >= 2
            and len(main.op.reduce_axis) == 1 and all(_ext(iv) > 0 for iv in main.op.axis))


@template("matmul.cpu")
def matmul(s, master_outs, outs, target, cfg=None) -> None:
    """Register tiles for float32 matmuls with an output of rank >= 2 (its last two axes); others
    (other dtypes, vector results, float16's cast stage) get the generic complex template."""
    main = _main_stage(s, master_outs)
    if main is None or main is not master_outs[0] or not _blockable(main, target):
        return complex_out(s, master_outs, outs, target, cfg)
    _default_gemm(s, main, outs, target, packable=True)


@template("matmul_packed.cpu")
def matmul_packed(s, master_outs, outs, target, cfg=None) -> None:
    """The main stage covers whole panels; the stage keeping the first N columns (if any) is
    inlined into the epilogue, or is itself the output the tiles are written to."""
    main = _main_stage(s, master_outs)
    if main is None or not _blockable(main, target):
        return complex_out(s, master_outs, outs, target, cfg)
    cols = master_outs[0]
    if cols is not main and cols not in outs:
        s[cols].compute_inline()
    _default_gemm(s, main, outs, target, packed_nr=main.op.attrs.get("nr"))


def _default_gemm(s, main, outs, target, **options) -> None:
    """The register-tiled GEMM at its heuristic default: the default point of the tunable GEMM
    in autotune/templates.py (one definition declares the knobs and serves both uses)."""
    from ...autotune.space import as_config
    from ...autotune.templates import schedule_gemm_tunable
    schedule_gemm_tunable(s, main, outs, target, as_config(None), **options)
