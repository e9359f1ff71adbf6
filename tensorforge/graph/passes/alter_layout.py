"""Layout changes that suit the CPU: weights are re-laid-out once, at compile time.

- dense(x, W) with a constant W (units, in) becomes matmul(x, W^T): the kernel then walks the
  output units contiguously, so they vectorize, instead of a scalar dot product per unit.
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Node, Value


def alter_layout(graph: Graph) -> Graph:
    params = dict(graph.params)
    nodes = []
    changed = False
    transposed: dict = {}
    for n in graph.nodes:
        if n.op == "dense" and len(n.inputs) == 2 and n.inputs[1] in params and n.inputs[1].ndim == 2:
            w = n.inputs[1]
            wt = transposed.get(w)
            if wt is None:
                arr = np.ascontiguousarray(params[w].T)
                wt = Value(w.name + "_T", arr.shape, arr.dtype.name)
                params[wt] = arr
                transposed[w] = wt
            nodes.append(Node("matmul", (n.inputs[0], wt), n.outputs, {}, n.name))
            changed = True
        else:
            nodes.append(n)
    if not changed:
        return graph
    from .eliminate_dead_code import eliminate_dead_code
    return eliminate_dead_code(graph.with_nodes(nodes, params=params))
