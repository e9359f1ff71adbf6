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

Why not take the tile straight into the epilogue, as the conv2d template does: the epilogue reads
the phase stage at (y % sy, y // sy), and bound inference widens a phase index read under a split
of y to every phase, so a tile attached there would hold all phases (four times the weights per
tile, a quarter of the reuse).  Measured on DCGAN (1 thread): all-phase fused tiles 3.7 ms,
per-phase whole stage 2.7 ms.
"""
from __future__ import annotations

from ...te.expr import IntImm
from . import template
from .cpu import PARALLEL_MIN_ELEMS

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


def schedule_rows(s, t, target) -> None:
    """A whole stage as vector loops along its rows: the outer axes fused (on the thread pool when
    large), the last axis split by the vector width (no index division per element, as a loop
    over the flattened tensor would need)."""
    st = s[t]
    *outer, last = st.op.axis
    lanes = max(1, target.simd_lanes(t.dtype))
    if _ext(last) >= lanes:
        _, inner = st.split(last, factor=lanes)
        st.vectorize(inner)
    if outer:
        fused = st.fuse(*outer) if len(outer) > 1 else outer[0]
        size = 1
        for d in _shape(t):
            size *= d
        if target.num_cores > 1 and size >= PARALLEL_MIN_ELEMS:
            st.parallel(fused)


@template("conv_transpose2d_nchwc.cpu")
def conv_transpose2d_nchwc(s, master_outs, outs, target, cfg=None) -> None:
    out5 = master_outs[0]
    phases = out5.op.input_tensors()[0]
    for t in phases.op.input_tensors():
        if t.op.name == "pad":
            schedule_rows(s, t, target)
    if out5 not in outs:
        s[out5].compute_inline()
    for t in outs:
        schedule_rows(s, t, target)
    lanes = max(1, target.simd_lanes(phases.dtype))
    acc = s.cache_write(phases, "local")
    pst = s[phases]
    rc, ry, rx = s[acc].op.reduce_axis
    if phases.op.tag.endswith("_narrow"):
        n, fo, py, px, fi, yq, xq = pst.op.axis
        _, _, _, _, block, yq_n, xq_n = _shape(phases)
        width = min(lanes, xq_n)
        xv = max(1, min(-(-xq_n // width), ACCUMULATORS // block))
        yb = _divisor_at_most(yq_n, max(1, ACCUMULATORS // (block * xv)))
        yqo, yqi = pst.split(yq, factor=yb)
        xqo, xqi = pst.split(xq, factor=xv * width)
        pst.reorder(n, fo, py, px, yqo, xqo, fi, yqi, xqi)
        _, vec = pst.split(xqi, factor=width)
        s[acc].compute_at(pst, xqo)
        *_, afi, ayq, axq = s[acc].op.axis
        axo, axi = s[acc].split(axq, factor=width)
        s[acc].reorder(rc, ry, rx, afi, ayq, axo, axi)
        unrolled, vector = (afi, ayq, axo), axi
    else:
        n, fo, py, px, yq, xq, fi = pst.op.axis
        _, _, _, _, yq_n, xq_n, block = _shape(phases)
        per_position = max(1, block // lanes)
        xb = _divisor_at_most(xq_n, max(1, ACCUMULATORS // per_position))
        yb = _divisor_at_most(yq_n, max(1, ACCUMULATORS // (per_position * xb)))
        yqo, yqi = pst.split(yq, factor=yb)
        xqo, xqi = pst.split(xq, factor=xb)
        pst.reorder(n, fo, py, px, yqo, xqo, yqi, xqi, fi)
        _, vec = pst.split(fi, factor=lanes)
        s[acc].compute_at(pst, xqo)
        *_, ayq, axq, afi = s[acc].op.axis
        afo_, afi_ = s[acc].split(afi, factor=lanes)   # one machine vector per accumulator
        s[acc].reorder(rc, ry, rx, ayq, axq, afo_, afi_)
        unrolled, vector = (ayq, axq, afo_), afi_
    pst.vectorize(vec)
    for ax in unrolled:
        s[acc].unroll(ax)
    s[acc].vectorize(vector)
    if target.num_cores > 1:
        pst.parallel(pst.fuse(n, fo, py, px))
