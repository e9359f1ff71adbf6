"""Shared helpers for passes: replace values throughout a graph; rewrite nodes one by one."""
from __future__ import annotations

from typing import Callable

from ..ir import Graph, Node


def replace_values(graph: Graph, mapping: dict, nodes=None, params=None) -> Graph:
    """A graph where every read of a key of `mapping` reads its value instead."""
    def sub(v):
        while v in mapping:
            v = mapping[v]
        return v

    new_nodes = []
    for n in (graph.nodes if nodes is None else nodes):
        if any(v in mapping for v in n.inputs if v is not None):
            n = Node(n.op, tuple(sub(v) if v is not None else None for v in n.inputs), n.outputs, n.attrs, n.name)
        new_nodes.append(n)
    return graph.with_nodes(new_nodes, params=params, outputs=[sub(v) for v in graph.outputs])


def rewrite_nodes(graph: Graph, rewrite: Callable[[Node, dict], list | None]) -> Graph:
    """`graph` with each node for which `rewrite(node, params)` returns a list of nodes replaced
    by that list (None keeps the node).  `rewrite` may add constants to `params`, a copy of the
    graph's; the graph is returned unchanged when no node was rewritten."""
    params = dict(graph.params)
    nodes: list[Node] = []
    changed = False
    for n in graph.nodes:
        replacement = rewrite(n, params)
        nodes.extend(replacement if replacement is not None else [n])
        changed = changed or replacement is not None
    return graph.with_nodes(nodes, params=params) if changed else graph


def constant_weight_window(n: Node, params: dict, ranks: dict) -> tuple | None:
    """For a node whose op is a key of `ranks` (op -> number of spatial axes) with two inputs, the
    second a constant: (rank, data, weight, output, strides, dilations, padding), each attribute
    filled with its default; else None."""
    rank = ranks.get(n.op)
    if rank is None or len(n.inputs) != 2 or n.inputs[1] not in params:
        return None
    strides = tuple(n.attrs.get("strides") or (1,) * rank)
    dilations = tuple(n.attrs.get("dilations") or (1,) * rank)
    pads = tuple(n.attrs.get("padding") or (0,) * (2 * rank))
    return (rank, n.inputs[0], n.inputs[1], n.outputs[0], strides, dilations, pads)
