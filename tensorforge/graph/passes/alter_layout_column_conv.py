"""A convolution down one column becomes the same convolution along one row.

A conv2d over data of width 1 with a kernel of width 1 (a 1-D signal stored as (N, C, L, 1), as
PyTorch exports a Conv2d with (k, 1) kernels) is a conv1d along the height.  The blocked CPU
template tiles and vectorizes along output columns, of which there is one, so it runs such a
layer several times slower than the same layer laid along the width.  Since a width of 1 makes
(N, C, L, 1) and (N, C, 1, L) the same bytes, the rewrite

    y = reshape(conv2d(reshape(x, (N, C, 1, L)), W as (M, C/g, 1, K), strides (1, s), ...), (N, M, L', 1))

only renames axes: the reshapes are views or fused epilogues, and the weight is re-laid-out once,
at compile time.  The graph computes the same values.
"""
from __future__ import annotations

from ...target import Target
from ..ir import Graph, Node, Value
from .rewrite import rewrite_nodes


def alter_layout_column_conv(graph: Graph, target: Target) -> Graph:
    if not target.prefers("NCHWc"):
        return graph
    return rewrite_nodes(graph, _rewrite)


def _rewrite(n: Node, params: dict) -> list[Node] | None:
    if n.op != "conv2d" or len(n.inputs) != 2 or n.inputs[1] not in params:
        return None
    x, w, y = n.inputs[0], n.inputs[1], n.outputs[0]
    if x.shape[3] != 1 or w.shape[3] != 1 or y.shape[3] != 1 or w.shape[2] == 1:
        return None
    pads = tuple(n.attrs.get("padding") or (0, 0, 0, 0))
    if pads[1] or pads[3]:
        return None
    strides = tuple(n.attrs.get("strides") or (1, 1))
    dilations = tuple(n.attrs.get("dilations") or (1, 1))
    row = Value(f"{x.name}_row", (x.shape[0], x.shape[1], 1, x.shape[2]), x.dtype)
    weight = params[w].reshape(w.shape[0], w.shape[1], 1, w.shape[2])
    w_row = Value(f"{w.name}_row", weight.shape, weight.dtype.name)
    params[w_row] = weight
    out_row = Value(f"{y.name}_row", (y.shape[0], y.shape[1], 1, y.shape[2]), y.dtype)
    attrs = dict(n.attrs, strides=(1, strides[0]), dilations=(1, dilations[0]), padding=(0, pads[0], 0, pads[2]))
    return [Node("reshape", (x,), (row,), {"shape": row.shape}, f"{n.name}_row"),
            Node("conv2d", (row, w_row), (out_row,), attrs, n.name),
            Node("reshape", (out_row,), (y,), {"shape": y.shape}, f"{n.name}_column")]
