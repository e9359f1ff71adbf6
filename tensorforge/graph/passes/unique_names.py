"""One name per value, and one copy of each constant the layout passes derive twice.

Passes name what they derive after what it comes from: a conv's packed weight after the weight
("w_oihw16o"), a reshaped input after the input ("x_row").  Two nodes that share a weight or an
input (a module called twice in forward, a siamese pair, one input read by two heads) then give
two values one name, which the executor's model description cannot hold.  After the passes:

- constants of one name with equal contents (the same weight packed twice the same way) become
  one parameter, read by every node that read either: the model keeps one copy;
- any other value whose name is taken (a differently derived constant, an intermediate) is
  renamed with a numeric suffix.  The graph's inputs and outputs keep their names (the caller
  sees those), so a clash with one of them renames the other value.

The graph computes the same values.
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Node, Value


def unique_names(graph: Graph) -> Graph:
    params = graph.params
    taken = {v.name for v in list(graph.inputs) + list(graph.outputs)}
    replace: dict = {}
    new_params: dict = {}
    by_name: dict = {}
    for v, array in params.items():
        first = by_name.get(v.name)
        if first is not None and first.shape == v.shape and first.dtype == v.dtype \
                and np.array_equal(new_params[first], array):
            replace[v] = first
            continue
        if v.name in taken and v not in graph.outputs and v not in graph.inputs:
            v2 = Value(_fresh(v.name, taken), v.shape, v.dtype)
            replace[v] = v2
            v = v2
        taken.add(v.name)
        by_name.setdefault(v.name, v)
        new_params[v] = array
    nodes = []
    for n in graph.nodes:
        outs = []
        for o in n.outputs:
            if o.name in taken and o not in graph.outputs:
                o2 = Value(_fresh(o.name, taken), o.shape, o.dtype)
                replace[o] = o2
                o = o2
            taken.add(o.name)
            outs.append(o)
        ins = tuple(replace.get(v, v) if v is not None else None for v in n.inputs)
        nodes.append(Node(n.op, ins, tuple(outs), n.attrs, n.name))
    if not replace:
        return graph
    return graph.with_nodes(nodes, params=new_params)


def _fresh(name: str, taken: set) -> str:
    k = 2
    while f"{name}_{k}" in taken:
        k += 1
    return f"{name}_{k}"
