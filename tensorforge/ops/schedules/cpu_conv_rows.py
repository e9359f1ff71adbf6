"""Register tiles of several output rows for the convolutions that stay in NCHW on the CPU
(`alter_layout.rows_conv`: a few filters per group over output rows of two vectors or more).

The generic complex schedule computes such a conv one output row at a time: a row of 56
positions is 4 accumulators, each a chain of dependent multiply-adds as long as the reduction
(17 channels x 64 taps: 1088), so the FMA latency, not the units, set the pace.  Here a tile of
`rows` output rows of one filter is computed together: rows x vectors accumulators, the
reduction (input channel, kernel row, kernel column) outside the unrolled tile, so each weight is
broadcast once per tile and every accumulator advances on each step.  The padded input (stage
"pad") is built before, as rows on the thread pool; the elementwise epilogue (bias, activation)
takes the tile straight from the accumulators.  A row height with no divisor near the tile takes
full tiles and a shorter last one.

Measured at one thread, ONNX Runtime 1.32 in the same run (benchmarks/shape_sweep.py's cases):
17 -> 1 channels, a 64x1 kernel over 512x56: 1.02 -> 0.32 ms (ONNX Runtime 0.47); 4 groups of
68 -> 4, 64x1 at stride 4: 1.47 -> 0.66 ms (4.1); 4 groups of 384 -> 4, 7x5 on 56x56: 0.61 ->
0.45 ms (2.9); 8 -> 1, 3x3 on 300x56: 0.050 -> 0.037 ms (0.24).  Over the 29 cases of seeds
47-75 that stay in NCHW with few filters, the geometric mean went from 0.54 to 0.51 of ONNX
Runtime's time.  A row of more vectors than half the tile (224 positions) keeps enough
multiply-adds in flight alone and stays on the generic schedule.
"""
from __future__ import annotations

from . import gemm_kernel
from .common import const_shape, divisor_at_most, reads_only_at, schedule_rows

ACCUMULATORS = 16     # output vectors in one tile (fewer with 16 registers)
MAX_ROWS = 8


def conv_rows(s, master_outs, outs, target) -> bool:
    """Schedule the NCHW float32 conv `master_outs[0]` (and its elementwise epilogue) in tiles
    of output rows; False (nothing scheduled) when the group is not of that form."""
    conv = master_outs[0]
    if conv.op.tag != "conv2d" or conv.dtype != "float32" or len(conv.op.axis) != 4 \
            or len(conv.op.reduce_axis) != 3:
        return False
    shape = const_shape(conv)
    lanes = max(1, target.simd_lanes("float32"))
    _, _, oh, ow = shape
    vectors = -(-ow // lanes)
    budget = gemm_kernel.accumulators(lanes, ACCUMULATORS)
    # a row of more vectors than half the tile keeps enough multiply-adds in flight alone
    if lanes < 4 or ow < 2 * lanes or oh < 2 or 2 * vectors > budget:
        return False
    readers = [t for t in outs if t is not conv]
    own = lambda t: tuple(iv.var for iv in s[t].op.axis)  # noqa: E731
    if len(readers) > 1 or any(const_shape(t) != shape or not reads_only_at(s, t, conv, own(t)) for t in readers):
        return False
    for t in conv.op.input_tensors():
        if t.op.name == "pad":
            schedule_rows(s, t, target)
    want = max(1, min(MAX_ROWS, oh, budget // vectors))
    rows = divisor_at_most(oh, want)
    if 2 * rows <= want:
        rows = want                                  # full tiles and a shorter last one
    if readers:
        s[conv].set_scope("local")
        acc, ost = conv, s[readers[0]]
    else:
        acc, ost = s.cache_write(conv, "local"), s[conv]
    n, f, y, x = ost.op.axis
    yo, yi = ost.split(y, factor=rows)
    xo, xi = ost.split(x, factor=lanes)
    ost.reorder(n, f, yo, yi, xo, xi)
    ost.vectorize(xi)
    tiles = ost.fuse(n, f, yo)
    s[acc].compute_at(ost, tiles)
    *_, ay, ax = s[acc].op.axis
    axo, axi = s[acc].split(ax, factor=lanes)
    rc, ry, rx = s[acc].op.reduce_axis
    s[acc].reorder(rc, ry, rx, ay, axo, axi)
    s[acc].unroll(ay)
    s[acc].unroll(axo)
    s[acc].vectorize(axi)
    if target.num_cores > 1:
        ost.parallel(tiles)
    return True
