"""tap_sum: the second half of a convolution computed as one product per kernel tap.

A conv with few filters and many taps (a depth or mask head, an audio decoder's output layer)
can run as a GEMM and a sum of shifted planes: a 1x1 conv gives, per filter m and tap k, the
plane p[m * K + k] = sum over input channels of W[m, :, k] * x (all M * K products at the GEMM's
speed, no lane of a vector spent on a missing filter), and then

    out[n, m, y, x] = sum over taps (ky, kx) of p[n, m * K + ky * KW + kx, y + ky * dy - pt, x + kx * dx - pl]

with the planes' values outside them zero (graph/passes/conv_as_tap_planes.py builds the pair).
Stride 1 only.  The planes are padded by the stage "pad" (nn_depthwise.padded_plane), and the
main stage, named and tagged "tap_sum", computes rows rounded up to whole vectors as the
depthwise conv does, so window2d.cpu schedules both: per output plane its K padded planes are
built right before use, then every tap is one vector load and one add per output vector.
Pattern complex-out-fusable: the bias and activation fuse after it.
"""
from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

from .. import te
from .common import const_shape
from .nn_depthwise import padded_plane, row_width
from .nn_window import np_pad, out_spatial, padded_extent, spatial_attrs
from .registry import COMPLEX, OpError, TensorType, op


def _geometry(shape: Sequence[int], kernel: Sequence[int], padding, dilations) -> tuple:
    """(taps, padding, dilations, (oh, ow)) of planes `shape` (N, M * K, H, W), checked."""
    kernel = tuple(int(k) for k in kernel)
    if len(shape) != 4 or len(kernel) != 2 or min(kernel) < 1:
        raise OpError(f"tap_sum: needs planes (N, M * K, H, W) and a kernel (KH, KW), got {tuple(shape)} "
                      f"and {kernel}")
    _, p, d = spatial_attrs("tap_sum", 2, None, padding, dilations)
    if min(p) < 0:
        raise OpError(f"tap_sum: padding must not be negative, got {p}")
    taps = kernel[0] * kernel[1]
    if shape[1] % taps:
        raise OpError(f"tap_sum: {shape[1]} planes are not a whole number of filters of {taps} taps")
    return taps, p, d, out_spatial("tap_sum", tuple(shape[2:]), kernel, (1, 1), p, d)


@op("tap_sum", COMPLEX, schedule={"cpu": "window2d.cpu"}, attr_defaults={"padding": (0, 0, 0, 0), "dilations": (1, 1)})
class tap_sum:
    @staticmethod
    def infer(planes: TensorType, kernel: Sequence[int], padding=(0, 0, 0, 0), dilations=(1, 1)):
        taps, _, _, (oh, ow) = _geometry(tuple(planes.shape), kernel, padding, dilations)
        return TensorType((planes.shape[0], planes.shape[1] // taps, oh, ow), planes.dtype)

    @staticmethod
    def compute(planes: te.Tensor, kernel: Sequence[int], padding=(0, 0, 0, 0), dilations=(1, 1)):
        n, mk, h, w = const_shape(planes)
        kh, kw = (int(k) for k in kernel)
        taps, p, (dy, dx), (oh, ow) = _geometry((n, mk, h, w), (kh, kw), padding, dilations)
        rows, cols = padded_extent((h, w), (oh, ow), (kh, kw), (1, 1), (dy, dx))
        owp = row_width(ow)
        xpad, column = padded_plane(planes, p[0], p[1], rows, cols, 1, owp, (kw - 1) * dx)
        ry = te.reduce_axis((0, kh), name="ry")
        rx = te.reduce_axis((0, kw), name="rx")
        full = te.compute(
            (n, mk // taps, oh, owp),
            lambda i, m, y, x: te.sum(xpad[(i, m * taps + ry * kw + rx, y + ry * dy, *column(x, rx * dx))],
                                      axis=[ry, rx]),
            name="tap_sum", tag="tap_sum")
        if owp == ow:
            return full
        return te.compute((n, mk // taps, oh, ow), lambda *i: full[i], name="tap_sum_cols")

    @staticmethod
    def reference(planes, kernel, padding=(0, 0, 0, 0), dilations=(1, 1)):
        kh, kw = (int(k) for k in kernel)
        taps, p, d, (oh, ow) = _geometry(planes.shape, (kh, kw), padding, dilations)
        n, mk, h, w = planes.shape
        extent = padded_extent((h, w), (oh, ow), (kh, kw), (1, 1), d)
        padded = np_pad(planes, p[:2], extent, 0)
        out = np.zeros((n, mk // taps, oh, ow), planes.dtype)
        for ky, kx in itertools.product(range(kh), range(kw)):
            y0, x0 = ky * d[0], kx * d[1]
            out += padded[:, ky * kw + kx::taps, y0:y0 + oh, x0:x0 + ow]
        return out
