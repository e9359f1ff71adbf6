"""Constant folding: a node whose inputs are all parameters is evaluated now (with its NumPy
reference) and its outputs become parameters."""
from __future__ import annotations

import numpy as np

from ...ops import registry
from ..ir import Graph, Value


def fold_constants(graph: Graph) -> Graph:
    params = dict(graph.params)
    mapping: dict = {}
    kept = []
    for n in graph.nodes:
        inputs = [mapping.get(v, v) if v is not None else None for v in n.inputs]
        present = [v for v in inputs if v is not None]
        if present and all(v in params for v in present):
            opdef = registry.get(n.op)
            outs = opdef.run_reference([params[v] if v is not None else None for v in inputs], n.attrs)
            for v, a in zip(n.outputs, outs):
                const = Value(v.name, v.shape, v.dtype)
                params[const] = np.ascontiguousarray(np.asarray(a).astype(v.dtype, copy=False)).reshape(v.shape)
                mapping[v] = const
            continue
        kept.append(n)
    if not mapping:
        return graph
    from .rewrite import replace_values
    return replace_values(graph.with_nodes(kept, params=params), mapping)
