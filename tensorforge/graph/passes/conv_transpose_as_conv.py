"""A transposed convolution with stride 1 is a convolution.

With stride 1, conv_transpose adds x[j] * w[c, o, k] into y[j - p + d k]; read from the output's
side that is

    y[n, o, i] = sum over c, k' of x[n, c, i - (d (K - 1) - p) + d k'] * w[c, o, K - 1 - k']

a plain convolution with the kernel flipped, its two channel axes swapped (within each group),
the same dilation, and padding d (K - 1) - p on each side.  The convolution has the tuned paths
(blocked, im2col, Winograd); the transposed-conv templates are built for strides above 1, where
each output phase reads its own taps.  The rewrite applies when every padding is at most
d (K - 1) (the convolution's padding is then not negative) and the weight is a constant, which
is re-laid out once, at compile time.  The convolution computes every tap of every output, the
transposed conv only the taps that land on data: a small input that the kernel spreads over a
larger output (a generator's first layer on one pixel, which alter_layout_conv_transpose makes
one GEMM) stays transposed, as does any layer whose output holds more than `MAX_GROWTH` times
its input's positions.  The graph computes the same values.

A 2-D transposed convolution whose kernel equals its stride (s x s, no padding, dilation 1, one
group: a U-Net's 2x2 stride-2 up-sampling) is another convolution: every output takes exactly one
tap, the one of its position within its s x s cell, so

    y[n, o, s i + a, s j + b] = sum over c of x[n, c, i, j] * w[c, o, a, b]

is a 1x1 convolution with M * s * s output channels, ordered (a, b, o), followed by the
depth-to-space that moves channel (a, b, o) to offset (a, b) of each cell (ONNX's DCR order: each
offset's channels are consecutive, so on blocked data, where M fills whole blocks, a cell offset's
channel blocks are whole blocks of the conv's output, and alter_layout_propagate keeps it blocked).
The 1x1 convolution is a GEMM over the positions (alter_layout), and the depth-to-space reads each
output row's two source rows as two vector loads and a shuffle (tir/lane_offsets.py).  On a
128 -> 64 channel layer on 64 x 64 this took 3.4 ms against 6.9 ms for the phase-decomposed
template (whose phases of one tap each streamed the input from memory once per output channel
block and phase), and ONNX Runtime's 3.6 ms.
"""
from __future__ import annotations

import math

import numpy as np

from ...target import Target
from ..ir import Graph, Node, Value
from .rewrite import constant_weight_window, rewrite_nodes

_RANKS = {"conv_transpose1d": 1, "conv_transpose2d": 2}
MAX_GROWTH = 1.25      # output positions per input position beyond which the taps on padding cost too much


def conv_transpose_as_conv(graph: Graph, target: Target) -> Graph:
    return rewrite_nodes(graph, _rewrite)


def conv_weight(w: np.ndarray, groups: int) -> np.ndarray:
    """The convolution weight (M, C/g, K...) of a stride-1 transposed conv's weight (C, M/g, K...):
    each group's two channel axes swapped and every spatial axis flipped."""
    c, mg, *kernel = w.shape
    per = w.reshape(groups, c // groups, mg, *kernel)
    swapped = np.swapaxes(per, 1, 2).reshape(groups * mg, c // groups, *kernel)
    return np.ascontiguousarray(np.flip(swapped, axis=tuple(range(2, 2 + len(kernel)))))


def _rewrite(n: Node, params: dict) -> list[Node] | None:
    window = constant_weight_window(n, params, _RANKS)
    if window is None:
        return None
    rank, x, w, y, strides, dilations, pads = window
    output_padding = tuple(n.attrs.get("output_padding") or (0,) * rank)
    if any(output_padding) or not x.dtype.startswith("float"):
        return None
    if any(s != 1 for s in strides):
        return _cells(n, params, window)
    if math.prod(y.shape[2:]) > MAX_GROWTH * math.prod(x.shape[2:]):
        return None
    kernel = w.shape[2:]
    span = [d * (k - 1) for d, k in zip(dilations, kernel)]
    if any(p > span[i % rank] for i, p in enumerate(pads)):
        return None
    groups = int(n.attrs.get("groups", 1))
    weight = conv_weight(params[w], groups)
    w_conv = Value(f"{w.name}_conv", weight.shape, weight.dtype.name)
    params[w_conv] = weight
    attrs = {"strides": strides, "dilations": dilations, "groups": groups,
             "padding": tuple(span[i % rank] - p for i, p in enumerate(pads))}
    return [Node(f"conv{rank}d", (x, w_conv), (y,), attrs, n.name)]


def _cells(n: Node, params: dict, window: tuple) -> list[Node] | None:
    """A 2-D transposed conv whose kernel equals its (square) stride, unpadded, undilated, of one
    group: a 1x1 conv to (a, b, o)-ordered channels, then depth_to_space (DCR)."""
    rank, x, w, y, strides, dilations, pads = window
    kernel = tuple(w.shape[2:])
    if rank != 2 or kernel != strides or strides[0] != strides[1] or any(pads) or any(d != 1 for d in dilations):
        return None
    if int(n.attrs.get("groups", 1)) != 1:
        return None
    c, m = w.shape[:2]
    s = strides[0]
    weight = params[w]
    # (C, M, s, s) -> (s, s, M, C) -> (s * s * M, C, 1, 1): output channel (a, b, o)
    pointwise = np.ascontiguousarray(weight.transpose(2, 3, 1, 0).reshape(s * s * m, c, 1, 1))
    w_conv = Value(f"{w.name}_cells", pointwise.shape, pointwise.dtype.name)
    params[w_conv] = pointwise
    cells = Value(f"{y.name}_cells", (x.shape[0], m * s * s, *x.shape[2:]), y.dtype)
    conv_attrs = {"strides": (1, 1), "dilations": (1, 1), "groups": 1, "padding": (0, 0, 0, 0)}
    return [Node("conv2d", (x, w_conv), (cells,), conv_attrs, n.name),
            Node("depth_to_space", (cells,), (y,), {"blocksize": s, "mode": "DCR"}, n.name + "_cells")]
