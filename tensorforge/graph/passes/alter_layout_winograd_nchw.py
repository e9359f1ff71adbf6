"""3x3 stride-1 NCHW convolutions become Winograd convolutions on targets that prefer
"winograd_nchw" (the GPUs; opt_level 3).

A conv2d with a constant (K, C, 3, 3) float32 weight, stride 1, dilation 1 and one group
becomes conv2d_winograd_nchw with U = G g G^T computed here, once (ops/nn_conv_winograd_nchw.py).
Output, name and readers stay the same, so the fused epilogue does not change.  Which convs
and which tile size: `winograd_tile`, the rule the CPU pass uses (enough channels on both sides
to hide the transforms; m = 4 on maps of 8x8 and up, else m = 2).  The target option
`-winograd=0` keeps every conv direct.
"""
from __future__ import annotations

import numpy as np

from ...ops.nn_conv_winograd_nchw import transform_weight_nchw
from ...target import Target
from ..ir import Graph, Node, Value
from .alter_layout_winograd import rewrite_winograd, winograd_tile


def alter_layout_winograd_nchw(graph: Graph, target: Target) -> Graph:
    if not target.prefers("winograd_nchw") or target.option("winograd") == "0":
        return graph

    def emit(n: Node, u: Value, m: int) -> list[Node]:
        attrs = {"tile": m, "padding": tuple(n.attrs.get("padding", (0, 0, 0, 0)))}
        return [Node("conv2d_winograd_nchw", (n.inputs[0], u), n.outputs, attrs, n.name)]

    return rewrite_winograd(graph, _tile_for, transform_weight_nchw, emit)


def _tile_for(n: Node, params: dict) -> int:
    if n.op != "conv2d" or len(n.inputs) != 2 or n.inputs[1] not in params or n.attrs.get("groups", 1) != 1:
        return 0
    if tuple(n.attrs.get("strides", (1, 1))) != (1, 1) or tuple(n.attrs.get("dilations", (1, 1))) != (1, 1):
        return 0
    w = params[n.inputs[1]]
    if w.ndim != 4 or tuple(w.shape[2:]) != (3, 3) or w.dtype != np.float32 or n.outputs[0].dtype != "float32":
        return 0
    y = n.outputs[0]
    return winograd_tile(w.shape[1], w.shape[0], y.shape[2], y.shape[3])
