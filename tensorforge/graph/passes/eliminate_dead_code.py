"""Dead-code elimination: drop nodes whose outputs nothing reads, and unused parameters."""
from __future__ import annotations

from ..ir import Graph


def eliminate_dead_code(graph: Graph) -> Graph:
    live = set(graph.outputs)
    kept = []
    for n in reversed(graph.nodes):
        if any(v in live for v in n.outputs):
            kept.append(n)
            live.update(v for v in n.inputs if v is not None)
    kept.reverse()
    params = {v: a for v, a in graph.params.items() if v in live}
    return graph.with_nodes(kept, params=params)
