"""A 3-D convolution is a 2-D convolution over the frames, its depth taps stacked as channels.

For data x (N, C, D, H, W) and weight w (M, C/g, KD, KH, KW), with depth stride s, dilation d
and padding p (begin) along D, each output frame o reads input frames o s - p + d t, t < KD:

    y[n, m, o, i, j] = sum over c, t, a, b of w[m, c, t, a, b] * x[n, c, o s - p + d t, ...]

which is a conv2d of X[(n, o), (c, t), H, W] = x_padded[n, c, o s + d t, H, W] with the weight
viewed as (M, C/g * KD, KH, KW): the (c, t) order of the stacked channels is the weight's own, and
a group's channels stay consecutive.  The graph builds X from KD strided slices of the depth-
padded data (one injective copy, which fusion makes one kernel), runs the 2-D conv, and moves
the frames back behind the channels.  The 2-D conv has the tuned paths (blocked, im2col,
Winograd): a generic 3-D loop nest ran an 18-layer video ResNet at 11% of the FMA peak.

The copy reads the data KD times; against the conv's C * KD * KH * KW multiply-adds per output
that is small.  Applies to float conv3d nodes with a constant weight; the graph computes the
same values.
"""
from __future__ import annotations

import numpy as np

from ...target import Target
from ..ir import Graph, Node, Value
from .rewrite import constant_weight_window, rewrite_nodes


def conv3d_as_conv2d(graph: Graph, target: Target) -> Graph:
    return rewrite_nodes(graph, _rewrite)


def _rewrite(n: Node, params: dict) -> list[Node] | None:
    window = constant_weight_window(n, params, {"conv3d": 3})
    if window is None:
        return None
    _, x, w, y, strides, dilations, pads = window
    if not x.dtype.startswith("float") or len(x.shape) != 5:
        return None
    groups = int(n.attrs.get("groups", 1))
    batch, channels, depth = x.shape[:3]
    filters, per_group, kd = w.shape[:3]
    out_depth = y.shape[2]
    sd, dd = strides[0], dilations[0]
    begin, end = pads[0], pads[3]
    name = n.name or y.name
    nodes: list[Node] = []

    data = x
    if begin or end:
        padded_depth = depth + begin + end
        data = Value(f"{y.name}_dpad", (batch, channels, padded_depth, *x.shape[3:]), x.dtype)
        nodes.append(Node("pad", (x,), (data,), {"pads": (0, 0, begin, 0, 0, 0, 0, end, 0, 0)}, f"{name}_dpad"))
    frames = data
    if kd > 1 or sd != 1 or data.shape[2] != out_depth:
        taps = []
        for t in range(kd):
            tap = Value(f"{y.name}_tap{t}", (batch, channels, out_depth, *x.shape[3:]), x.dtype)
            start = t * dd
            nodes.append(Node("slice", (data,), (tap,), {"starts": (start,), "ends": (start + sd * (out_depth - 1) + 1,),
                                                         "axes": (2,), "steps": (sd,)}, f"{name}_tap{t}"))
            taps.append(tap)
        if kd > 1:
            frames = Value(f"{y.name}_taps", (batch, channels, kd * out_depth, *x.shape[3:]), x.dtype)
            nodes.append(Node("concat", tuple(taps), (frames,), {"axis": 2}, f"{name}_taps"))
        else:
            frames = taps[0]
    # (N, C, KD * Do, H, W) -> (N, C, KD, Do, H, W) -> (N, Do, C, KD, H, W) -> (N * Do, C * KD, H, W)
    h, wd = x.shape[3:]
    split = Value(f"{y.name}_split", (batch, channels, kd, out_depth, h, wd), x.dtype)
    moved = Value(f"{y.name}_moved", (batch, out_depth, channels, kd, h, wd), x.dtype)
    stacked = Value(f"{y.name}_stacked", (batch * out_depth, channels * kd, h, wd), x.dtype)
    nodes += [Node("reshape", (frames,), (split,), {"shape": split.shape}, f"{name}_split"),
              Node("transpose", (split,), (moved,), {"perm": (0, 3, 1, 2, 4, 5)}, f"{name}_moved"),
              Node("reshape", (moved,), (stacked,), {"shape": stacked.shape}, f"{name}_stacked")]

    weight = np.ascontiguousarray(params[w].reshape(filters, per_group * kd, *w.shape[3:]))
    w2 = Value(f"{w.name}_2d", weight.shape, weight.dtype.name)
    params[w2] = weight
    out_h, out_w = y.shape[3:]
    flat = Value(f"{y.name}_2d", (batch * out_depth, filters, out_h, out_w), y.dtype)
    attrs = {"strides": strides[1:], "dilations": dilations[1:], "groups": groups,
             "padding": (pads[1], pads[2], pads[4], pads[5])}
    nodes.append(Node("conv2d", (stacked, w2), (flat,), attrs, name))
    unflat = Value(f"{y.name}_frames", (batch, out_depth, filters, out_h, out_w), y.dtype)
    nodes += [Node("reshape", (flat,), (unflat,), {"shape": unflat.shape}, f"{name}_frames"),
              Node("transpose", (unflat,), (y,), {"perm": (0, 2, 1, 3, 4)}, f"{name}_out")]
    return nodes
