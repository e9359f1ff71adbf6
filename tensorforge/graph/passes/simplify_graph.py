"""Simplification: drop identity-like nodes (Identity, inference Dropout) and merge chains of
reshapes into one."""
from __future__ import annotations

from ..ir import Graph, Node
from .rewrite import replace_values

IDENTITY_OPS = ("identity", "dropout")


def simplify_graph(graph: Graph) -> Graph:
    mapping: dict = {}
    kept = []
    producer = {}
    outputs = set(graph.outputs)
    for n in graph.nodes:
        if n.op in IDENTITY_OPS and n.inputs and n.inputs[0] is not None and n.outputs[0] not in outputs:
            mapping[n.outputs[0]] = n.inputs[0]
            continue
        if n.op == "reshape" and n.inputs[0] in producer and producer[n.inputs[0]].op == "reshape":
            first = producer[n.inputs[0]]
            n = Node("reshape", (first.inputs[0],), n.outputs, n.attrs, n.name)
        for v in n.outputs:
            producer[v] = n
        kept.append(n)
    if not mapping and len(kept) == len(graph.nodes):
        return graph
    used = {v for n in kept for v in n.inputs}
    if any(v in used for n in graph.nodes if n.op in IDENTITY_OPS for v in n.outputs[1:]):
        return graph  # a dropout mask is read: keep the graph as it is
    return replace_values(graph, mapping, nodes=kept)
