"""CPU templates for the window ops in the blocked layout NCHW[b]c (ops/nn_depthwise_nchwc.py,
ops/nn_pool_nchwc.py), where the b channels of a block are the SIMD lanes.

window2d_nchwc.cpu (depthwise conv, max and average pooling; tunable): per (image, channel
block, output row) on the thread pool, per tile of xb output columns a local accumulator of
xb x b, i.e. xb * b / lanes vectors.  Inside the tile the window taps, the columns and the
vectors of the block are all unrolled: each tap is one weight vector (depthwise) and per column
one contiguous vector load of the input and one multiply-add (or max), at any stride, with no
gathers and no phase split.  The elementwise epilogue (bias, activation, in NCHW[b]c) takes the
tile from the accumulator and stores whole vectors.  By default no padded copy of the input is
built: the pad stage is inlined, so each tap's load tests its own row and column bounds (the
simplifier drops the tests the loop ranges prove, the C compiler turns the rest into well
predicted branches) and reads the input in place.  On MobileNet-v1's depthwise layers and
ResNet's stem max pool this is faster than the padded copy, per plane or per tile of rows: the
copy writes and rereads a padded plane (or tile of rows) that does not fit in L1, at a cost of
the order of the taps' own.
The copy stays in the space (`pad_rows` >= 0): a plane at a time, or per tile of output rows
(see `_pad_rows`), each vector of it one guarded contiguous copy (or the fill value).

Its knobs (the heuristic above is the default point of the space):
  tile_x       output columns per register tile (xb), divisors of the output width;
  tile_ci      vectors of the block per tile: fewer than all puts a loop over the parts of the
               block just outside the column tiles (a wider column tile in the same registers);
  order        order of the kernel row, kernel column and column-of-the-tile loops around the
               accumulator: taps outside the columns (default), the kernel column inside the
               columns, or the columns outermost (one accumulator column finished at a time);
  unroll_taps  unroll of the kernel row and kernel column loops (at most MAX_UNROLLED_TAPS);
  pad_rows     where the padded input is built: "inline" nowhere (default: each load tests its
               bounds), 0 per plane, r > 0 per tile of r output rows;
  parallel     "planes": (image, block) on the thread pool (default when there are at least as
               many planes as cores); "rows": (image, block, row tile),
               with pad_rows 0 the padded input then built whole first, with "inline" nothing
               built (a layer with a single channel block, MobileNet's first, has no other
               parallelism).

global_pool_nchwc.cpu: per (image, channel block) a b-wide local accumulator, the plane's cells
walked in memory order, each one vector add (or max).
"""
from __future__ import annotations

import itertools
import math

from ...te.space import as_config
from . import gemm_kernel, template
from .common import const_extent, const_shape, divisor_at_most, reads_only_at, schedule_elementwise_stage

ACCUMULATORS = 16            # output vectors in one register tile (fewer with 16 registers)
MAX_UNROLLED_TAPS = 25
COLUMNS_16 = 8              # columns of a one-vector tile with 16 registers (14 was slower)
# When a padded copy is chosen (pad_rows >= 0): padded planes up to this size are built a plane
# at a time, larger ones per tile of rows of this size (heap buffers: the C backend keeps locals
# over 32 KiB off the stack).
PLANE_BYTES = 128 * 1024
INLINE = "inline"            # the pad_rows value that builds no padded copy
_TAP_ORDERS = ((0, 1, 2), (0, 2, 1), (2, 0, 1))      # over (kernel row, kernel column, column)


def _ext(iv) -> int:
    return const_extent(iv, 0)


def _main_stage(t):
    """The window reduction of a pool or depthwise op's output (the output itself, or the sum
    an average divides)."""
    if t.op.reduce_axis:
        return t
    (src,) = [x for x in t.op.input_tensors() if x.op.reduce_axis]
    return src


def _own_index_reader(s, out, main) -> bool:
    """`out` has `main`'s shape and reads it (through inlined stages) only at its own index."""
    return const_shape(out) == const_shape(main) and reads_only_at(s, out, main, tuple(iv.var for iv in s[out].op.axis))


def _split_block(s, stage, ax, lanes: int):
    """Split the channel block into vectors of `lanes` (when it is wider); returns (outer, inner)."""
    b = _ext(ax)
    if b > lanes and b % lanes == 0:
        return s[stage].split(ax, factor=lanes)
    return None, ax


@template("window2d_nchwc.cpu", tunable=True)
def window2d_nchwc(s, master_outs, outs, target, cfg=None) -> None:
    """The register-tiled window loops of the module docstring, with their choices as knobs
    (see the module docstring); `cfg` None is the heuristic default, the space's default point."""
    cfg = as_config(cfg)
    top = master_outs[0]
    main = _main_stage(top)
    if top is not main and top not in outs:
        s[top].compute_inline()
    pads = [t for t in main.op.input_tensors() if t.op.name == "pad"]
    lanes = max(1, target.simd_lanes(main.dtype))
    _, _, my, mx, mci = s[main].op.axis
    ry, rx = s[main].op.reduce_axis
    taps = (_ext(ry), _ext(rx))
    block = _ext(mci)
    vectors = max(1, block // lanes)
    split_block = block > lanes and block % lanes == 0
    nvec = vectors if split_block else 1
    # with 16 registers (AVX2), one vector of the block per tile over up to COLUMNS_16 columns:
    # MobileNet's depthwise layers took 16% less time than with every vector of the block over
    # fewer columns (the unrolled taps' weight vectors no longer compete with the accumulators)
    per_tile = 1 if gemm_kernel.narrow_register_file(lanes) else nvec
    columns = COLUMNS_16 if per_tile < nvec else gemm_kernel.accumulators(lanes, ACCUMULATORS) // vectors
    xb0 = divisor_at_most(_ext(mx), max(1, columns))
    cfg.define_split("tile_x", _ext(mx), 2, policy="factors", max_factor=max(xb0, min(_ext(mx), ACCUMULATORS)),
                     default=(xb0,))
    cfg.define_split("tile_ci", nvec, 2, policy="factors", default=(per_tile,))
    cfg.define_reorder("order", 3, policy="candidates", candidates=_TAP_ORDERS, default=_TAP_ORDERS[0])
    cfg.define_annotate("unroll_taps", 2, policy="candidates", candidates=_tap_unrolls(taps),
                        default=("unroll", "unroll") if taps[0] * taps[1] <= MAX_UNROLLED_TAPS else ("none", "none"))
    if pads:
        cfg.define_knob("pad_rows", _pad_row_choices(_pad_rows(pads[0], main), _ext(my)), default=INLINE)
    # fewer (image, block) planes than cores would leave threads idle: rows then (MobileNet's
    # first depthwise layer is one plane of 32 channels)
    n_, c_ = _ext(s[main].op.axis[0]) or 1, _ext(s[main].op.axis[1]) or 1
    cfg.define_knob("parallel", ["planes", "rows"], default="rows" if n_ * c_ < target.num_cores else "planes")

    readers = [t for t in outs if t is not main]
    if len(readers) == 1 and main not in outs and _own_index_reader(s, readers[0], main):
        # the tile goes from the accumulator through the epilogue to the output
        out, acc = readers[0], main
        s[main].set_scope("local")
    else:
        for t in readers:
            schedule_elementwise_stage(s, t, target)
        out, acc = main, s.cache_write(main, "local")
    ost = s[out]
    n, c, y, x, ci = ost.op.axis
    xo, xi = cfg["tile_x"].apply(s, ost, x)
    cio, cii = _split_block(s, out, ci, lanes)
    # vectors of the block per tile: fewer than all of them puts a loop over the block's parts
    # just outside the column tiles (a row of input stays in cache for each part)
    per_tile = cfg["tile_ci"].size[-1]
    cioo, cioi = (ost.split(cio, factor=per_tile) if per_tile < nvec else (None, cio))
    ost.reorder(n, c, y, *_some(cioo), xo, xi, *_some(cioi), cii)
    ost.vectorize(cii)
    s[acc].compute_at(ost, xo)
    an, ac, ay, ax, aci = s[acc].op.axis
    ary, arx = s[acc].op.reduce_axis
    acio, acii = _split_block(s, acc, aci, lanes)
    s[acc].reorder(*[(ary, arx, ax)[k] for k in cfg["order"].perm], *_some(acio), acii)
    cfg["unroll_taps"].apply(s, s[acc], [ary, arx])
    s[acc].unroll(ax)
    if acio is not None:
        s[acc].unroll(acio)
    s[acc].vectorize(acii)
    nc = ost.fuse(n, c)
    rows = cfg["pad_rows"].val if pads else INLINE
    by_rows = cfg["parallel"].val == "rows"
    if rows == INLINE:
        # no padded copy: the taps read the input through the pad stage's bounds tests
        for pad in pads:
            s[pad].compute_inline()
        pads = []
        outer = at = ost.fuse(nc, y) if by_rows else nc
    elif rows:
        yo, _ = ost.split(y, factor=rows)
        outer = ost.fuse(nc, yo) if by_rows else nc
        at = outer if by_rows else yo
    elif by_rows:
        # rows on the thread pool: each padded plane built first, by its own loop nest
        outer = at = ost.fuse(nc, y)
    else:
        outer = at = nc
    for pad in pads:
        if by_rows and not rows:
            _schedule_whole_pad(s, pad, target, lanes)
            continue
        s[pad].compute_at(ost, at)
        s[pad].set_scope("local")
        *_, pci = s[pad].op.axis
        # the padding test depends on the row and column only: the block is the vector loop
        _, pcii = _split_block(s, pad, pci, lanes)
        s[pad].vectorize(pcii)
    if target.num_cores > 1:
        ost.parallel(outer)


def _pad_rows(pad, main) -> int:
    """Where a padded copy of the input is built, when one is: 0 (per (image, block) plane) when the
    padded plane is at most PLANE_BYTES, else the rows of a tile of output rows whose input rows
    fit in that size (rows shared by neighbouring tiles are copied twice).  A plane or tile in
    cache is what the taps read; a whole padded tensor built first would go through memory twice."""
    _, _, rows, cols, b = const_shape(pad)
    row_bytes = cols * b * 4
    if rows * row_bytes <= PLANE_BYTES:
        return 0
    sy, dy = main.op.attrs["strides"][0], main.op.attrs["dilations"][0]
    span = (_ext(main.op.reduce_axis[0]) - 1) * dy + 1
    return max(1, (PLANE_BYTES // row_bytes - span) // sy + 1)


def _pad_row_choices(rows: int, out_rows: int) -> list:
    """Values of the pad_rows knob: INLINE (no copy), 0 (a plane at a time), a few tiles of output
    rows and `rows`, the tile `_pad_rows` picks."""
    return [INLINE, 0] + sorted({r for r in (1, 2, 4, 8) if r < out_rows} | ({rows} - {0}))


def _tap_unrolls(taps: tuple) -> list[tuple]:
    """Unroll choices for the (kernel row, kernel column) loops that unroll at most
    MAX_UNROLLED_TAPS taps."""
    out = []
    for ann in itertools.product(("none", "unroll"), repeat=2):
        unrolled = math.prod(t for t, a in zip(taps, ann) if a == "unroll")
        if unrolled <= MAX_UNROLLED_TAPS:
            out.append(ann)
    return out


def _schedule_whole_pad(s, pad, target, lanes: int) -> None:
    """The padded input built whole before the window loops: per (image, block, row), the block
    the vector loop, rows on the thread pool."""
    st = s[pad]
    n, c, h, w, ci = st.op.axis
    _, cii = _split_block(s, pad, ci, lanes)
    st.vectorize(cii)
    rows = st.fuse(n, c, h)
    if target.num_cores > 1:
        st.parallel(rows)


def _some(axis) -> list:
    return [] if axis is None else [axis]


@template("global_pool_nchwc.cpu")
def global_pool_nchwc(s, master_outs, outs, target, cfg=None) -> None:
    top = master_outs[0]
    main = _main_stage(top)
    if top is not main and top not in outs:
        s[top].compute_inline()
    for t in outs:
        if t is not main:
            schedule_elementwise_stage(s, t, target, parallel=False)
    acc = s.cache_write(main, "local")
    n, c, y, x, ci = s[main].op.axis
    lanes = max(1, target.simd_lanes(main.dtype))
    nc = s[main].fuse(n, c)
    cio, cii = _split_block(s, main, ci, lanes)
    s[main].vectorize(cii)
    s[acc].compute_at(s[main], nc)
    *_, aci = s[acc].op.axis
    ry, rx = s[acc].op.reduce_axis
    acio, acii = _split_block(s, acc, aci, lanes)
    s[acc].reorder(ry, rx, *([acio] if acio is not None else []), acii)
    if acio is not None:
        s[acc].unroll(acio)
    s[acc].vectorize(acii)
    if target.num_cores > 1:
        s[main].parallel(nc)
