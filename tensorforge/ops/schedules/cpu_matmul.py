"""Register-blocked CPU templates for matrix products: `matmul.cpu` (any float32 matmul, operands
as they come) and `matmul_packed.cpu` (the right operand packed into column panels at compile
time, see ops/nn_dense_packed.py).

Both compute the output in (mr x nr) tiles, the GEMM micro-kernel of testing/gemm.py: the tile
accumulates in a local buffer that the C compiler keeps in SIMD registers (mr rows unrolled, the
nr columns as nr / lanes vectors), with the k loop outside the tile.  The tile loops run panel
first (columns outer, rows inner), so one (K x nr) panel of the right operand stays in cache
while every row tile uses it.  An elementwise epilogue (bias, activation, residual add) is
applied to the tile as it leaves the registers; the accumulator is then the master stage itself,
attached inside the epilogue's tile loop.  Non-dividing tiles leave peeled tails.

Both are tunable.  The default point of the space: the machine's micro-kernel (gemm_kernel.py:
the register model's shape, or the one `tensorforge calibrate` measured) when the output has at
least its rows and columns, else the heuristics `panel_width` and `row_tile`; the right operand's
panels packed when each serves two or more row tiles; no parallel region under
PARALLEL_MIN_MACS multiply-adds.  Knobs:
  tile_m  rows per register tile (mr), tails allowed;
  tile_n  (panels, vectors per tile, lanes per vector): nr = vectors * lanes columns per tile;
  tile_k  inner split of the reduction, unrolled when > 1;
  order   tile loops panel-first (a column panel of the right operand stays in cache) or rows-first;
  pack_b  (matmul.cpu only) copy the (K x nr) panel of the right operand into a contiguous
          buffer once per panel (`cache_read` attached at the panel loop);
  cache_block  (matmul_packed.cpu only, with 16 vector registers, where it was measured, and
          only where the reduction spans at least two L1-sized chunks: `cache_blocks`)
          "KCxMCxNC", BLIS's cache blocking, or "none": an (mc x nc) block of the output
          accumulates in a local buffer while the reduction runs in chunks of kc, so each
          (kc x nr) panel of the right operand stays in L1 for the block's row tiles and each
          (mc x kc) block of the left operand in L2 (1024x4096x1024 on AVX2: 79 -> 91 GFLOP/s).
A right operand packed at compile time is prefetched a panel ahead when a panel serves more than
one row tile (`Stage.prefetch`): the first row tile of each panel would otherwise wait on memory
for the panel while the other tiles only compute.
"""
from __future__ import annotations

from ...te.space import as_config
from ...te.tensor import PlaceholderOp
from . import gemm_kernel, template
from .common import const_extent, const_shape, divisor_at_most, reads_only_at, schedule_elementwise_stage
from .cpu import complex_out, to_blocks_transposed

REGISTERS = gemm_kernel.REGISTERS
# Below this many multiply-adds (about 2 us on one core) a product runs without a parallel region:
# handing work to another thread and waiting for it would cost more than it saves.
PARALLEL_MIN_MACS = 1 << 18


def _ext(iv) -> int:
    return const_extent(iv, 0)


def panel_width(m: int, n: int, lanes: int) -> int:
    """Columns per tile, 2 to 4 vectors: the width that wastes the fewest columns past n, ties
    going to 3, 2, then 4 vectors (with 3 x 8 or 2 x 12 accumulator tiles), or for fewer than 4 rows
    to 4, 3, then 2 vectors (a GEMV: more independent accumulators, longer contiguous reads)."""
    if n <= lanes:
        return lanes
    choices: tuple[int, ...]
    if m < 4:
        choices = (4, 3, 2)
    else:
        choices = (3, 2, 4) if lanes >= 16 else (2, 3)
    return min((v * lanes for v in choices), key=lambda nr: (-(-n // nr) * nr - n, choices.index(nr // lanes)))


# with 16 registers, the most rows a tile takes: each row of the left operand is a stream of
# its own through memory, and a product of one vector of columns (1024 deep, N = 5) ran at half
# the speed with 12 rows per tile as with 6 (8: 0.65 ms, 6: 0.57, 12: 1.24; ONNX Runtime 0.74)
MAX_ROWS_16 = 6


def row_tile(m: int, nr: int, lanes: int) -> int:
    """Rows per tile: as many as the accumulators' register budget allows (three quarters of the
    vector registers; with 16 registers at most MAX_ROWS_16), evened out so that the row tiles
    have similar sizes."""
    budget = (REGISTERS.get(lanes, 16) * 3) // 4
    mr_max = max(1, budget // max(1, nr // lanes))
    if gemm_kernel.narrow_register_file(lanes):
        mr_max = min(mr_max, MAX_ROWS_16)
    tiles = -(-m // mr_max)
    return max(1, -(-m // tiles))


def default_tile(m: int, n: int, lanes: int, kernel: gemm_kernel.MicroKernel,
                 packed_nr: int | None = None) -> tuple[int, int]:
    """(mr, nr) of the default register tile: the machine's micro-kernel (gemm_kernel.py) when
    the output has at least its rows and columns, rows evened out over the row tiles; else (a
    GEMV, a narrow or short product, a right operand packed at another width) the heuristics
    `panel_width` and `row_tile`."""
    if packed_nr is None and m >= kernel.mr and n >= kernel.nr and kernel.lanes == lanes:
        tiles = -(-m // kernel.mr)
        return -(-m // tiles), kernel.nr
    nr = min(packed_nr or panel_width(m, n, lanes), -(-n // lanes) * lanes)
    return row_tile(m, nr, lanes), nr


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
    `main` may be wider than `out` (whole panels), and `out` may have unit axes that `main` has not
    (a reshape back to a batched shape, (B*M, N) -> (B*M, 1, N): see `_tile_axes`)."""
    axes = list(s[out].op.axis)
    if len(axes) < 2:
        return False           # a vector (a reshape of an (M, 1) product): not a tile of rows x columns
    batch, i, j = _tile_axes(axes, len(main.shape))
    if len(axes) > len(main.shape):
        batch = [iv for iv in batch if _ext(iv) != 1]
    own = tuple(iv.var for iv in batch + [i, j])
    return tuple(_ext(iv) for iv in batch + [i]) == const_shape(main)[:-1] and reads_only_at(s, out, main, own)


def _tile_axes(axes, main_rank: int) -> tuple[list, object, object]:
    """(batch axes, row axis, column axis) of an output stage: its last two axes, or, when it has
    more axes than the product (unit axes a reshape inserted), its last axis of extent above one
    before the column axis as the rows, the unit axes among the batch loops."""
    *batch, i, j = axes
    if len(axes) > main_rank:
        rows = [iv for iv in axes[:-1] if _ext(iv) != 1]
        if len(rows) == main_rank - 1:
            i = rows[-1]
            batch = [iv for iv in axes[:-1] if iv is not i]
    return list(batch), i, j


def _blockable(main, target) -> bool:
    return (main is not None and main.dtype == "float32" and len(main.op.axis) >= 2
            and len(main.op.reduce_axis) == 1 and all(_ext(iv) > 0 for iv in main.op.axis))


def _tile_n_candidates(n: int, lanes: int, default: tuple) -> list[tuple]:
    """(vectors, lanes per vector) pairs for the column tile: half, one or two machine vectors
    per vector, tiles up to 64 columns (or the default's width)."""
    widths = sorted({max(1, lanes // 2), lanes, 2 * lanes})
    limit = max(64, default[0] * default[1])
    out = [(v, w) for w in widths for v in range(1, 7) if v * w <= limit]
    return out if default in out else out + [default]


def _right_operand(main):
    """The placeholder the main stage reads as its right operand (the one indexed by the
    reduction axis and the column axis), or None."""
    from ...ir.expr import TensorLoad
    from ...ir.functor import post_order_visit

    k = main.op.reduce_axis[0].var
    j = main.op.axis[-1].var
    found = []

    def fn(node):
        if isinstance(node, TensorLoad) and isinstance(node.tensor.op, PlaceholderOp) and len(node.indices) >= 2:
            if node.indices[-2] is k and node.indices[-1] is j:     # `==` would build an expression
                found.append(node.tensor)
    post_order_visit(main.op.body[0], fn)
    return found[0] if len(found) == 1 else None


def _packed_operand(main):
    """The placeholder the main stage reads as a right operand packed into column panels
    (panel, k, column in the panel: ops/nn_dense_packed.py), or None."""
    from ...ir.expr import TensorLoad
    from ...ir.functor import post_order_visit

    k = main.op.reduce_axis[0].var
    found = []

    def fn(node):
        if isinstance(node, TensorLoad) and isinstance(node.tensor.op, PlaceholderOp) and len(node.indices) == 3:
            if node.indices[1] is k:
                found.append(node.tensor)
    post_order_visit(main.op.body[0], fn)
    return found[0] if len(found) == 1 else None


def schedule_gemm(s, main, outs, target, cfg, packed_nr: int | None = None, packable: bool = False) -> None:
    """The register-tiled GEMM of the module docstring on the reduction stage `main`, with its
    choices as knobs; with `cfg` collecting (None at the template) it schedules at the default
    point.  `packed_nr`: the panel width of a right operand packed at compile time."""
    lanes = max(1, target.simd_lanes(main.dtype))
    m, n, kk = _ext(main.op.axis[-2]), _ext(main.op.axis[-1]), _ext(main.op.reduce_axis[0])
    mr0, nr0 = default_tile(m, n, lanes, gemm_kernel.for_target(target, main.dtype), packed_nr)
    default_n = (nr0 // lanes, lanes) if nr0 % lanes == 0 else (1, nr0)
    cfg.define_split("tile_m", m, 2, policy="factors", allow_tail=True, max_factor=max(mr0, min(m, 16)),
                     default=(mr0,))
    cfg.define_split("tile_n", n, 3, policy="candidate", allow_tail=True,
                     candidates=_tile_n_candidates(n, lanes, default_n), default=default_n)
    cfg.define_split("tile_k", kk, 2, policy="factors", max_factor=8, default=(1,))
    cfg.define_reorder("order", 2, policy="all", default=(0, 1))      # (panel loop, row loop)
    right = _right_operand(main) if packable else None
    if right is not None:
        # packing pays when each panel serves at least two row tiles
        cfg.define_knob("pack_b", [False, True], default=m >= 2 * mr0)
    pack = right is not None and cfg["pack_b"].val
    if pack:
        packed = s.cache_read(right, "global", [main])

    epilogue = [t for t in outs if t is not main]
    if len(epilogue) == 1 and not s[main].is_output and _elementwise_reader(s, epilogue[0], main):
        out = epilogue[0]
        s[main].set_scope("local")
        acc = main
    else:
        out = main
        acc = s.cache_write(main, "local")
        for t in epilogue:
            # a 1x1 conv run as a product whose output goes to blocked channels: 8x8 transposes
            if not to_blocks_transposed(s, t, target):
                schedule_elementwise_stage(s, t, target)
    ost = s[out]
    batch, i, j = _tile_axes(list(ost.op.axis), len(main.shape))
    # (the right operand packed at compile time: with matmul.cpu's on-the-fly packing the space
    # would depend on pack_b's value)
    blocks = cache_blocks(m, _ext(j), kk, mr0, nr0, target) if not packable else []
    if blocks:
        names = ["x".join(map(str, b)) for b in blocks]
        cfg.define_knob("cache_block", ["none", *names], default=names[0])
    block = tuple(int(v) for v in cfg["cache_block"].val.split("x")) if blocks and cfg["cache_block"].val != "none" \
        else (0, 0, 0)
    if block[0]:
        return _blocked_gemm(s, ost, acc, batch, i, j, block, lanes, cfg, target)
    io, ii = cfg["tile_m"].apply(s, ost, i)
    jo, jv, jl = cfg["tile_n"].apply(s, ost, j)
    first, second = cfg["order"].apply(s, ost, [jo, io])
    ost.reorder(*batch, first, second, ii, jv, jl)
    ost.unroll(jv)
    ost.vectorize(jl)
    s[acc].compute_at(ost, second)
    vl = cfg["tile_n"].size[2]
    *_, ai, aj = s[acc].op.axis
    (ak,) = s[acc].op.reduce_axis
    ajo, aji = s[acc].split(aj, factor=vl)
    ki = cfg["tile_k"].size[1]
    kloop = ak
    if ki > 1:
        ako, kloop = cfg["tile_k"].apply(s, s[acc], ak)
        s[acc].reorder(ako, kloop, ai, ajo, aji)
        s[acc].unroll(kloop)
    else:
        s[acc].reorder(ak, ai, ajo, aji)
    panels = _packed_operand(main) if packed_nr is not None else None
    if panels is not None and m > cfg["tile_m"].size[-1]:
        # the next panel, a row of it per k step, while this one serves its row tiles: the
        # first row tile of a panel then finds it in cache instead of waiting on memory
        s[acc].prefetch(panels, kloop, kk)
    s[acc].unroll(ai)
    s[acc].unroll(ajo)
    s[acc].vectorize(aji)
    outer = first
    batch_size = 1
    for iv in batch:
        batch_size *= _ext(iv)
    # a tile loop whose split leaves a tail stays out of the parallel loop when the batch alone
    # has work for every core: fused with the batch, its tail guard would recur in every batch
    # and no loop could peel it (tir/passes/partition_loops.py), leaving the guard in the tile
    # (the output's own extents: an epilogue that slices padded columns off, 1504 -> 1500, has a
    # tail where the product has none)
    size = cfg["tile_n"].size[1] * cfg["tile_n"].size[2] if first is jo else cfg["tile_m"].size[-1]
    tail = (_ext(j) if first is jo else _ext(i)) % size != 0
    with_first = not (batch and tail and batch_size >= target.num_cores)
    if target.num_cores > 1 and batch_size * m * n * kk >= PARALLEL_MIN_MACS:
        if not batch:
            outer = first
        else:
            outer = ost.fuse(*batch, first) if with_first else ost.fuse(*batch)
        ost.parallel(outer)
    if pack:
        # once per panel: at the panel loop (fused with the batch loops when it is outermost)
        s[packed].compute_at(ost, outer if first is jo and with_first else jo)
        pc = s[packed].op.axis[-1]
        pco, pci = s[packed].split(pc, factor=vl)
        s[packed].vectorize(pci)


# a local (mc x nc) block of accumulators takes at most this many bytes of stack
BLOCK_BYTES = 64 * 1024
# cache blocks need this many row tiles to pay for the block's loads and stores: the LSTM LM's
# decoder (35 rows, K = 650 in two chunks, N = 10000) ran 20% slower blocked
MIN_BLOCK_ROW_TILES = 16


def cache_blocks(m: int, n: int, k: int, mr: int, nr: int, target) -> list[tuple[int, int, int]]:
    """(kc, mc, nc) candidates of the `cache_block` knob, the default first; none (no knob)
    with 32 vector registers (unmeasured there), for fewer than MIN_BLOCK_ROW_TILES row tiles or
    when the reduction is under two chunks.  kc: the largest divisor of K whose (kc x nr) panel
    fits L1; mc: the largest divisor of M whose (mc x kc) block fits half of L2; nc: the largest
    divisor of N, a multiple of nr, whose (mc x nc) block fits BLOCK_BYTES; the second candidate
    halves kc.  Blocks divide the output exactly, so the loops over them need no guards (a
    guarded last block ran at half speed)."""
    lanes = max(1, target.simd_lanes("float32"))
    if not gemm_kernel.narrow_register_file(lanes) or m < MIN_BLOCK_ROW_TILES * mr or nr <= 0:
        return []

    kc_limit = target.l1_cache_bytes // (4 * nr)
    if kc_limit < 1:
        return []
    kc = divisor_at_most(k, kc_limit)
    if k < 2 * kc:
        return []
    mc_limit = target.l2_cache_bytes // 2 // (4 * kc)
    mc = divisor_at_most(m, mc_limit) if mc_limit >= 1 else 0
    nc = max((d for d in range(nr, min(n, BLOCK_BYTES // (4 * max(mc, 1))) + 1, nr) if n % d == 0), default=0)
    if mc < mr or not nc:
        return []
    out = [(kc, mc, nc)]
    half_k = divisor_at_most(k, kc // 2) if kc >= 2 else 0
    if half_k and k >= 2 * half_k:
        out.append((half_k, mc, nc))
    return out


def _blocked_gemm(s, ost, acc, batch, i, j, block, lanes: int, cfg, target) -> None:
    """The output in (mc x nc) blocks (parallel over the blocks), each accumulated in a local
    buffer: the reduction in chunks of kc outside the column panels and row tiles of the block,
    the register tile (tile_m x tile_n) innermost, unrolled and vectorized."""
    kc, mc, nc = block
    mo, mi = ost.split(i, factor=mc)
    jc, jn = ost.split(j, factor=nc)
    ost.reorder(*batch, jc, mo, mi, jn)
    _, jv = ost.split(jn, factor=lanes)
    ost.vectorize(jv)
    outer = ost.fuse(*batch, jc, mo)
    if target.num_cores > 1:
        ost.parallel(outer)
    s[acc].compute_at(ost, outer)
    *_, ai, aj = s[acc].op.axis
    (ak,) = s[acc].op.reduce_axis
    ko, ki = s[acc].split(ak, factor=kc)
    aio, aii = cfg["tile_m"].apply(s, s[acc], ai)
    ajo, ajv, ajl = cfg["tile_n"].apply(s, s[acc], aj)
    s[acc].reorder(ko, ajo, aio, ki, aii, ajv, ajl)
    s[acc].unroll(aii)
    s[acc].unroll(ajv)
    s[acc].vectorize(ajl)


@template("matmul.cpu", tunable=True)
def matmul(s, master_outs, outs, target, cfg=None) -> None:
    """Register tiles for float32 matmuls with an output of rank >= 2 (its last two axes), operands
    as they come (`pack_b` packs the right operand's panels on the fly); others (other dtypes,
    vector results, float16's cast stage) get the generic complex template (no knobs)."""
    cfg = as_config(cfg)
    main = _main_stage(s, master_outs)
    if main is None or main is not master_outs[0] or not _blockable(main, target):
        return complex_out(s, master_outs, outs, target, None)
    schedule_gemm(s, main, outs, target, cfg, packable=True)


@template("matmul_packed.cpu", tunable=True)
def matmul_packed(s, master_outs, outs, target, cfg=None) -> None:
    """Register tiles over a right operand packed into column panels at compile time: the main
    stage covers whole panels; the stage keeping the first N columns (if any) is inlined into
    the epilogue, or is itself the output the tiles are written to."""
    cfg = as_config(cfg)
    main = _main_stage(s, master_outs)
    if main is None or not _blockable(main, target):
        return complex_out(s, master_outs, outs, target, None)
    cols = master_outs[0]
    if cols is not main and cols not in outs:
        s[cols].compute_inline()
    schedule_gemm(s, main, outs, target, cfg, packed_nr=main.op.attrs.get("nr"))
