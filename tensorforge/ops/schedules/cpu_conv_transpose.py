"""CPU template `conv_transpose2d_nchwc.cpu` for the phase-decomposed transposed convolution
(ops/nn_conv_transpose_nchwc.py).

Per (image, channel block, tile of yb x xb positions of every output phase (py, px)) a local
accumulator of sy * sx * yb * xb vectors of B channels: the reduction loops (input channel,
kernel row, kernel column) run outside the unrolled tile, so each weight vector is loaded once per
tile and used yb * xb times (the positions of one phase share their taps).  The tile is written
out through the fused epilogue (the NCHW layout change, bias, activation) while it is in
registers.  The tile spans all phases because the epilogue reads the phase stage at
(y % sy, y // sy): bound inference widens a phase index read under a split to every phase, and
with the phases inside the tile that widened region is exactly the tile.
"""
from __future__ import annotations

from ...te.expr import IntImm
from . import template
from .cpu import reads_only_at, schedule_elementwise_stage

ACCUMULATORS = 24     # vector registers given to the accumulator tile (of 32 with AVX-512)


def _ext(iv) -> int:
    e = iv.dom.extent
    return e.value if isinstance(e, IntImm) else 1


def _shape(t) -> tuple:
    return tuple(int(d.value) for d in t.shape)


def _divisor_at_most(n: int, limit: int) -> int:
    for d in range(max(1, min(n, limit)), 0, -1):
        if n % d == 0:
            return d
    return 1


def _nchw_reader(s, out, nchwc) -> bool:
    """`out` is NCHW and reads the NCHW[B]c tensor only at (n, f // B, y, x, f % B)."""
    n, fb, h, w, b = _shape(nchwc)
    if len(s[out].op.axis) != 4 or _shape(out) != (n, fb * b, h, w):
        return False
    i, f, y, x = (iv.var for iv in s[out].op.axis)
    return reads_only_at(s, out, nchwc, (i, f // b, y, x, f % b))


@template("conv_transpose2d_nchwc.cpu")
def conv_transpose2d_nchwc(s, master_outs, outs, target, cfg=None) -> None:
    out5 = master_outs[0]
    phases = out5.op.input_tensors()[0]
    for t in phases.op.input_tensors():
        if t.op.name == "pad":
            schedule_elementwise_stage(s, t, target)
    _, _, sy, sx, yq_n, xq_n, block = _shape(phases)
    lanes = max(1, target.simd_lanes(phases.dtype))
    vectors = max(1, block // lanes)
    per_position = sy * sx * vectors        # a tile holds every phase of yb x xb positions
    xb = _divisor_at_most(xq_n, max(1, ACCUMULATORS // per_position))
    yb = _divisor_at_most(yq_n, max(1, ACCUMULATORS // (per_position * xb)))
    epilogue = [t for t in outs if t is not out5]
    if len(epilogue) == 1 and out5 not in outs and _nchw_reader(s, epilogue[0], out5):
        # the NCHW epilogue takes the tile from registers
        s[out5].compute_inline()
        ost = s[epilogue[0]]
        n, f, y, x = ost.op.axis
        fo, fi = ost.split(f, factor=block)
        vector_out = False
    else:
        for t in epilogue:
            schedule_elementwise_stage(s, t, target)
        ost = s[out5]
        n, fo, y, x, fi = ost.op.axis
        vector_out = True
    yq, py = ost.split(y, factor=sy)
    xq, px = ost.split(x, factor=sx)
    yqo, yqi = ost.split(yq, factor=yb)
    xqo, xqi = ost.split(xq, factor=xb)
    if vector_out:
        ost.reorder(n, fo, yqo, xqo, yqi, py, xqi, px, fi)
        fio, fii = ost.split(fi, factor=lanes)
        ost.vectorize(fii)
    else:
        ost.reorder(n, fo, yqo, xqo, fi, yqi, py, xqi, px)
    # attached at the tile loop with the phases inside it, the region is a dense block of the
    # phase stage: (sy, sx, yb, xb, B)
    s[phases].set_scope("local")
    s[phases].compute_at(ost, xqo)
    an, afo, apy, apx, ayq, axq, afi = s[phases].op.axis
    rc, ry, rx = s[phases].op.reduce_axis
    afo_, afi_ = s[phases].split(afi, factor=lanes)   # one machine vector per accumulator
    s[phases].reorder(rc, ry, rx, apy, apx, ayq, axq, afo_, afi_)
    for ax in (apy, apx, ayq, axq, afo_):
        s[phases].unroll(ax)
    s[phases].vectorize(afi_)
    if _ext(ry) * _ext(rx) <= 4:
        # the taps of one input channel together: the tile's input values are loaded once
        s[phases].unroll(ry)
        s[phases].unroll(rx)
    if target.num_cores > 1:
        ost.parallel(ost.fuse(n, fo, yqo))
