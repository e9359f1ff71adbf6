"""Per-op layout rules: the `alter_layout(node, target, ctx)` hooks that op records declare.

The graph pass `alter_layout_ops` (graph/passes/alter_layout_ops.py) asks each node's op for
its rewrite, given the Target: a hook returns the node(s) that replace `node` (built with
`ctx.node(op, inputs, outputs, attrs, name)`), or None to keep it.  A rule applies only where
the target's backend prefers the form it makes (`target.prefers(...)`, backends/registry.py)
and takes vector widths from the target.  Every rule keeps the values the graph computes.

These rules make the forms CPU schedules vectorize along rows ("rows"):
- softmax, log_softmax and layer_norm over the last axis -> softmax_rows / log_softmax_rows /
  layer_norm_rows (ops/nn_rows.py),
  whose row reductions run `lanes` partial results, one vector of the target's;
- max_pool2d -> max_pool2d_rows and avg_pool2d (stride 1) -> avg_pool2d_rows (ops/nn_pool_rows.py):
  the padded input laid out so that output rows read it with unit stride at any stride;
- depthwise conv2d with constant float32 weights -> depthwise_conv2d (ops/nn_depthwise.py):
  the padded input split by column phase.
float32/float64 only (float32 for the depthwise conv; softmax also float16 and bfloat16).
"""
from __future__ import annotations

from typing import Any


def _rows_input(node: Any, target: Any, dtypes: tuple = ("float32", "float64")):
    """The float input (of one of `dtypes`) a row rule may rewrite, or None."""
    if not target.prefers("rows") or not node.inputs or node.inputs[0] is None:
        return None
    x = node.inputs[0]
    if x.dtype not in dtypes or x.ndim < 1 or x.shape[-1] < 1:
        return None
    return x


def _lanes(x: Any, target: Any) -> int:
    from .nn_rows import lanes_for
    return lanes_for(x.shape[-1], target.simd_lanes(x.dtype))


def softmax_to_rows(node: Any, target: Any, ctx: Any):
    from .nn_rows import SOFTMAX_DTYPES
    return _last_axis_to_rows(node, target, ctx, "softmax_rows", SOFTMAX_DTYPES)


def log_softmax_to_rows(node: Any, target: Any, ctx: Any):
    return _last_axis_to_rows(node, target, ctx, "log_softmax_rows", ("float32", "float64"))


def _last_axis_to_rows(node: Any, target: Any, ctx: Any, rows_op: str, dtypes: tuple):
    """A one-input op over `axes` = the last axis only -> `rows_op` with the target's lanes."""
    x = _rows_input(node, target, dtypes)
    if x is None or len(node.inputs) != 1:
        return None
    axes = node.attrs.get("axes", (-1,))
    axes = (axes,) if isinstance(axes, int) else tuple(axes)
    if tuple(a % x.ndim for a in axes) != (x.ndim - 1,):
        return None
    return ctx.node(rows_op, node.inputs, node.outputs, {"lanes": _lanes(x, target)}, node.name)


def layer_norm_to_rows(node: Any, target: Any, ctx: Any):
    x = _rows_input(node, target)
    if x is None or node.attrs.get("stash", False) or len(node.outputs) != 1:
        return None
    if node.attrs.get("axis", -1) % x.ndim != x.ndim - 1 or not _vector_param(node.inputs[1], x):
        return None
    if len(node.inputs) >= 3 and node.inputs[2] is not None and not _vector_param(node.inputs[2], x):
        return None
    attrs = {"epsilon": node.attrs.get("epsilon", 1e-5), "lanes": _lanes(x, target)}
    return ctx.node("layer_norm_rows", node.inputs, node.outputs, attrs, node.name)


def _vector_param(p: Any, x: Any) -> bool:
    return p is not None and p.dtype == x.dtype and p.ndim <= 1 and (p.ndim == 0 or p.shape[0] in (1, x.shape[-1]))


def max_pool_to_rows(node: Any, target: Any, ctx: Any):
    x = _rows_input(node, target)
    if x is None or x.ndim != 4 or len(node.outputs) != 1:
        return None
    return ctx.node("max_pool2d_rows", node.inputs, node.outputs, dict(node.attrs), node.name)


def avg_pool_to_rows(node: Any, target: Any, ctx: Any):
    """Stride 1 only: a 2x2 stride-2 average pool over 64 channels of 112x112 took 0.095 ms as
    avg_pool2d and 0.18 ms as rows, whose padded planes are split by column phase."""
    x = _rows_input(node, target)
    if x is None or x.ndim != 4 or len(node.outputs) != 1 or any(int(s) != 1 for s in node.attrs.get("strides") or ()):
        return None
    return ctx.node("avg_pool2d_rows", node.inputs, node.outputs, dict(node.attrs), node.name)


def conv_to_depthwise(node: Any, target: Any, ctx: Any):
    """conv2d with groups == channels, one input channel per group and constant float32
    weights -> depthwise_conv2d."""
    if not target.prefers("rows") or len(node.inputs) != 2 or not ctx.is_constant(node.inputs[1]):
        return None
    x, w = node.inputs
    if not (x.dtype == "float32" and w.dtype == "float32" and w.shape[1] == 1 and w.shape[0] == x.shape[1]
            and node.attrs.get("groups", 1) == x.shape[1] and all(p >= 0 for p in (node.attrs.get("padding") or (0,)))):
        return None
    attrs = {k: node.attrs[k] for k in ("strides", "padding", "dilations") if node.attrs.get(k) is not None}
    return ctx.node("depthwise_conv2d", node.inputs, node.outputs, attrs, node.name)
