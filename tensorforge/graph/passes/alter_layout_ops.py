"""Layout rewrites that an op declares for itself: each node's op record may carry an
`alter_layout(node, target, ctx)` hook (ops/layout_rules.py); this pass asks it, given the
Target, and puts the node(s) it returns in the node's place.

Rules of one node never see another node's rewrite, so the walk's order does not matter; the
graph computes the same values (each rule promises it).
"""
from __future__ import annotations

from ...ops import registry
from ...target import Target
from ..ir import Graph, Node


class LayoutContext:
    """What a rule may use besides its node: node construction and the graph's constants (ops
    never import the graph layer)."""

    def __init__(self, graph: Graph):
        self.params = graph.params

    def node(self, op: str, inputs, outputs, attrs: dict, name: str) -> Node:
        return Node(op, tuple(inputs), tuple(outputs), dict(attrs), name)

    def is_constant(self, value) -> bool:
        return value in self.params


def alter_layout_ops(graph: Graph, target: Target) -> Graph:
    ctx = LayoutContext(graph)
    nodes = []
    changed = False
    for n in graph.nodes:
        hook = registry.get(n.op).alter_layout
        new = hook(n, target, ctx) if hook is not None else None
        if new is None:
            nodes.append(n)
            continue
        nodes.extend(new if isinstance(new, (list, tuple)) else [new])
        changed = True
    return graph.with_nodes(nodes) if changed else graph
