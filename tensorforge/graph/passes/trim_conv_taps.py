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
"""
from __future__ import annotations

import numpy as np

from ...ops.nn_window import out_spatial
from ...target import Target
from ..ir import Graph, Node, Value
from .rewrite import constant_weight_window, rewrite_nodes

_RANKS = {"conv1d": 1, "conv2d": 2, "conv3d": 3}


def trim_conv_taps(graph: Graph, target: Target) -> Graph:
    return rewrite_nodes(graph, _rewrite)


def live_taps(size: int, out: int, kernel: int, stride: int, dilation: int, pad_begin: int) -> tuple[int, int] | None:
    """(first, last) tap of one axis that reads the input for some output, or None if none does."""
    reads = np.arange(out)[:, None] * stride + np.arange(kernel)[None, :] * dilation - pad_begin
    live = np.flatnonzero(((reads >= 0) & (reads < size)).any(axis=0))
    return (int(live[0]), int(live[-1])) if live.size else None


def _rewrite(n: Node, params: dict) -> list[Node] | None:
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
