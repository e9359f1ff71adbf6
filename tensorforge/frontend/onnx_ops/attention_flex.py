"""ONNX FlexAttention (domain ai.onnx.preview, version 1) -> Graph, decomposed into plain graph
ops like Attention (attention.py), with the node's modifier subgraphs inlined:

    K, V heads repeated to Q's head count                   (grouped-query attention)
    scores = (Q * sqrt(scale)) @ (K * sqrt(scale))^T         in Q's dtype
    scores = score_mod(cast(scores, precision))              precision: softmax_precision, else float32
                                                             for float16 inputs, else Q's dtype
    probs = prob_mod(softmax(scores))
    Y = cast(probs @ cast(V, precision), V's dtype)
"""
from __future__ import annotations

import numpy as np

from ...graph.ir import Value
from ..onnx import converter
from . import rnn_graph as g
from .attention import _dtype_name, _repeat_heads
from .subgraph import inline_subgraph


def _cast(ctx, x: Value, dtype: str) -> Value:
    return x if x.dtype == dtype else ctx.add1("cast", [x], {"dtype": dtype})


def _modifier(ctx, graph, x: Value, what: str) -> Value:
    """x passed through the modifier subgraph `graph` (None: unchanged); its output must keep
    x's shape, and is brought to x's dtype."""
    if graph is None:
        return x
    if len(graph.output) != 1:
        raise ValueError(f"{what} must have exactly one output, it has {len(graph.output)}")
    (y,) = inline_subgraph(ctx, graph, [x], what)
    if tuple(y.shape) != tuple(x.shape):
        raise ValueError(f"{what} must keep the shape {x.shape} of its input, it returns {y.shape}")
    return _cast(ctx, y, x.dtype)


@converter("FlexAttention", since=1, domain="ai.onnx.preview")
def convert_flex_attention(ctx, inputs: list, attrs: dict) -> list:
    q, k, v = inputs[:3]
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError(f"Q, K and V must have rank 4, got {q.shape}, {k.shape}, {v.shape}")
    batch, q_heads, _, head = q.shape
    kv_heads, kv_len = k.shape[1], k.shape[2]
    if k.shape[3] != head or v.shape[1] != kv_heads or v.shape[2] != kv_len or k.shape[0] != batch \
            or v.shape[0] != batch:
        raise ValueError(f"K {k.shape} and V {v.shape} do not fit Q {q.shape} "
                         "([batch, heads, seq, size] with K and V sharing heads and length)")
    if q_heads % kv_heads:
        raise ValueError(f"{q_heads} query heads cannot be grouped over {kv_heads} key/value heads")
    precision = attrs.get("softmax_precision")
    compute = _dtype_name(precision) if precision is not None else \
        ("float32" if q.dtype == "float16" else q.dtype)
    scale = attrs.get("scale")
    scale = float(scale) if scale is not None else 1.0 / np.sqrt(head)
    root = ctx.const(np.array(np.sqrt(np.float32(scale))).astype(q.dtype))
    reps = q_heads // kv_heads
    k_rep, v_rep = _repeat_heads(ctx, k, reps), _repeat_heads(ctx, v, reps)
    scores = g.matmul(ctx, g.mul(ctx, q, root), g.mul(ctx, k_rep, root), transpose_b=True)
    scores = _modifier(ctx, attrs.get("score_mod"), _cast(ctx, scores, compute), "score_mod")
    probs = ctx.add1("softmax", [scores], {"axes": (scores.ndim - 1,)})
    probs = _modifier(ctx, attrs.get("prob_mod"), probs, "prob_mod")
    return [_cast(ctx, g.matmul(ctx, probs, _cast(ctx, v_rep, compute)), v.dtype)]
