"""CPU template `conv_transpose2d_nchwc.cpu` for the phase-decomposed transposed convolution
(ops/nn_conv_transpose_nchwc.py).

The phase stage is computed whole, on the thread pool per (image, channel block, output phase),
in register tiles of yb x xb positions of one phase: a local accumulator of yb * xb vectors of B
channels, the reduction loops (input channel, kernel row, kernel column) outside the unrolled
tile, so each weight vector is loaded once per tile and used yb * xb times (the positions of a
phase share their taps).  For a narrow block (fewer channels than a vector: an RGB output layer)
the tile is every channel times a few vectors of positions along a phase row instead.  The
outputs (the NCHW layout change with bias and activation) then run as vector loops along their
rows, reading the phase stage.

Where the stride does not divide the kernel the op has a stage per phase, each with its own
taps, and a copy stage that sets them side by side (ops/nn_conv_transpose_nchwc.py): each phase
stage gets the tiles of the knobs' point over its (image, block, tile row) loops, and the copy
runs vectorized along its channel block.

Why not take the tile straight into the epilogue, as the conv2d template does: the epilogue reads
the phase stage at (y % sy, y // sy), and bound inference widens a phase index read under a split
of y to every phase, so a tile attached there would hold all phases (four times the weights per
tile, a quarter of the reuse); on DCGAN the per-phase whole stage is the faster of the two.

The template is tunable; its knobs (the heuristic above is the default point of the space):
  tile_x        positions of a phase row per tile (xb), divisors of the phase width; for a
                narrow block (vectors along the row, lanes per vector), tails allowed;
  tile_y        phase rows per tile (yb), divisors of the phase height up to MAX_TILE_ROWS;
  tile_rc       an inner part of the input channel loop (up to MAX_INNER_RC channels),
                unrolled right outside the tile (1: none);
  order_reduce  order of the input channel and kernel row and column loops (channel outermost
                reads a phase's packed weights in memory order);
  unroll_taps   unroll of the kernel row and column loops;
  order_outer   "phases": (image, block, phase) outside the tiles, on the thread pool (default);
                "tiles": the phases inside each tile position, so the four phases of a 2x2
                stride reuse the same input rows in cache, (image, block, tile row) on the
                thread pool.
"""
from __future__ import annotations

from ...te.space import as_config
from . import gemm_kernel, template
from .common import const_extent, const_shape, divisor_at_most, schedule_rows

ACCUMULATORS = 24     # vector registers given to the accumulator tile with 32 (gemm_kernel.accumulators)
MAX_TILE_ROWS = 4      # knob limits (see _define_knobs)
MAX_INNER_RC = 4
_REDUCE_ORDERS = ((0, 1, 2), (1, 2, 0), (1, 0, 2))     # over (input channel, kernel row, kernel column)


def _ext(iv) -> int:
    return const_extent(iv, 1)


@template("conv_transpose2d_nchwc.cpu", tunable=True)
def conv_transpose2d_nchwc(s, master_outs, outs, target, cfg=None) -> None:
    """The phase-tiled loops of the module docstring, with their choices as knobs (see there);
    `cfg` None is the heuristic default, the space's default point.  Where the stride does not
    divide the kernel the op has one stage per phase, each reducing over its own taps: each gets
    the same tiles (the knobs of the first), over its (image, block, tile row) loops."""
    cfg = as_config(cfg)
    out5 = master_outs[0]
    phases = out5.op.input_tensors()[0]
    stages = [phases]
    if phases.op.tag == "conv_transpose2d_gathered":    # one stage per phase, copied side by side
        stages = list(phases.op.input_tensors())
        gst = s[phases]
        *outer_axes, inner = gst.op.axis
        _, vec = gst.split(inner, factor=max(1, target.simd_lanes(phases.dtype)))
        gst.vectorize(vec)
        if target.num_cores > 1:
            gst.parallel(gst.fuse(*outer_axes[:2]))
    for t in {u for st in stages for u in st.op.input_tensors() if u.op.name == "pad"}:
        schedule_rows(s, t, target)
    if out5 not in outs:
        s[out5].compute_inline()
    for t in outs:
        schedule_rows(s, t, target)
    lanes = max(1, target.simd_lanes(stages[0].dtype))
    narrow = stages[0].op.tag.endswith("_narrow")
    _define_knobs(cfg, stages[0], lanes, narrow)
    for phases in stages:
        _schedule_phases(s, phases, cfg, lanes, narrow, target)


def _schedule_phases(s, phases, cfg, lanes: int, narrow: bool, target) -> None:
    """Register tiles of one phase stage: all phases (n, fo, py, px, ... axes) or one."""
    acc = s.cache_write(phases, "local")
    pst = s[phases]
    rc, ry, rx = s[acc].op.reduce_axis
    every_phase = len(pst.op.axis) == 7
    phases_outer = cfg["order_outer"].val == "phases" and every_phase
    axes = list(pst.op.axis)
    n, fo = axes[:2]
    py_px = axes[2:4] if every_phase else []
    if narrow:
        fi, yq, xq = axes[-3:]
        yqo, yqi = cfg["tile_y"].apply(s, pst, yq)
        xqo, xqv, vec = cfg["tile_x"].apply(s, pst, xq)
        width = cfg["tile_x"].size[2]
        tile = [fi, yqi, xqv, vec]
    else:
        yq, xq, fi = axes[-3:]
        yqo, yqi = cfg["tile_y"].apply(s, pst, yq)
        xqo, xqi = cfg["tile_x"].apply(s, pst, xq)
        tile = [yqi, xqi, fi]
    outer = [n, fo, *py_px, yqo, xqo] if phases_outer else [n, fo, yqo, xqo, *py_px]
    pst.reorder(*outer, *tile)
    if not narrow:
        _, vec = pst.split(fi, factor=lanes)
    s[acc].compute_at(pst, outer[-1])
    if narrow:
        *_, afi, ayq, axq = s[acc].op.axis
        axo, axi = s[acc].split(axq, factor=width)
        tile_axes = [afi, ayq, axo, axi]
    else:
        *_, ayq, axq, afi = s[acc].op.axis
        afo_, afi_ = s[acc].split(afi, factor=lanes)   # one machine vector per accumulator
        tile_axes = [ayq, axq, afo_, afi_]
    # the reduction outside the tile: each weight vector loaded once per tile, used by all of
    # its positions; an inner part of the input channels (tile_rc) runs right outside the tile,
    # unrolled
    arc = rc
    inner_rc = cfg["tile_rc"].size[-1]
    if inner_rc > 1:
        arc, rci = cfg["tile_rc"].apply(s, s[acc], rc)
    reduction = [(arc, ry, rx)[k] for k in cfg["order_reduce"].perm]
    s[acc].reorder(*reduction, *([rci] if inner_rc > 1 else []), *tile_axes)
    pst.vectorize(vec)
    for ax in tile_axes[:-1]:
        s[acc].unroll(ax)
    if inner_rc > 1:
        s[acc].unroll(rci)
    cfg["unroll_taps"].apply(s, s[acc], [ry, rx])
    s[acc].vectorize(tile_axes[-1])
    if target.num_cores > 1:
        pst.parallel(pst.fuse(n, fo, *py_px) if phases_outer else pst.fuse(n, fo, yqo))


def _define_knobs(cfg, phases, lanes: int, narrow: bool) -> None:
    """The knobs, with the heuristic register tile as the default: ACCUMULATORS vectors of
    yb x xb positions (x B channels), or for a narrow block every channel times yb rows of xv
    vectors along a phase row."""
    if narrow:
        # each position vector of the tile takes `block` accumulators and one register for its
        # input vector, and the block's weights take `block` broadcasts: all within the register
        # file (a tile that only counted its accumulators spilled: 3-channel DCGAN layer 2.2x slower)
        block, yq_n, xq_n = const_shape(phases)[-3:]
        width = min(lanes, xq_n)
        positions = max(1, (gemm_kernel.register_count(lanes) - 1 - block) // (block + 1))
        rows = max(1, min(MAX_TILE_ROWS, positions, yq_n))
        yb = divisor_at_most(yq_n, rows)
        # a phase height whose divisors fall far below the rows wanted (511 = 7 x 73) takes the
        # full tile and a shorter last one: one row per tile left a single chain of dependent
        # FMAs (a 24 -> 1 channel kernel-64 layer 6x ONNX Runtime's time)
        row_tail = 2 * yb <= rows
        yb = rows if row_tail else yb
        xv = max(1, min(-(-xq_n // width), positions // yb))
        widths = sorted({width, max(1, width // 2)})
        cands = [(v, w) for w in widths for v in range(1, -(-xq_n // w) + 1) if v * block <= 2 * ACCUMULATORS]
        cfg.define_split("tile_x", xq_n, 3, policy="candidate", allow_tail=True,
                         candidates=cands if (xv, width) in cands else cands + [(xv, width)], default=(xv, width))
    else:
        yq_n, xq_n, block = const_shape(phases)[-3:]
        per_position = max(1, block // lanes)
        budget = gemm_kernel.accumulators(lanes, ACCUMULATORS)
        if gemm_kernel.narrow_register_file(lanes):
            # 16 registers: the tile, each step's broadcast and weight vector, and a spare (15
            # positions of one vector spilled: a kernel-16 stride-8 1-D layer 3.3 ms, 12 1.9 ms)
            budget = min(budget, gemm_kernel.register_count(lanes) - 4)
        # with 16 registers, two phase rows per tile: on DCGAN (AVX2) 4 x 2 positions ran at
        # twice the speed of 8 x 1 with the same 8 accumulators
        rows = 2 if gemm_kernel.narrow_register_file(lanes) and yq_n % 2 == 0 else 1
        ideal = min(xq_n, max(1, budget // (per_position * rows)))
        xb = divisor_at_most(xq_n, ideal)
        # a phase row whose divisors are all far below the tile (a prime 31 or 499 positions: a
        # vocoder's 1-D up-sampling) takes the full tile and a shorter last one; one position per
        # tile left a single chain of dependent FMAs (a 512->256 kernel-16 stride-8 layer 4.8x ORT)
        tail = 2 * xb < ideal
        xb = ideal if tail else xb
        yb = divisor_at_most(yq_n, max(1, budget // (per_position * xb)))
        row_tail = False
        cfg.define_split("tile_x", xq_n, 2, policy="factors", allow_tail=tail,
                         max_factor=max(xb, min(xq_n, ACCUMULATORS)), default=(xb,))
    # at most MAX_TILE_ROWS rows and MAX_INNER_RC channels: the tile, the taps and the inner
    # channels are unrolled together, and larger products only spill and take long to compile
    cfg.define_split("tile_y", yq_n, 2, policy="factors", allow_tail=row_tail,
                     max_factor=max(yb, min(yq_n, MAX_TILE_ROWS)), default=(yb,))
    channels = _ext(phases.op.reduce_axis[0])
    cfg.define_split("tile_rc", channels, 2, policy="factors", max_factor=MAX_INNER_RC, default=(1,))
    cfg.define_reorder("order_reduce", 3, policy="candidates", candidates=_REDUCE_ORDERS, default=_REDUCE_ORDERS[0])
    cfg.define_annotate("unroll_taps", 2, policy="try_unroll", default=("none", "none"))
    cfg.define_knob("order_outer", ["phases", "tiles"], default="phases")
