"""CPU template for the Winograd conv (ops/nn_conv_winograd.py); tunable.

Three loop nests, each on the thread pool when the product has PARALLEL_MIN_MACS multiply-adds:
- input transform, per (image, input channel block, tile): the padded input tile (or, with
  `pad_inline`, the input read under bounds tests, no padded copy), B^T along its columns into a
  small local buffer, then along its rows into V; the positions of the tile are unrolled, so each
  is a short sum of contiguous vectors (the b channels of a block are the SIMD lanes);
- the batched product, per (image, position e) and output channel block: an (xb tiles x B
  channels) register accumulator over all input channels, V's value broadcast against one
  vector of U per step, like the 1x1 conv of conv2d_nchwc.cpu.  With `order` (0, 1) the
  position is outside the channel block loop, so U[e] and V[.., e] stay in cache while every
  block of output channels is computed;
- output transform, per (image, output channel block, row of tiles, tile): A^T along the
  columns into a local buffer, then along the rows, written through the fused epilogue (bias,
  activation, residual add in NCHW[x]c) as whole vectors.

Where the transformed input V of an image outgrows the L2 cache (more than ROWS_FROM_L2 times
it), the three nests run a row of tiles at a time (`by_rows`), parallel over the rows: the row's
V for every input channel, its M for every output channel, then its output, so that V and M stay
in cache instead of each going through memory (a 64-channel 3x3 conv on 224x224: 47.8 -> 14.1 ms
at one thread; 128 channels on 112x112: 27.7 -> 12.6 ms; ONNX Runtime's direct conv about 40 and
20).  The weights' transform U is then read once per row, from L2 or L3; for ResNet-18's
layers after the first stage, whose V is small, that cost more than it saved.

A smaller conv runs all three serially: each nest splits its work differently (channel blocks,
positions, rows of tiles), so with two threads half of what one nest wrote crosses to the other
core's cache before the next can read it, and with three hand-overs that exchange costs more than
the split saves.  DQN's 64-channel 3x3 conv on a 9x9 input (1M multiply-adds in the product,
16 us on one thread) took 21 us on two; serial it stays at 16 us, while single-nest convs of
that size still gain from a second thread.

Knobs:
  tile_p      tiles per register tile (xb), tails allowed;
  tile_fi     the B output channels of a block as (vectors, lanes per vector);
  order       position loop outside (0, 1) or inside (1, 0) the output channel block loop;
  pad_inline  read the input under bounds tests in the transform instead of a padded copy;
  by_rows     the three nests per row of tiles (above) or each over the whole image.
"""
from __future__ import annotations

import math

from ...te.space import as_config
from . import gemm_kernel, template
from .common import (
    blocked_epilogue,
    column_tile,
    const_extent,
    const_shape,
    divisor_at_most,
    schedule_elementwise_stage,
    schedule_pad,
    stages_by_name,
)

ACCUMULATORS = 24            # output vectors in the product's register tile
PARALLEL_MIN_MACS = 1 << 21  # multiply-adds of the product below which the nests run serially


def product_macs(wm) -> int:
    """Multiply-adds of the batched product: every output of `wm` (images, output channels,
    tiles, alpha x alpha positions) sums over its input channels (its group's, with groups)."""
    macs = 1
    for d in const_shape(wm):
        macs *= d
    for r in wm.op.reduce_axis:          # a group's input channels only, with groups
        macs *= _ext(r)
    return macs


def _ext(iv) -> int:
    return const_extent(iv, 0)



def _vectorize_block(st, ax, lanes: int) -> None:
    b = _ext(ax)
    if b > lanes and b % lanes == 0:
        _, inner = st.split(ax, factor=lanes)
        st.vectorize(inner)
    else:
        st.vectorize(ax)


@template("conv2d_winograd_nchwc.cpu", tunable=True)
def conv2d_winograd_nchwc(s, master_outs, outs, target, cfg=None) -> None:
    """The three loop nests of the module docstring, with their choices as knobs; `cfg` None is
    the heuristic default (the space's default point)."""
    cfg = as_config(cfg)
    y = master_outs[0]
    st = stages_by_name(y)
    wt, wv, wm, ws = st["wino_t"], st["wino_v"], st["wino_m"], st["wino_s"]
    pad = st.get("pad")
    lanes = max(1, target.simd_lanes(y.dtype))
    parallel = target.num_cores > 1 and product_macs(wm) >= PARALLEL_MIN_MACS

    # the batched product: knobs first (the space is declared before any choice applies)
    n, kb, p, eps, nu, ki = s[wm].op.axis
    ntiles, block = _ext(p) or 1, _ext(ki) or 1
    vectors = max(1, block // lanes)
    if gemm_kernel.narrow_register_file(lanes):
        # 16 registers (AVX2): at most 6 x 2 vectors, a shorter last tile rather than a narrow
        # divisor (ResNet-18's products 1.1-1.5x faster than 4 x 2 or spilled 7-8 x 2 tiles)
        budget = gemm_kernel.accumulators(lanes, ACCUMULATORS)
        xb0 = column_tile(ntiles, max(1, budget // vectors // 2 * 2))
    else:
        xb0 = divisor_at_most(ntiles, max(1, ACCUMULATORS // vectors // 2 * 2)) if ntiles > 1 else 1
        if xb0 < 4 and ntiles > 4:
            xb0 = min(ntiles, max(1, ACCUMULATORS // vectors // 2))     # a tail beats a narrow tile
    cfg.define_split("tile_p", ntiles, 2, policy="factors", allow_tail=True,
                     max_factor=max(xb0, min(ntiles, 28)), default=(xb0,))
    widths = sorted({w for w in (lanes // 2, lanes, block) if 1 <= w <= block and block % w == 0} | {lanes})
    cfg.define_split("tile_fi", block, 2, policy="candidate", allow_tail=True,
                     candidates=[(w,) for w in widths], default=(lanes,))
    cfg.define_reorder("order", 2, policy="all", default=(0, 1))       # (position, channel block)
    cfg.define_knob("pad_inline", [False, True], default=False)

    cfg.define_knob("by_rows", [False, True], default=_by_rows_default(wv, target))
    by_rows = cfg["by_rows"].val

    # input transform
    if pad is not None:
        if cfg["pad_inline"].val:
            s[pad].compute_inline()
        else:
            schedule_pad(s, pad, target, parallel=parallel)
    vn, vc, vp, ve, vnu, vci = s[wv].op.axis
    s[wv].reorder(vn, vc, vp, ve, vnu, vci)
    s[wv].unroll(ve)
    s[wv].unroll(vnu)
    _vectorize_block(s[wv], vci, lanes)
    s[wt].compute_at(s[wv], vp)
    s[wt].set_scope("local")        # one tile's alpha x alpha x b values: a stack array, not the heap
    tn, tc, tp, ta, tnu, tci = s[wt].op.axis
    s[wt].unroll(ta)
    s[wt].unroll(tnu)
    _vectorize_block(s[wt], tci, lanes)
    if not by_rows:
        fused = s[wv].fuse(vn, vc)
        if parallel:
            s[wv].parallel(fused)

    # the batched product
    acc = s.cache_write(wm, "local")
    po, pi = cfg["tile_p"].apply(s, s[wm], p)
    pos = s[wm].fuse(eps, nu)
    first, second = cfg["order"].apply(s, s[wm], [pos, kb])
    u_bytes = 4 * math.prod(const_shape(next(t for t in wm.op.input_tensors() if t is not wv)))
    images_inside = not by_rows and (_ext(n) or 1) > 1 and u_bytes >= U_FROM_MEMORY * target.l2_cache_bytes
    if images_inside:
        # a batch of images with a transformed weight U too large for the last-level cache (the
        # phases of a dilated conv): the images inside the position and channel block loops,
        # so U[e]'s block is read from memory once, not once per image (16 phases of 8x8
        # through a 512 -> 512 channel U of 38 MB: 15.9 -> 9.6 ms at one thread).  A U that
        # the L3 cache holds is better read per image (36 phases of 6x6, U of 8.4 MB: 7.2 ms
        # with the images outside, 7.7 inside)
        s[wm].reorder(first, second, n, po, pi, ki)
    else:
        s[wm].reorder(n, first, second, po, pi, ki)
    s[acc].compute_at(s[wm], po)
    _vectorize_block(s[wm], ki, lanes)
    outer = first if images_inside else s[wm].fuse(n, first)
    if parallel and not by_rows:
        s[wm].parallel(outer)
    an, akb, ap, aeps, anu, aki = s[acc].op.axis
    rco, rci = s[acc].op.reduce_axis
    afo, afi = cfg["tile_fi"].apply(s, s[acc], aki)
    s[acc].reorder(rco, rci, ap, afo, afi)
    s[acc].unroll(ap)
    s[acc].unroll(afo)
    s[acc].vectorize(afi)

    # output transform, through the fused epilogue when there is one
    epilogue = [t for t in outs if t is not y]
    out = epilogue[0] if len(epilogue) == 1 and blocked_epilogue(s, epilogue[0], y) else None
    if out is None:
        for t in epilogue:
            schedule_elementwise_stage(s, t, target, parallel=parallel)
        out = y
    else:
        s[y].compute_inline()
    m = _ext(s[ws].op.axis[4])
    on, okb, oy, ox, oki = s[out].op.axis
    yo, yi = s[out].split(oy, factor=m)
    xo, xi = s[out].split(ox, factor=m)
    groups = _groups(wm, wv)
    if by_rows and groups > 1:
        # per group and row of tiles: the group's V, M and output, so that no thread reads what
        # another wrote (a group's product is short beside the V and M it would hand over)
        og, okb = s[out].split(okb, factor=_ext(okb) // groups)
        s[out].reorder(on, og, yo, okb, xo, yi, xi, oki)
        on = s[out].fuse(on, og)
    elif by_rows:
        s[out].reorder(on, yo, okb, xo, yi, xi, oki)
    else:
        s[out].reorder(on, okb, yo, xo, yi, xi, oki)
    s[out].unroll(yi)
    s[out].unroll(xi)
    _vectorize_block(s[out], oki, lanes)
    s[ws].compute_at(s[out], xo)
    s[ws].set_scope("local")
    sn, skb, sp, se, sj, ski = s[ws].op.axis
    s[ws].unroll(se)
    s[ws].unroll(sj)
    _vectorize_block(s[ws], ski, lanes)
    rows = s[out].fuse(on, yo) if by_rows else s[out].fuse(on, okb, yo)
    if parallel:
        s[out].parallel(rows)
    if by_rows:
        # per row of tiles: its V for every input channel, its M for every output channel, then
        # its output; the row's V and M stay in L2 instead of streaming through memory
        s[wv].compute_at(s[out], rows)
        s[wm].compute_at(s[out], rows)


def _groups(wm, wv) -> int:
    """The conv's groups: V's input channel blocks over those one output block sums."""
    return max(1, const_shape(wv)[1] // max(1, _ext(wm.op.reduce_axis[0])))


# a V of more than this many times the L2 cache is computed a row of tiles at a time (by_rows)
ROWS_FROM_L2 = 2
U_FROM_MEMORY = 16       # a transformed weight this many times L2 or more is read from memory


def _by_rows_default(wv, target) -> bool:
    """Whether the transformed input V of one image exceeds ROWS_FROM_L2 times the L2 cache:
    then the three nests run a row of tiles at a time."""
    return 4 * math.prod(const_shape(wv)[1:]) > ROWS_FROM_L2 * target.l2_cache_bytes
