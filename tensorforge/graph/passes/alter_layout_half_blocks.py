"""Pointwise convs whose output runs in blocks of half a vector compute whole vectors.

alter_layout gives a conv's output blocks of half a vector where its filters do not fill whole
ones and a blocked conv reads it (MobileNetV2's and EfficientNet's 24 and 40 channels with
AVX-512: blocks of 8), as padding the value's channels would make its readers take the padding
as input channels.  The conv's register tile then runs on half vectors: each multiply-add does
half the work of a whole-vector one.  For a pointwise conv (1x1, stride 1, unpadded, one group,
on blocked data) this pass packs the weight in blocks of whole vectors, its filters padded with
zeros (24 -> 32), and sets the conv's `out_block`: the tile computes whole vectors and stores
each as the output's half-vector blocks (ops/nn_conv_nchwc.py).  The output keeps its layout,
so no other node changes; the zero filters cost at most a third more multiply-adds (24 -> 32),
at twice the lanes each.  Blocks of two vectors where they take no more zero filters than
blocks of one (`wide_block`): the tile is then the GEMM micro-kernel's (144 -> 24 channels on
56x56: 0.24 ms on half vectors, 0.125 ms in blocks of 16, 0.111 ms in one block of 32; ONNX
Runtime 0.120).

A conv whose output (or an element-wise op's on it) goes back to NCHW keeps its half blocks:
the template writes NCHW from the tile only for whole blocks.
"""
from __future__ import annotations

import numpy as np

from ...ops.nn_conv_nchwc import layout_block, pack_weight, unpack_weight
from ...target import Target
from ..ir import Graph, Node, Value
from .alter_layout_propagate import is_elementwise


def alter_layout_half_blocks(graph: Graph, target: Target) -> Graph:
    if not target.prefers("NCHWc"):
        return graph
    lanes = target.simd_lanes("float32")
    params = dict(graph.params)
    readers = graph.consumers()
    nodes: list[Node] = []
    changed = False
    done: dict = {}
    for n in graph.nodes:
        if not _half_blocked(n, params, lanes) or _goes_to_nchw(n.outputs[0], readers):
            nodes.append(n)
            continue
        w = n.inputs[1]
        f = w.shape[0] * w.shape[4]
        wide = done.get(w)
        if wide is None:
            unpacked = unpack_weight(params[w])
            block = wide_block(f, lanes)
            padded = np.zeros((-(-f // block) * block, *unpacked.shape[1:]), unpacked.dtype)
            padded[:f] = unpacked
            arr = pack_weight(padded, block)
            wide = done[w] = Value(f"{w.name}_{block}o", arr.shape, arr.dtype.name)
            params[wide] = arr
        attrs = {**n.attrs, "out_block": int(w.shape[4]), "filters": int(f)}
        nodes.append(Node(n.op, (n.inputs[0], wide), n.outputs, attrs, n.name))
        changed = True
    if not changed:
        return graph
    from .eliminate_dead_code import eliminate_dead_code
    return eliminate_dead_code(graph.with_nodes(nodes, params=params))


def wide_block(filters: int, lanes: int) -> int:
    """Blocks of two vectors where they take no more zero filters than blocks of one (24 -> 32,
    56 -> 64: the register tile is then the GEMM micro-kernel's, each broadcast input used by
    two vectors), else one vector (40 -> 48, not 64)."""
    pad = lambda b: -(-filters // b) * b      # noqa: E731
    return 2 * lanes if pad(2 * lanes) == pad(lanes) else lanes


def _half_blocked(n: Node, params: dict, lanes: int) -> bool:
    """A float32 pointwise conv2d_nchwc on blocked data, with a constant weight in blocks of
    half a vector."""
    if n.op != "conv2d_nchwc" or len(n.inputs) != 2 or n.inputs[1] not in params or n.attrs.get("out_block"):
        return False
    w = params[n.inputs[1]]
    if w.ndim != 5 or w.dtype != np.float32 or 2 * w.shape[4] != lanes or tuple(w.shape[2:4]) != (1, 1) \
            or w.shape[0] < 2:          # (one half block: padding doubles the work for nothing)
        return False
    return bool(layout_block(n.attrs.get("data_layout", "NCHW"))) and int(n.attrs.get("groups", 1)) == 1 \
        and tuple(n.attrs.get("strides", (1, 1))) == (1, 1) and tuple(n.attrs.get("dilations", (1, 1))) == (1, 1) \
        and not any(n.attrs.get("padding", (0, 0, 0, 0)))


def _goes_to_nchw(v: Value, readers: dict) -> bool:
    """Whether `v`, or an element-wise op's output on it, is read by nchwc_to_nchw."""
    for r in readers.get(v, ()):
        if r.op == "nchwc_to_nchw":
            return True
        if len(r.outputs) == 1 and r.outputs[0].shape == v.shape and is_elementwise(r) \
                and _goes_to_nchw(r.outputs[0], readers):
            return True
    return False
