"""Shared helper for passes: replace values throughout a graph."""
from __future__ import annotations

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
