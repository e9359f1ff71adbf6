"""Kernel taps that only ever read padding are dropped from a convolution.

Along one spatial axis with input size I, output size O, stride s, dilation d and padding pb in
front, output o reads input o*s + k*d - pb through tap k.  A tap for which that index lies outside
[0, I) for every o multiplies zeros only.  Such taps occur where a kernel is large next to the data
it slides over: a 5x5 kernel on data of width 1 (a 1-D signal stored as (N, C, L, 1), or a
stride-1 transposed conv of one, after conv_transpose_as_conv) reads data through its centre
column only; a 3x3 conv on a 1x1 map, a dilated conv whose dilation exceeds the map.  The leading
and trailing runs of such taps are cut off,

    conv(x, W, padding (pb, pe))  ==  conv(x, W[..., k0 : k1 + 1, ...], padding (pb - k0 d, pe - (K - 1 - k1) d))

with k0 and k1 the first and last tap that meets data; every output keeps its value (the same
products, less the zero ones).  The trimmed conv then costs what its data needs, and one whose
kernel is left one column wide on width-1 data runs along rows (alter_layout_column_conv).  The
rewrite applies to conv1d, conv2d and conv3d with a constant weight, when the trimmed padding is
not negative and the output shape is unchanged.

Where every tap meets data for some outputs but most outputs have taps that read padding (an
atrous conv whose dilation is a large share of the map: DeepLab's ASPP at rates 12 and 18 on a
32x32 map, padding = rate), a float conv2d is cut into bands.  Along each axis the outputs fall
into runs with the same live taps (at rate 18 on 32 rows: rows 0-13 read taps 1-2, rows 14-17 tap
1, rows 18-31 taps 0-1); each (row run, column run) region is a conv of its live taps only, on the
slice of the input they read, without padding, and the regions are concatenated back, columns
within a row run, then the row runs.  Only where at most BAND_MAX_LIVE of the products meet data
(at rate 18: 39%, at rate 12: 56%; a 3x3 conv with padding 1 on 32x32: 96%, left alone) and each
axis has at most MAX_BANDS runs.
alter_layout_propagate keeps the slices, the region convs and the concatenations blocked.
"""
from __future__ import annotations

import numpy as np

from ...ops.nn_window import out_spatial
from ...target import Target
from ..ir import Graph, Node, Value
from .rewrite import constant_weight_window, rewrite_nodes

_RANKS = {"conv1d": 1, "conv2d": 2, "conv3d": 3}


# the largest share of a conv's products that may meet data for it to be cut into bands, and the
# most runs per axis (a leading edge, the middle, a trailing edge: a strided tall kernel whose
# every output has its own live taps, a pitch estimator's 64x1 at stride 4, is left whole)
BAND_MAX_LIVE = 0.7
MAX_BANDS = 3


def trim_conv_taps(graph: Graph, target: Target) -> Graph:
    return rewrite_nodes(graph, _rewrite)


def tap_bands(size: int, out: int, kernel: int, stride: int, dilation: int,
              pad_begin: int) -> list[tuple[int, int, int, int]] | None:
    """Runs of consecutive outputs of one axis that read the input through the same taps, as
    (first output, end output, first live tap, last live tap); None if an output reads padding
    only.  The live taps of an output are consecutive: its reads grow with the tap."""
    reads = np.arange(out)[:, None] * stride + np.arange(kernel)[None, :] * dilation - pad_begin
    live = (reads >= 0) & (reads < size)
    bands: list[tuple[int, int, int, int]] = []
    for o in range(out):
        taps = np.flatnonzero(live[o])
        if not taps.size:
            return None
        first, last = int(taps[0]), int(taps[-1])
        if bands and bands[-1][2:] == (first, last):
            bands[-1] = (bands[-1][0], o + 1, first, last)
        else:
            bands.append((o, o + 1, first, last))
    return bands


def _live_share(bands: list, out: int, kernel: int) -> float:
    return sum((end - start) * (last - first + 1) for start, end, first, last in bands) / (out * kernel)


def _banded(n: Node, params: dict) -> list[Node] | None:
    """The float conv2d `n` as convs of its live taps over the regions of `tap_bands`, or None."""
    window = constant_weight_window(n, params, {"conv2d": 2})
    if window is None:
        return None
    _, x, w, y, strides, dilations, pads = window
    if not x.dtype.startswith("float") or x.ndim != 4:
        return None
    axes = [tap_bands(x.shape[2 + i], y.shape[2 + i], w.shape[2 + i], strides[i], dilations[i], pads[i])
            for i in range(2)]
    if axes[0] is None or axes[1] is None or (len(axes[0]) == 1 and len(axes[1]) == 1) \
            or max(len(axes[0]), len(axes[1])) > MAX_BANDS:
        return None
    if _live_share(axes[0], y.shape[2], w.shape[2]) * _live_share(axes[1], y.shape[3], w.shape[3]) > BAND_MAX_LIVE:
        return None
    nodes: list[Node] = []
    weights: dict = {}
    rows = []
    conv_attrs = dict(n.attrs, padding=(0, 0, 0, 0))
    for i, (y0, y1, ky0, ky1) in enumerate(axes[0]):
        r0 = y0 * strides[0] + ky0 * dilations[0] - pads[0]
        r1 = (y1 - 1) * strides[0] + ky1 * dilations[0] - pads[0] + 1
        cols = []
        for j, (x0, x1, kx0, kx1) in enumerate(axes[1]):
            c0 = x0 * strides[1] + kx0 * dilations[1] - pads[1]
            c1 = (x1 - 1) * strides[1] + kx1 * dilations[1] - pads[1] + 1
            taps = (ky0, ky1, kx0, kx1)
            if taps not in weights:
                arr = np.ascontiguousarray(params[w][:, :, ky0:ky1 + 1, kx0:kx1 + 1])
                weights[taps] = Value(f"{w.name}_taps{ky0}_{ky1}_{kx0}_{kx1}", arr.shape, w.dtype)
                params[weights[taps]] = arr
            part = x
            if (r0, r1, c0, c1) != (0, x.shape[2], 0, x.shape[3]):
                part = Value(f"{y.name}_in{i}_{j}", (x.shape[0], x.shape[1], r1 - r0, c1 - c0), x.dtype)
                nodes.append(Node("slice", (x,), (part,), {"starts": (r0, c0), "ends": (r1, c1), "axes": (2, 3)},
                                  part.name))
            region = Value(f"{y.name}_band{i}_{j}", (y.shape[0], y.shape[1], y1 - y0, x1 - x0), y.dtype)
            nodes.append(Node("conv2d", (part, weights[taps]), (region,), conv_attrs, region.name))
            cols.append(region)
        if len(cols) == 1:
            rows.append(cols[0])
            continue
        row = y if len(axes[0]) == 1 else Value(f"{y.name}_band{i}", (y.shape[0], y.shape[1], y1 - y0, y.shape[3]),
                                                 y.dtype)
        nodes.append(Node("concat", tuple(cols), (row,), {"axis": 3}, row.name))
        rows.append(row)
    if len(rows) > 1:           # (one row run has several column runs: its concat wrote y)
        nodes.append(Node("concat", tuple(rows), (y,), {"axis": 2}, n.name))
    return nodes


def live_taps(size: int, out: int, kernel: int, stride: int, dilation: int, pad_begin: int) -> tuple[int, int] | None:
    """(first, last) tap of one axis that reads the input for some output, or None if none does."""
    reads = np.arange(out)[:, None] * stride + np.arange(kernel)[None, :] * dilation - pad_begin
    live = np.flatnonzero(((reads >= 0) & (reads < size)).any(axis=0))
    return (int(live[0]), int(live[-1])) if live.size else None


def _rewrite(n: Node, params: dict) -> list[Node] | None:
    trimmed = _trimmed(n, params)
    banded = _banded(trimmed[0] if trimmed else n, params)
    return banded if banded is not None else trimmed


def _trimmed(n: Node, params: dict) -> list[Node] | None:
    window = constant_weight_window(n, params, _RANKS)
    if window is None:
        return None
    rank, x, w, y, strides, dilations, padding = window
    pads = list(padding)
    kernel = w.shape[2:]
    keep = []
    for i in range(rank):
        taps = live_taps(x.shape[2 + i], y.shape[2 + i], kernel[i], strides[i], dilations[i], pads[i])
        if taps is None:         # every tap reads padding: the conv is zero; leave it to the general path
            return None
        first, last = taps
        pads[i] -= first * dilations[i]
        pads[rank + i] -= (kernel[i] - 1 - last) * dilations[i]
        keep.append(slice(first, last + 1))
    if all(s.stop - s.start == k for s, k in zip(keep, kernel)) or min(pads) < 0:
        return None
    weight = np.ascontiguousarray(params[w][(slice(None), slice(None)) + tuple(keep)])
    if out_spatial(n.op, x.shape[2:], weight.shape[2:], strides, pads, dilations) != tuple(y.shape[2:]):
        return None
    trimmed = Value(f"{w.name}_taps", weight.shape, w.dtype)
    params[trimmed] = weight
    return [Node(n.op, (x, trimmed), (y,), dict(n.attrs, padding=tuple(pads)), n.name)]
