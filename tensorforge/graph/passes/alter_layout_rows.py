"""Ops whose CPU schedules vectorize along rows get the forms that allow it, with the same values:

- softmax and layer_norm over the last axis become softmax_rows and layer_norm_rows
  (ops/nn_rows.py): the row reductions in two stages whose partial results stay in SIMD lanes.
  (layer_norm is otherwise an opaque op run by NumPy between the kernels; layer_norm_rows
  compiles into one kernel per use.)  layer_norm with stash=True is left alone.
- max_pool2d becomes max_pool2d_rows (ops/nn_pool_rows.py): the padded input laid out so that
  output rows read it with unit stride at any stride.

float32/float64 only.
"""
from __future__ import annotations

from ...ops.nn_rows import lanes_for
from ...target import Target
from ..ir import Graph, Node


def alter_layout_rows(graph: Graph, target: Target) -> Graph:
    if not target.prefers("rows"):
        return graph
    nodes = []
    changed = False
    for n in graph.nodes:
        new = _rewrite(n, target)
        nodes.append(new or n)
        changed = changed or new is not None
    return graph.with_nodes(nodes) if changed else graph


def _rewrite(n: Node, target: Target) -> Node | None:
    if not n.inputs or n.inputs[0] is None:
        return None
    x = n.inputs[0]
    if x.dtype not in ("float32", "float64") or x.ndim < 1 or x.shape[-1] < 1:
        return None
    last = x.ndim - 1
    if n.op == "softmax" and len(n.inputs) == 1:
        axes = n.attrs.get("axes", (-1,))
        axes = (axes,) if isinstance(axes, int) else tuple(axes)
        if tuple(a % x.ndim for a in axes) == (last,):
            return Node("softmax_rows", n.inputs, n.outputs, {"lanes": lanes_for(x.shape[-1], target.simd_lanes(x.dtype))},
                        n.name)
    if n.op == "max_pool2d" and x.ndim == 4 and len(n.outputs) == 1:
        return Node("max_pool2d_rows", n.inputs, n.outputs, dict(n.attrs), n.name)
    if n.op == "layer_norm" and not n.attrs.get("stash", False) and len(n.outputs) == 1:
        if n.attrs.get("axis", -1) % x.ndim == last and _vector_param(n.inputs[1], x) \
                and (len(n.inputs) < 3 or n.inputs[2] is None or _vector_param(n.inputs[2], x)):
            return Node("layer_norm_rows", n.inputs, n.outputs,
                        {"epsilon": n.attrs.get("epsilon", 1e-5),
                         "lanes": lanes_for(x.shape[-1], target.simd_lanes(x.dtype))}, n.name)
    return None


def _vector_param(p, x) -> bool:
    return p is not None and p.dtype == x.dtype and p.ndim <= 1 and (p.ndim == 0 or p.shape[0] in (1, x.shape[-1]))
