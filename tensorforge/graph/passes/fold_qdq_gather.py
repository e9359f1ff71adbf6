"""Gather rows of a quantized constant before dequantizing them (the QDQ form of an embedding
lookup).

    y = gather(dequantize(q, s, z), ids)      q: a constant 8-bit table, s, z per tensor
  ->
    y = dequantize(gather(q, ids), s, z)

Exact: a per-tensor dequantize acts on each element alone, so it commutes with any gather.  The
float table (what fold_constants would otherwise make of the dequantize: 4 bytes per entry, a
language model's 30000 x 256 words are 31 MB) is never built; the lookup reads the 8-bit rows
and dequantizes only the rows it took.  A dequantize with per-axis parameters is left alone.
Runs before fold_constants.
"""
from __future__ import annotations

from ..ir import Graph, Node, Value
from .eliminate_dead_code import eliminate_dead_code

EIGHT_BIT = ("uint8", "int8")


def fold_qdq_gather(graph: Graph) -> Graph:
    producer = graph.producers()
    params = graph.params
    nodes: list = []
    changed = False
    for n in graph.nodes:
        dq = producer.get(n.inputs[0]) if n.op == "gather" and n.inputs else None
        if dq is None or dq.op != "dequantize_linear" or not _per_tensor_constant(dq, params):
            nodes.append(n)
            continue
        q, scale, zero = (list(dq.inputs) + [None])[:3]
        out = n.outputs[0]
        rows = Value(f"{n.name}_q", tuple(out.shape), q.dtype)
        nodes += [Node("gather", (q, *n.inputs[1:]), (rows,), dict(n.attrs), f"{n.name}_q"),
                  Node("dequantize_linear", (rows, scale, zero) if zero is not None else (rows, scale), (out,),
                       dict(dq.attrs), f"{n.name}_dequantize")]
        changed = True
    if not changed:
        return graph
    return eliminate_dead_code(graph.with_nodes(nodes))


def _per_tensor_constant(dq: Node, params: dict) -> bool:
    """Whether `dq` dequantizes a constant 8-bit tensor with one scale and zero point."""
    q, scale, zero = (list(dq.inputs) + [None])[:3]
    if q not in params or q.dtype not in EIGHT_BIT or dq.attrs.get("block_size", 0):
        return False
    if scale not in params or params[scale].size != 1:
        return False
    return zero is None or (zero in params and params[zero].size == 1)
