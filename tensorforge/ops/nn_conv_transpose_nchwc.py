"""conv_transpose2d in the blocked output layout NCHW[x]c, decomposed by output phase, with the
weights packed as OIHW[x]o.

A transposed convolution with stride s scatters input i to outputs i*s + k - pad.  Gathered per
output y instead, only the kernel taps k = (y + pad) % s + s*t (t = 0 .. K/s - 1) meet an input,
at i = (y + pad) // s - t:

    out[n, fo, y, x, fi] = sum_{c, ty, tx} xpad[n, c, (y + pt) // sy - ty + TY - 1, (x + pl) // sx - tx + TX - 1]
                                          * wp[fo, (y + pt) % sy, (x + pl) % sx, c, ty, tx, fi]

so no multiplication by the zeros that the "spread the input, then convolve" form
(ops/nn_conv_transpose.py) spends s*s times too many products on.  `xpad` (stage "pad") is the
input with TY - 1 rows and TX - 1 columns of zeros in front and zeros past its end.  The packed
weight is (M / B, sy, sx, C, TY, TX, B) with wp[fo, qy, qx, c, ty, tx, fi] = w[c, fo*B + fi,
qy + sy*ty, qx + sx*tx] (taps past the kernel, where the stride does not divide it, are zeros):
the taps one output phase reads are one contiguous block, in the order a phase's reduction
(input channel, kernel row, kernel column) walks them, so a thread computing that phase streams
its weights from memory front to back.  (A layer's weights are often larger than the caches: in
the (M / B, C, KH, KW, B) order a phase read a quarter of the cache lines of each channel's taps,
scattered, and a DCGAN layer with 8 MB of weights ran at half the speed when they came from
memory.)  The graph pass `alter_layout_conv_transpose` introduces the op (then `nchwc_to_nchw`)
for float32 transposed convolutions with constant weights, groups 1, dilation 1 and non-negative
padding.

TE: stage "pad" (xpad); the main stage "conv_transpose2d_phases" (N, M / B, sy, sx, OH / sy, OW / sx, B),
the output split by phase so that a register tile of one phase is a dense block of its own index
space; the output "conv_transpose2d_nchwc" re-indexes it (rounded-up rows and columns of the
phase stage are computed and not read).  With a block of fewer than NARROW_BLOCK channels (an
RGB output layer) the main stage is (N, M / B, sy, sx, B, OH / sy, OW / sx), tagged
"conv_transpose2d_phases_narrow": a schedule then vectorizes along the positions of a row.

Where a stride does not divide the kernel (3x3 with stride 2, a U-Net decoder's up-sampling; 1x3
with stride 4 along the rows) the phases reach different numbers of taps, ceil((K - r) / s) for
the phase whose taps start at r, and a shared stage would multiply every phase by the zeros that
pad it to the most (16 products per 2x2 output block of the 3x3 kernel, where 9 are needed; whole
phases of zeros with the 1x3).  Then each phase that some tap reaches is a stage of its own,
"conv_transpose2d_phase<py>_<px>" (N, M / B, OH / sy, OW / sx, B), tagged like the shared one,
reducing over exactly its taps; a copy stage "conv_transpose2d_phases" (tagged
"conv_transpose2d_gathered") sets them side by side in the shared stage's shape, zeros for the
phases no tap reaches, and the output reads it as before.  (The output choosing among the stages
itself, per element, cost more than the copy: a 1x7 stride-4 layer ran 1.5x slower.)
"""
from __future__ import annotations

import itertools

import numpy as np

from .. import te
from .common import const_shape
from .nn_conv_transpose import conv_transpose_reference
from .nn_window import pad_stage
from .registry import COMPLEX, OpError, TensorType, op

NARROW_BLOCK = 8    # blocks of fewer channels keep the positions of a row innermost instead
ROW_VECTOR = 16     # ... in rows of whole vectors of this many positions (narrow_row)


def pack_transpose_weight(w: np.ndarray, block: int, strides) -> np.ndarray:
    """(C, M, KH, KW) -> (M / block, sy, sx, C, KH' / sy, KW' / sx, block), KH' and KW' the kernel
    zero-padded to multiples of the strides: the taps of each output phase (qy, qx) together."""
    c, m, kh, kw = w.shape
    sy, sx = strides
    ty_n, tx_n = -(-kh // sy), -(-kw // sx)
    padded = np.zeros((c, m, ty_n * sy, tx_n * sx), dtype=w.dtype)
    padded[:, :, :kh, :kw] = w
    # (c, fo, fi, ty, qy, tx, qx) -> (fo, qy, qx, c, ty, tx, fi)
    split = padded.reshape(c, m // block, block, ty_n, sy, tx_n, sx)
    return np.ascontiguousarray(split.transpose(1, 4, 6, 0, 3, 5, 2))


def unpack_transpose_weight(wp: np.ndarray, kernel) -> np.ndarray:
    """The inverse of pack_transpose_weight: (C, M, KH, KW) for the given kernel size."""
    fb, sy, sx, c, ty_n, tx_n, b = wp.shape
    split = wp.transpose(3, 0, 6, 4, 1, 5, 2)       # (c, fo, fi, ty, qy, tx, qx)
    padded = split.reshape(c, fb * b, ty_n * sy, tx_n * sx)
    return np.ascontiguousarray(padded[:, :, :kernel[0], :kernel[1]])


def _check(data, wp, strides, padding, out_hw):
    if len(data) != 4 or len(wp) != 7 or data[1] != wp[3]:
        raise OpError(f"conv_transpose2d_nchwc: data {tuple(data)} and packed weight {tuple(wp)} disagree")
    if len(strides) != 2 or tuple(strides) != tuple(wp[1:3]) or any(s < 1 for s in strides):
        raise OpError(f"conv_transpose2d_nchwc: strides {tuple(strides)} must be the packed weight's phases "
                      f"{tuple(wp[1:3])}")
    if len(padding) != 4 or any(p < 0 for p in padding):
        raise OpError(f"conv_transpose2d_nchwc: padding must be 4 non-negative integers, got {tuple(padding)}")
    if len(out_hw) != 2 or any(o < 1 for o in out_hw):
        raise OpError(f"conv_transpose2d_nchwc: bad output size {tuple(out_hw)}")


@op("conv_transpose2d_nchwc", COMPLEX, schedule={"cpu": "conv_transpose2d_nchwc.cpu"},
    attr_defaults={"padding": (0, 0, 0, 0)})
class conv_transpose2d_nchwc:
    @staticmethod
    def infer(data: TensorType, wp: TensorType, strides=(1, 1), out_hw=(1, 1), kernel=(1, 1),
              padding=(0, 0, 0, 0)):
        _check(tuple(data.shape), tuple(wp.shape), strides, padding, out_hw)
        return TensorType((data.shape[0], wp.shape[0], out_hw[0], out_hw[1], wp.shape[6]), data.dtype)

    @staticmethod
    def compute(data: te.Tensor, wp: te.Tensor, strides=(1, 1), out_hw=(1, 1), kernel=(1, 1),
                padding=(0, 0, 0, 0)):
        n, c, h, w = const_shape(data)
        fb, sy, sx, _, ty_n, tx_n, b = const_shape(wp)
        _check((n, c, h, w), (fb, sy, sx, c, ty_n, tx_n, b), strides, padding, out_hw)
        oh, ow = out_hw
        pt, pl = padding[0], padding[1]
        yq_n, xq_n = -(-oh // sy), -(-ow // sx)
        narrow = b < NARROW_BLOCK
        if narrow:
            xq_n = narrow_row(xq_n)
        rows = yq_n - 1 + (sy - 1 + pt) // sy + ty_n
        cols = xq_n - 1 + (sx - 1 + pl) // sx + tx_n
        xpad = pad_stage(data, (ty_n - 1, tx_n - 1), (rows, cols))
        # output (y, x) = (yq * sy + py, xq * sx + px): one phase (py, px) reads one set of taps
        def tap_sum(i, fo, py, px, yq, xq, fi, taps=(ty_n, tx_n)):
            rc = te.reduce_axis((0, c), name="rc")
            ry = te.reduce_axis((0, taps[0]), name="ry")
            rx = te.reduce_axis((0, taps[1]), name="rx")
            return te.sum(xpad[i, rc, yq + (py + pt) // sy - ry + ty_n - 1, xq + (px + pl) // sx - rx + tx_n - 1]
                          * wp[fo, (py + pt) % sy, (px + pl) % sx, rc, ry, rx, fi], axis=[rc, ry, rx])

        taps_y, taps_x = (phase_taps(k, st, p) for k, st, p in zip(kernel, strides, (pt, pl)))
        shape = (n, fb, sy, sx, b, yq_n, xq_n) if narrow else (n, fb, sy, sx, yq_n, xq_n, b)
        if len(set(taps_y)) > 1 or len(set(taps_x)) > 1:
            phases = _exact_phases(tap_sum, shape, (taps_y, taps_x), narrow)
        elif narrow:
            phases = te.compute(shape, lambda i, fo, py, px, fi, yq, xq: tap_sum(i, fo, py, px, yq, xq, fi),
                                name="conv_transpose2d_phases", tag="conv_transpose2d_phases_narrow")
        else:
            phases = te.compute(shape, lambda i, fo, py, px, yq, xq, fi: tap_sum(i, fo, py, px, yq, xq, fi),
                                name="conv_transpose2d_phases", tag="conv_transpose2d_phases")
        if narrow:
            at = lambda i, fo, y, x, fi: phases[i, fo, y % sy, x % sx, fi, y // sy, x // sx]  # noqa: E731
        else:
            at = lambda i, fo, y, x, fi: phases[i, fo, y % sy, x % sx, y // sy, x // sx, fi]  # noqa: E731
        return te.compute((n, fb, oh, ow, b), at, name="conv_transpose2d_nchwc", tag="conv_transpose2d_nchwc")

    @staticmethod
    def reference(data, wp, strides=(1, 1), out_hw=(1, 1), kernel=(1, 1), padding=(0, 0, 0, 0)):
        w = unpack_transpose_weight(wp, kernel)
        sy, sx = strides
        h, wd = data.shape[2:]
        # the output padding that gives out_hw (it may exceed the stride: extra rows see no input)
        extra = [out_hw[0] - (sy * (h - 1) + kernel[0] - padding[0] - padding[2]),
                 out_hw[1] - (sx * (wd - 1) + kernel[1] - padding[1] - padding[3])]
        pads = (padding[0], padding[1], padding[2] - extra[0], padding[3] - extra[1])
        out = conv_transpose_reference(data, w, strides, pads, (0, 0), (1, 1), 1)
        n, f, oh, ow = out.shape
        b = wp.shape[6]
        return np.ascontiguousarray(out.reshape(n, f // b, b, oh, ow).transpose(0, 1, 3, 4, 2))


def narrow_row(positions: int) -> int:
    """The phase row length a narrow block computes: `positions` rounded up to a power of two
    below ROW_VECTOR and to a multiple of ROW_VECTOR above, so that the row is whole vectors
    (the columns past the output are computed and not read).  A row of 14 positions ran as a
    C loop of 14 lanes on an accumulator in memory (a 24 -> 1 channel layer 2.4x ONNX Runtime)."""
    if positions >= ROW_VECTOR:
        return -(-positions // ROW_VECTOR) * ROW_VECTOR
    return 1 << (positions - 1).bit_length()


def phase_taps(kernel: int, stride: int, pad: int) -> list[int]:
    """Per output phase q of one axis, how many taps reach it: those k = r + s t < K with
    r = (q + pad) % s."""
    return [max(0, -(-(kernel - (q + pad) % stride) // stride)) for q in range(stride)]


def _exact_phases(tap_sum, shape: tuple, taps: tuple, narrow: bool) -> te.Tensor:
    """The phase stage of `shape` (the one-stage form's) as a copy of one stage per output phase
    that some tap reaches, each reducing over exactly its taps (`tap_sum` with the phase's tap
    counts): a 3x3 kernel with stride 2 has phases of 2x2, 2x1, 1x2 and 1x1 taps, a 1x3 kernel
    with stride 4 along its rows has rows of phases with none, which the copy fills with zeros."""
    n, fb, sy, sx = shape[:4]
    plane = (n, fb, *shape[4:])
    suffix = "_narrow" if narrow else ""

    def phase_stage(py: int, px: int) -> te.Tensor:
        counts = (taps[0][py], taps[1][px])
        if narrow:
            body = lambda i, fo, fi, yq, xq: tap_sum(i, fo, py, px, yq, xq, fi, counts)  # noqa: E731
        else:
            body = lambda i, fo, yq, xq, fi: tap_sum(i, fo, py, px, yq, xq, fi, counts)  # noqa: E731
        return te.compute(plane, body, name=f"conv_transpose2d_phase{py}_{px}",
                          tag="conv_transpose2d_phase" + suffix)

    stages = {(py, px): phase_stage(py, px)
              for py, px in itertools.product(range(sy), range(sx)) if taps[0][py] and taps[1][px]}

    def gather(i, fo, py, px, u, v, w):
        value = te.const(0.0, next(iter(stages.values())).dtype)
        for (qy, qx), st in stages.items():
            value = te.if_then_else(te.all(py == qy, px == qx), st[i, fo, u, v, w], value)
        return value

    # the phases side by side again (a copy, vectorized along each stage's innermost axis): the
    # output then reads them by arithmetic on its index instead of choosing among the stages per
    # element
    return te.compute(shape, gather, name="conv_transpose2d_phases", tag="conv_transpose2d_gathered")
