"""matmul_integer(a, B) with a uint8 2-D `a`, a constant int8 B and B's zero point 0 becomes
matmul_integer_vnni(a, B packed for the int8 dot-product unit, za * column sums of B) on a CPU
that has such a unit (AVX-512 VNNI, AVX-VNNI, AMX).

    sum_k (a[i, k] - za) * B[k, j] = sum_k a[i, k] B[k, j] - za * sum_k B[k, j]

so the unit's u8 x s8 products give the result and the correction is a constant per column,
computed here once.  The packing (ops/schedules/cpu_matmul_int8.pack_b_vnni) is the unit's
operand layout.  Runs only for a native CPU target (the units are the host's); other products
(signed activations, per-row or nonzero weight zero points, batched operands) stay as they are.
"""
from __future__ import annotations

import numpy as np

from ...ops import x86_intrin as X
from ...ops.schedules.cpu_matmul_int8 import pack_b_vnni
from ...target import Target
from ..ir import Graph, Node, Value


def alter_layout_int8(graph: Graph, target: Target) -> Graph:
    if target.template_suffix != "cpu" or target.mcpu != "native":
        return graph
    unit = X.int8_unit()
    if unit is None:
        return graph
    lanes = X.LANES[unit]
    params = dict(graph.params)
    nodes, changed = [], False
    for n in graph.nodes:
        rewritten = _rewrite(n, params, lanes)
        nodes.append(rewritten or n)
        changed = changed or rewritten is not None
    if not changed:
        return graph
    from .eliminate_dead_code import eliminate_dead_code
    return eliminate_dead_code(graph.with_nodes(nodes, params=params))


def _rewrite(n: Node, params: dict, lanes: int) -> Node | None:
    if n.op != "matmul_integer":
        return None
    a, b, za, zb = (list(n.inputs) + [None] * 4)[:4]
    if a.dtype != "uint8" or a.ndim != 2 or b not in params or b.dtype != "int8" or b.ndim != 2:
        return None
    if zb is not None and (zb not in params or np.any(params[zb] != 0)):
        return None
    if za is not None and (za not in params or params[za].size != 1):
        return None
    w = params[b]
    za_value = int(params[za].reshape(())) if za is not None else 0
    corr = (za_value * w.astype(np.int64).sum(axis=0)).astype(np.int32)
    bp = pack_b_vnni(w, lanes)
    bp_val = Value(f"{b.name}_vnni{lanes}", bp.shape, "int8")
    corr_val = Value(f"{n.name}_corr", corr.shape, "int32")
    params[bp_val], params[corr_val] = bp, corr
    return Node("matmul_integer_vnni", (a, bp_val, corr_val), n.outputs, {"units": int(w.shape[1])}, n.name)
