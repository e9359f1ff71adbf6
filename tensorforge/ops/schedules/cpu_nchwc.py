"""CPU templates for the window ops in the blocked layout NCHW[b]c (ops/nn_depthwise_nchwc.py,
ops/nn_pool_nchwc.py), where the b channels of a block are the SIMD lanes.

window2d_nchwc.cpu (depthwise conv, max and average pooling): per (image, channel block, output
row) on the thread pool, per tile of xb output columns a local accumulator of xb x b, i.e.
xb * b / lanes vectors.  Inside the tile the window taps, the columns and the vectors of the
block are all unrolled: each tap is one weight vector (depthwise) and per column one contiguous
vector load of the input and one multiply-add (or max), at any stride, with no gathers and no
phase split.  The elementwise epilogue (bias, activation, in NCHW[b]c) takes the tile from the
accumulator and stores whole vectors.  The padded input is built inside the output's loops, a
plane at a time when a plane is small, else per tile of output rows (see `_pad_attach`), each
vector of it one guarded contiguous copy (or the fill value).

global_pool_nchwc.cpu: per (image, channel block) a b-wide local accumulator, the plane's cells
walked in memory order, each one vector add (or max).
"""
from __future__ import annotations

from ...te.expr import IntImm
from . import template
from .cpu import reads_only_at, schedule_elementwise_stage

ACCUMULATORS = 16            # output vectors in one register tile
MAX_UNROLLED_TAPS = 25
# Padded planes up to this size are built a plane at a time, larger ones per tile of rows of
# this size (heap buffers: the C backend keeps locals over 32 KiB off the stack).  On
# MobileNet's 112x112 and 56x56 layers 128 KiB tiles beat both whole planes and 32 KiB tiles.
PLANE_BYTES = 128 * 1024


def _shape(t) -> tuple:
    return tuple(int(d.value) for d in t.shape)


def _ext(iv) -> int:
    e = iv.dom.extent
    return e.value if isinstance(e, IntImm) else 0


def _divisor_at_most(n: int, limit: int) -> int:
    for d in range(max(1, min(n, limit)), 0, -1):
        if n % d == 0:
            return d
    return 1


def _main_stage(t):
    """The window reduction of a pool or depthwise op's output (the output itself, or the sum
    an average divides)."""
    if t.op.reduce_axis:
        return t
    (src,) = [x for x in t.op.input_tensors() if x.op.reduce_axis]
    return src


def _own_index_reader(s, out, main) -> bool:
    """`out` has `main`'s shape and reads it (through inlined stages) only at its own index."""
    return _shape(out) == _shape(main) and reads_only_at(s, out, main, tuple(iv.var for iv in s[out].op.axis))


def _split_block(s, stage, ax, lanes: int):
    """Split the channel block into vectors of `lanes` (when it is wider); returns (outer, inner)."""
    b = _ext(ax)
    if b > lanes and b % lanes == 0:
        return s[stage].split(ax, factor=lanes)
    return None, ax


@template("window2d_nchwc.cpu")
def window2d_nchwc(s, master_outs, outs, target, cfg=None) -> None:
    top = master_outs[0]
    main = _main_stage(top)
    if top is not main and top not in outs:
        s[top].compute_inline()
    pads = [t for t in main.op.input_tensors() if t.op.name == "pad"]
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
    lanes = max(1, target.simd_lanes(main.dtype))
    block = _ext(ci)
    vectors = max(1, block // lanes)
    xb = _divisor_at_most(_ext(x), max(1, ACCUMULATORS // vectors))
    xo, xi = ost.split(x, factor=xb)
    cio, cii = _split_block(s, out, ci, lanes)
    ost.reorder(n, c, y, xo, xi, *([cio] if cio is not None else []), cii)
    ost.vectorize(cii)
    s[acc].compute_at(ost, xo)
    an, ac, ay, ax, aci = s[acc].op.axis
    ry, rx = s[acc].op.reduce_axis
    acio, acii = _split_block(s, acc, aci, lanes)
    s[acc].reorder(ry, rx, ax, *([acio] if acio is not None else []), acii)
    if _ext(ry) * _ext(rx) <= MAX_UNROLLED_TAPS:
        s[acc].unroll(ry)
        s[acc].unroll(rx)
    s[acc].unroll(ax)
    if acio is not None:
        s[acc].unroll(acio)
    s[acc].vectorize(acii)
    nc = ost.fuse(n, c)
    at = _pad_attach(ost, nc, y, pads[0], main) if pads else nc
    for pad in pads:
        s[pad].compute_at(ost, at)
        s[pad].set_scope("local")
        *_, pci = s[pad].op.axis
        # the padding test depends on the row and column only: the block is the vector loop
        _, cii = _split_block(s, pad, pci, lanes)
        s[pad].vectorize(cii)
    if target.num_cores > 1:
        ost.parallel(nc)


def _pad_attach(ost, plane, y, pad, main):
    """Where the padded input is built: per (image, block) plane when the padded plane is at
    most PLANE_BYTES, else per tile of output rows whose input rows fit in that size (rows
    shared by neighbouring tiles are copied twice).  A plane or tile in cache is what the taps
    read; a whole padded tensor built first would go through memory twice."""
    _, _, rows, cols, b = _shape(pad)
    row_bytes = cols * b * 4
    if rows * row_bytes <= PLANE_BYTES:
        return plane
    sy, dy = main.op.attrs["strides"][0], main.op.attrs["dilations"][0]
    span = (_ext(main.op.reduce_axis[0]) - 1) * dy + 1
    tile = max(1, (PLANE_BYTES // row_bytes - span) // sy + 1)
    yo, _ = ost.split(y, factor=tile)
    return yo


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
