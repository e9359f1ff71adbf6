"""Layout changes that suit the CPU: weights are re-laid-out once, at compile time.

- dense(x, W) with a constant W (units, in) becomes matmul(x, W^T): the kernel then walks the
  output units contiguously, so they vectorize, instead of a scalar dot product per unit.
- conv2d(x, W) with a constant W and output channels per group that split into SIMD blocks
  (whole vectors, or half vectors: MobileNetV2's 24 channels; depthwise convs are
  alter_layout_propagate's) becomes conv2d_nchwc(x, W packed as OIHW[B]o) -> nchwc_to_nchw:
  the kernel accumulates B
  output channels per vector (see ops/nn_conv_nchwc.py).  B is chosen per layer from the
  output channels and the target's vector width (`block_for`); the pass after this one,
  alter_layout_propagate, keeps the blocked result where its readers can take it.
"""
from __future__ import annotations

import numpy as np

from ...ops.nn_conv_nchwc import pack_weight
from ...target import Target
from ..ir import Graph, Node, Value


def alter_layout(graph: Graph, target: Target) -> Graph:
    """Both rewrites where the target's backend prefers packed weights / blocked data."""
    packs, blocks = target.prefers("packed_weights"), target.prefers("NCHWc")
    if not (packs or blocks):
        return graph
    params = dict(graph.params)
    nodes = []
    changed = False
    transposed: dict = {}
    for n in graph.nodes:
        if packs and n.op == "dense" and len(n.inputs) == 2 and n.inputs[1] in params and n.inputs[1].ndim == 2:
            w = n.inputs[1]
            wt = transposed.get(w)
            if wt is None:
                arr = np.ascontiguousarray(params[w].T)
                wt = Value(w.name + "_T", arr.shape, arr.dtype.name)
                params[wt] = arr
                transposed[w] = wt
            nodes.append(Node("matmul", (n.inputs[0], wt), n.outputs, {}, n.name))
            changed = True
        elif blocks and _packable_conv(n, params, target):
            w = params[n.inputs[1]]
            groups = int(n.attrs.get("groups", 1))
            block = block_for(w.shape[0] // groups, w.dtype, target)     # blocks do not straddle groups
            wp = pack_weight(w, block)
            wv = Value(n.inputs[1].name + f"_oihw{block}o", wp.shape, wp.dtype.name)
            params[wv] = wp
            y = n.outputs[0]
            mid = Value(y.name + "_nchwc", (y.shape[0], y.shape[1] // block, y.shape[2], y.shape[3], block), y.dtype)
            attrs = {k: n.attrs[k] for k in ("strides", "padding", "dilations") if k in n.attrs}
            if groups > 1:
                attrs["groups"] = groups
            nodes.append(Node("conv2d_nchwc", (n.inputs[0], wv), (mid,), attrs, n.name))
            nodes.append(Node("nchwc_to_nchw", (mid,), (y,), {}, n.name + "_nchw"))
            changed = True
        else:
            nodes.append(n)
    if not changed:
        return graph
    from .eliminate_dead_code import eliminate_dead_code
    return eliminate_dead_code(graph.with_nodes(nodes, params=params))


def block_for(channels: int, dtype, target: Target) -> int:
    """The channel block of NCHW[b]c data: two of the target's vectors when the channels fill
    them, else one, else half a vector (24 channels with 16-lane vectors: blocks of 8)."""
    lanes = target.simd_lanes(np.dtype(dtype).name)
    if channels % (2 * lanes) == 0:
        return 2 * lanes
    return lanes if channels % lanes == 0 else lanes // 2


def _packable_conv(n: Node, params: dict, target: Target) -> bool:
    if n.op != "conv2d" or len(n.inputs) != 2 or n.inputs[1] not in params:
        return False
    groups = int(n.attrs.get("groups", 1))
    if n.outputs[0].dtype != "float32" or (groups > 1 and groups == n.inputs[0].shape[1] == n.outputs[0].shape[1]):
        return False            # depthwise: alter_layout_propagate's depthwise_conv2d_nchwc
    return (n.outputs[0].shape[1] // groups) % max(target.simd_lanes(n.outputs[0].dtype) // 2, 1) == 0
