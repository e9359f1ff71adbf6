"""A dilated 3x3 convolution is an undilated one on each phase of its input (opt_level 3).

With dilation d along an axis, output i = d a + r reads inputs i + d k - p, k < K.  Where the
leading padding p is a multiple of d (p = d q; "same" padding d (K - 1) / 2 for odd K), that is
input d (a + k - q) + r: phase r of the input (every d-th element from r) convolved with the
same weight, undilated, with padding q.  So the conv runs on the d_h x d_w phases of each image
as a batch of images (space to batch), and the outputs are interleaved back (batch to space):

    x (N, C, H, W) -> zeros appended to H' = d_h h, W' = d_w w -> (N, C, h, d_h, w, d_w)
      -> (d_h, d_w, N, C, h, w) -> conv2d, dilation 1, padding (q_h, q_w, e_h, e_w)
      -> (d_h, d_w, N, M, oh, ow) -> (N, M, oh, d_h, ow, d_w) -> the first Ho x Wo

Each phase's trailing padding e covers the outputs the original padding gives; the zeros
appended to H' are padding the original conv reads too.  The undilated 3x3 conv then takes the
Winograd path (4x or 2.25x fewer multiply-adds); the two reshuffles are injective copies that
fusion puts beside the conv's own layout changes.  DeepLabV3's atrous layers were direct convs:
the rewrite applies where the Winograd pass would take the phase conv (a float32 3x3 stride-1
conv of one group with enough channels, on phases of at least MIN_PHASE outputs a side), with a
constant weight.  The graph computes the same values.
"""
from __future__ import annotations

import math

from ...target import Target
from ..ir import Graph, Node, Value
from .alter_layout_winograd import channel_floor, winograd_tile
from .rewrite import constant_weight_window, rewrite_nodes

MIN_PHASE = 4      # phase outputs per side below which 2x2 Winograd tiles waste too much


def dilated_conv_as_phases(graph: Graph, target: Target) -> Graph:
    if not target.prefers("winograd"):
        return graph
    floor = channel_floor(target)
    return rewrite_nodes(graph, lambda n, params: _rewrite(n, params, floor))


def _rewrite(n: Node, params: dict, floor: int) -> list[Node] | None:
    window = constant_weight_window(n, params, {"conv2d": 2})
    if window is None:
        return None
    _, x, w, y, strides, dilations, pads = window
    if x.dtype != "float32" or tuple(w.shape[2:]) != (3, 3) or strides != (1, 1) or dilations == (1, 1):
        return None
    if int(n.attrs.get("groups", 1)) != 1 or any(p % d for p, d in zip(pads[:2], dilations)):
        return None
    batch, channels, height, width = x.shape
    filters = w.shape[0]
    out_h, out_w = y.shape[2:]
    dh, dw = dilations
    h, wd = math.ceil(height / dh), math.ceil(width / dw)            # phase sizes
    qh, qw = pads[0] // dh, pads[1] // dw
    oh, ow = math.ceil(out_h / dh), math.ceil(out_w / dw)            # outputs each phase must give
    eh, ew = max(0, oh + 2 - h - qh), max(0, ow + 2 - wd - qw)        # its trailing padding
    if min(oh, ow) < MIN_PHASE or not winograd_tile(channels, filters, oh, ow, floor):
        return None
    ph, pw = h + qh + eh - 2, wd + qw + ew - 2                       # what the phase conv gives
    name = n.name or y.name
    nodes: list[Node] = []
    data = x
    if (h * dh, wd * dw) != (height, width):
        data = Value(f"{y.name}_grid", (batch, channels, h * dh, wd * dw), x.dtype)
        nodes.append(Node("pad", (x,), (data,), {"pads": (0, 0, 0, 0, 0, 0, h * dh - height, wd * dw - width)},
                          f"{name}_grid"))
    split = Value(f"{y.name}_split", (batch, channels, h, dh, wd, dw), x.dtype)
    moved = Value(f"{y.name}_phases6", (dh, dw, batch, channels, h, wd), x.dtype)
    phases = Value(f"{y.name}_phases", (dh * dw * batch, channels, h, wd), x.dtype)
    nodes += [Node("reshape", (data,), (split,), {"shape": split.shape}, f"{name}_split"),
              Node("transpose", (split,), (moved,), {"perm": (3, 5, 0, 1, 2, 4)}, f"{name}_phases6"),
              Node("reshape", (moved,), (phases,), {"shape": phases.shape}, f"{name}_phases")]
    conv = Value(f"{y.name}_phased", (dh * dw * batch, filters, ph, pw), y.dtype)
    nodes.append(Node("conv2d", (phases, w), (conv,), {"strides": (1, 1), "dilations": (1, 1), "groups": 1,
                                                        "padding": (qh, qw, eh, ew)}, name))
    grid = Value(f"{y.name}_grid6", (dh, dw, batch, filters, ph, pw), y.dtype)
    back = Value(f"{y.name}_back6", (batch, filters, ph, dh, pw, dw), y.dtype)
    merged = Value(f"{y.name}_merged", (batch, filters, ph * dh, pw * dw), y.dtype)
    nodes += [Node("reshape", (conv,), (grid,), {"shape": grid.shape}, f"{name}_grid6"),
              Node("transpose", (grid,), (back,), {"perm": (2, 3, 4, 0, 5, 1)}, f"{name}_back6"),
              Node("reshape", (back,), (merged if merged.shape != y.shape else y,), {"shape": merged.shape},
                   f"{name}_merged")]
    if merged.shape != y.shape:
        nodes.append(Node("slice", (merged,), (y,), {"starts": (0, 0), "ends": (out_h, out_w), "axes": (2, 3)},
                          f"{name}_crop"))
    return nodes
