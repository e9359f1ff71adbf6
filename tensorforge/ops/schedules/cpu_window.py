"""CPU template `window2d.cpu` for per-channel sliding-window ops over NCHW planes: the
depthwise convolution of ops/nn_depthwise.py, max_pool2d_rows (ops/nn_pool_rows.py) and the
sum of a conv's tap planes (ops/nn_tap_sum.py, whose output plane reads K padded planes).

Per (image, channel) plane, on the thread pool when the op has PARALLEL_MIN_ELEMS multiply-adds
(or maxes) or more: the plane's padded input (stage "pad", blocked
or phase-split, see ops/nn_depthwise.py) is built right before use, so it is in cache when read;
then per tile of yb output rows a local accumulator of yb rows x (rows rounded up to whole
vectors), vectorized along the row.  All window taps and the tile's rows and vectors are
unrolled: each tap is one vector load and one multiply-add (or max) per output vector, and the C
compiler reuses a loaded input vector across the taps and rows that read it.  The elementwise
epilogue (bias, activation) takes the tile from the accumulator and stores whole vectors.
"""
from __future__ import annotations

from . import gemm_kernel, template
from .common import (
    PARALLEL_MIN_ELEMS,
    const_extent,
    const_shape,
    divisor_at_most,
    reads_only_at,
    schedule_elementwise_stage,
)
from .cpu import complex_out

ACCUMULATORS = 16     # output vectors in one register tile (fewer with 16 registers)
MAX_UNROLLED_TAPS = 25
LOCAL_PLANE_ELEMS = 32768   # padded planes up to 128 KiB (float32) live on the stack


def _elems(t) -> int:
    n = 1
    for d in const_shape(t):
        n *= d
    return n


def _ext(iv) -> int:
    return const_extent(iv, 0)


def _elementwise_reader(s, out, conv) -> bool:
    """`out` reads the (wider) main stage only at its own index."""
    own = tuple(iv.var for iv in s[out].op.axis)
    return const_shape(out)[:-1] == const_shape(conv)[:-1] and reads_only_at(s, out, conv, own)


def _main_stage(t):
    return t if t.op.reduce_axis else t.op.input_tensors()[0]


@template("window2d.cpu")
def window2d(s, master_outs, outs, target, cfg=None) -> None:
    conv = _main_stage(master_outs[0])
    if any(d == 0 for d in const_shape(master_outs[0])):
        return complex_out(s, master_outs, outs, target, cfg)
    pads = [t for t in conv.op.input_tensors() if t.op.name == "pad"]
    _, _, oh, owp = const_shape(conv)
    lanes = min(max(1, target.simd_lanes(conv.dtype)), owp)   # rows are whole vectors (owp)
    yb = divisor_at_most(oh, max(1, gemm_kernel.accumulators(lanes, ACCUMULATORS) // (owp // lanes)))
    cols = master_outs[0]
    if cols is not conv and cols not in outs:
        s[cols].compute_inline()
    readers = [t for t in outs if t is not conv]
    if len(readers) == 1 and conv not in outs and _elementwise_reader(s, readers[0], conv):
        # the tile goes from the accumulator through the epilogue (or the column cut) to the output
        ost = s[readers[0]]
        s[conv].set_scope("local")
        acc = conv
    else:
        for t in readers:
            schedule_elementwise_stage(s, t, target)
        acc = s.cache_write(conv, "local")
        ost = s[conv]
    n, c, y, x = ost.op.axis
    yo, yi = ost.split(y, factor=yb)
    xo, xi = ost.split(x, factor=lanes)
    ost.vectorize(xi)
    s[acc].compute_at(ost, yo)
    an, ac, ay, ax = s[acc].op.axis
    ry, rx = s[acc].op.reduce_axis
    axo, axi = s[acc].split(ax, factor=lanes)
    s[acc].reorder(ry, rx, ay, axo, axi)
    s[acc].unroll(ay)
    s[acc].unroll(axo)
    s[acc].vectorize(axi)
    if _ext(ry) * _ext(rx) <= MAX_UNROLLED_TAPS:
        s[acc].unroll(ry)
        s[acc].unroll(rx)
    nc = ost.fuse(n, c)
    for pad in pads:
        s[pad].compute_at(ost, nc)
        # the padded planes one output plane reads: its own (depthwise, pooling) or its K taps' (tap_sum)
        if _elems(pad) // max(1, const_shape(pad)[0] * const_shape(conv)[1]) <= LOCAL_PLANE_ELEMS:
            s[pad].set_scope("local")      # on the stack: no allocation per plane
        *_, last = s[pad].op.axis
        if pad.op.tag == "pad_blocks":
            # whole blocks are data or padding: the C compiler copies each block as one vector
            # under one branch.  At stride 1 the block is unrolled (contiguous); a column phase
            # of a strided window reads every sx-th input column, so the block is vectorized and
            # read as a strided vector load (tir/lane_offsets.py `strided_runs`: two loads and a
            # shuffle at stride 2; unrolled, gcc copied it element by element: ResNet's stem
            # pooling, 64 x 112 x 112, 0.178 -> 0.107 ms, ONNX Runtime 0.125-0.139)
            if _ext(s[pad].op.axis[3]) > 1:
                s[pad].vectorize(last)
            else:
                s[pad].unroll(last)
        elif _ext(last) > lanes:
            _, inner = s[pad].split(last, factor=lanes)
            s[pad].vectorize(inner)
        elif _ext(last) > 1:
            s[pad].vectorize(last)
    if target.num_cores > 1 and _elems(master_outs[0]) * _ext(ry) * _ext(rx) >= PARALLEL_MIN_ELEMS:
        ost.parallel(nc)       # a tiny window op runs without a parallel region
