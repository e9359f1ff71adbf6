"""Depthwise conv2d(x, W) (groups == channels) with a constant float32 W becomes
depthwise_conv2d_nchwc(x, W packed as (C / B, KH, KW, B)) -> nchwc_to_nchw: B channels per SIMD
vector (see ops/nn_depthwise_nchwc.py).  Applies when the channel count splits into blocks of
one 512-bit vector (as alter_layout assumes for conv2d) and the weight has one input channel per
group; the weights are packed once, at compile time.
"""
from __future__ import annotations

import numpy as np

from ...ops.nn_depthwise_nchwc import pack_depthwise_weight
from ..ir import Graph, Node, Value

VECTOR_BYTES = 64


def alter_layout_depthwise(graph: Graph) -> Graph:
    params = dict(graph.params)
    nodes = []
    changed = False
    for n in graph.nodes:
        block = _block(n, params)
        if block is None:
            nodes.append(n)
            continue
        wp = pack_depthwise_weight(params[n.inputs[1]], block)
        wv = Value(n.inputs[1].name + f"_dw{block}c", wp.shape, wp.dtype.name)
        params[wv] = wp
        y = n.outputs[0]
        mid = Value(y.name + "_nchwc", (y.shape[0], y.shape[1] // block, y.shape[2], y.shape[3], block), y.dtype)
        attrs = {k: n.attrs[k] for k in ("strides", "padding", "dilations") if n.attrs.get(k) is not None}
        nodes.append(Node("depthwise_conv2d_nchwc", (n.inputs[0], wv), (mid,), attrs, n.name))
        nodes.append(Node("nchwc_to_nchw", (mid,), (y,), {}, n.name + "_nchw"))
        changed = True
    if not changed:
        return graph
    from .eliminate_dead_code import eliminate_dead_code
    return eliminate_dead_code(graph.with_nodes(nodes, params=params))


def _block(n: Node, params: dict) -> int | None:
    """The channel block for a packable depthwise conv2d, or None."""
    if n.op != "conv2d" or len(n.inputs) != 2 or n.inputs[1] not in params:
        return None
    x, w = n.inputs
    channels = x.shape[1]
    if x.dtype != "float32" or w.dtype != "float32" or w.shape[1] != 1:
        return None
    if n.attrs.get("groups", 1) != channels or w.shape[0] != channels:
        return None
    block = VECTOR_BYTES // np.dtype(x.dtype).itemsize
    return block if channels % block == 0 else None
