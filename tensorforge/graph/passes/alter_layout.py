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
- A one-group conv whose output channels do not fill half a vector (1, 4, 7, 33 channels)
  takes the same path with its channels padded by zero filters to the next block, the padding
  cut off by a slice, when its windows overlap a lot (at least PAD_MIN_OVERLAP taps per output
  position and stride): a tall kernel such as 64x1 over 512 rows.  Otherwise alter_layout_im2col
  makes it one GEMM on its windows, which copies each input value taps / strides times.
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
        elif blocks and (_packable_conv(n, params, target) or _paddable_conv(n, params, target)):
            w = params[n.inputs[1]]
            groups = int(n.attrs.get("groups", 1))
            y = n.outputs[0]
            padded = _padded_channels(w.shape[0], target) if groups == 1 else w.shape[0]
            if padded != w.shape[0]:
                w = np.concatenate([w, np.zeros((padded - w.shape[0], *w.shape[1:]), w.dtype)])
            block = block_for(w.shape[0] // groups, w.dtype, target)     # blocks do not straddle groups
            wp = pack_weight(w, block)
            wv = Value(n.inputs[1].name + f"_oihw{block}o", wp.shape, wp.dtype.name)
            params[wv] = wp
            mid = Value(y.name + "_nchwc", (y.shape[0], padded // block, y.shape[2], y.shape[3], block), y.dtype)
            attrs = {k: n.attrs[k] for k in ("strides", "padding", "dilations") if k in n.attrs}
            if groups > 1:
                attrs["groups"] = groups
            nodes.append(Node("conv2d_nchwc", (n.inputs[0], wv), (mid,), attrs, n.name))
            if padded == y.shape[1]:
                nodes.append(Node("nchwc_to_nchw", (mid,), (y,), {}, n.name + "_nchw"))
            else:
                full = Value(y.name + "_padded", (y.shape[0], padded, *y.shape[2:]), y.dtype)
                nodes.append(Node("nchwc_to_nchw", (mid,), (full,), {}, n.name + "_nchw"))
                nodes.append(Node("slice", (full,), (y,), {"starts": (0,), "ends": (y.shape[1],), "axes": (1,)},
                                  n.name + "_channels"))
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


# taps per output position and stride from which padding output channels beats im2col's copies
PAD_MIN_OVERLAP = 4


def _padded_channels(channels: int, target: Target) -> int:
    """`channels` rounded up to half a vector (up to half a vector) or to a whole one."""
    half = max(target.simd_lanes("float32") // 2, 1)
    step = half if channels <= half else 2 * half
    return -(-channels // step) * step


def _paddable_conv(n: Node, params: dict, target: Target) -> bool:
    """A one-group float32 conv with constant weights whose windows overlap enough that padding
    its output channels to a block is cheaper than im2col (module docstring)."""
    if n.op != "conv2d" or len(n.inputs) != 2 or n.inputs[1] not in params or n.outputs[0].dtype != "float32":
        return False
    if int(n.attrs.get("groups", 1)) != 1 or any(p < 0 for p in n.attrs.get("padding") or (0,)):
        return False
    kh, kw = n.inputs[1].shape[2:4]
    sh, sw = n.attrs.get("strides") or (1, 1)
    return kh * kw >= PAD_MIN_OVERLAP * sh * sw


def _packable_conv(n: Node, params: dict, target: Target) -> bool:
    if n.op != "conv2d" or len(n.inputs) != 2 or n.inputs[1] not in params:
        return False
    groups = int(n.attrs.get("groups", 1))
    if n.outputs[0].dtype != "float32" or (groups > 1 and groups == n.inputs[0].shape[1] == n.outputs[0].shape[1]):
        return False            # depthwise: alter_layout_propagate's depthwise_conv2d_nchwc
    return (n.outputs[0].shape[1] // groups) % max(target.simd_lanes(n.outputs[0].dtype) // 2, 1) == 0
