"""Run a Graph node by node on the ops' NumPy references.  The oracle that compiled models are
checked against, and a quick way to test a frontend without compiling anything."""
from __future__ import annotations

import numpy as np

from ..ops import registry
from .ir import Graph, GraphError


def run_reference(graph: Graph, *inputs: np.ndarray) -> list[np.ndarray]:
    if len(inputs) != len(graph.inputs):
        raise ValueError(f"graph {graph.name} takes {len(graph.inputs)} input(s), got {len(inputs)}")
    env = dict(graph.params)
    for v, a in zip(graph.inputs, inputs):
        env[v] = np.asarray(a)
    for n in graph.nodes:
        opdef = registry.get(n.op)
        arrays = [env[v] if v is not None else None for v in n.inputs]
        outs = opdef.run_reference(arrays, n.attrs)
        if len(outs) != len(n.outputs):
            raise GraphError(f"node {n.name} ({n.op}): reference gave {len(outs)} outputs, expected {len(n.outputs)}")
        for v, o in zip(n.outputs, outs):
            env[v] = np.asarray(o).astype(v.dtype, copy=False).reshape(v.shape)
    return [env[v] for v in graph.outputs]
