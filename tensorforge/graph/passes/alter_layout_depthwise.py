"""Depthwise conv2d(x, W) (groups == channels, one input channel per group) with a constant
float32 W becomes depthwise_conv2d(x, W): the op whose padded input is split by column phase,
so that the CPU template vectorizes along output rows with unit-stride loads at any stride (see
ops/nn_depthwise.py).
"""
from __future__ import annotations

from ...target import Target
from ..ir import Graph, Node


def alter_layout_depthwise(graph: Graph, target: Target) -> Graph:
    if not target.prefers("rows"):
        return graph
    nodes = []
    changed = False
    for n in graph.nodes:
        if _depthwise(n, graph.params):
            attrs = {k: n.attrs[k] for k in ("strides", "padding", "dilations") if n.attrs.get(k) is not None}
            nodes.append(Node("depthwise_conv2d", n.inputs, n.outputs, attrs, n.name))
            changed = True
        else:
            nodes.append(n)
    return graph.with_nodes(nodes) if changed else graph


def _depthwise(n: Node, params: dict) -> bool:
    if n.op != "conv2d" or len(n.inputs) != 2 or n.inputs[1] not in params:
        return False
    x, w = n.inputs
    return (x.dtype == "float32" and w.dtype == "float32" and w.shape[1] == 1 and w.shape[0] == x.shape[1]
            and n.attrs.get("groups", 1) == x.shape[1] and all(p >= 0 for p in (n.attrs.get("padding") or (0,))))
