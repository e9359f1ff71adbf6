"""lstm_cell(xw, state, R) / gru_cell(xw, h, R, rbh) with a constant R become lstm_cell_packed /
gru_cell_packed with R packed.

The packing (ops/nn_lstm_cell.py, `pack_recurrent`) groups R's rows by blocks of L hidden units,
the gates of a block side by side and k-major, so one step streams R once with unit stride
and holds a block's gate sums in one vector per gate of the target (L = its float32 lanes) for
the gate math.  R is packed once, at compile time; every step of a direction shares it.
"""
from __future__ import annotations

from ...ops.nn_lstm_cell import pack_recurrent
from ...target import Target
from ..ir import Graph, Node, Value

PACKED = {"lstm_cell": "lstm_cell_packed", "gru_cell": "gru_cell_packed"}


def alter_layout_rnn(graph: Graph, target: Target) -> Graph:
    """Where the target's backend prefers packed weights."""
    if not target.prefers("packed_rnn"):
        return graph
    params = dict(graph.params)
    packed: dict = {}
    nodes = []
    changed = False
    for n in graph.nodes:
        r = n.inputs[2] if n.op in PACKED and len(n.inputs) >= 3 else None
        if r is None or r not in params or r.dtype != "float32":
            nodes.append(n)
            continue
        rp = packed.get(r)
        if rp is None:
            lanes = max(1, target.simd_lanes("float32"))
            data = pack_recurrent(params[r], lanes)
            rp = Value(f"{r.name}_l{lanes}", data.shape, data.dtype.name)
            params[rp] = data
            packed[r] = rp
        inputs = n.inputs[:2] + (rp,) + n.inputs[3:]
        nodes.append(Node(PACKED[n.op], inputs, n.outputs, dict(n.attrs), n.name))
        changed = True
    if not changed:
        return graph
    from .eliminate_dead_code import eliminate_dead_code
    return eliminate_dead_code(graph.with_nodes(nodes, params=params))
