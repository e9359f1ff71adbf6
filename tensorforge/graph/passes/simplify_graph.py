"""Simplification: drop identity-like nodes (Identity, inference Dropout) and merge chains of
reshapes into one."""
from __future__ import annotations

from ..ir import Graph, Node, Value
from .rewrite import replace_values

IDENTITY_OPS = ("identity", "dropout")


def simplify_graph(graph: Graph) -> Graph:
    mapping: dict = {}
    kept = []
    producer: dict[Value, Node] = {}
    outputs = set(graph.outputs)
    read = {v for n in graph.nodes for v in n.inputs if v is not None}
    changed = False
    for n in graph.nodes:
        if (n.op in IDENTITY_OPS and n.inputs and n.inputs[0] is not None and n.outputs[0] not in outputs
                and not any(v in read or v in outputs for v in n.outputs[1:])):   # e.g. a dropout mask
            mapping[n.outputs[0]] = n.inputs[0]
            changed = True
            continue
        if n.op == "reshape" and n.inputs[0] in producer and producer[n.inputs[0]].op == "reshape":
            first = producer[n.inputs[0]]
            # the merged node gets the literal output shape: attributes such as 0 ("keep this
            # dimension") or -1 referred to the first reshape's output, not to its input
            attrs = dict(n.attrs, shape=tuple(n.outputs[0].shape), allowzero=1)
            n = Node("reshape", (first.inputs[0],), n.outputs, attrs, n.name)
            changed = True
        for v in n.outputs:
            producer[v] = n
        kept.append(n)
    if not changed:
        return graph
    return replace_values(graph, mapping, nodes=kept)
