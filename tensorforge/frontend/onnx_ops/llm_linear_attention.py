"""ONNX LinearAttention (opset 27) -> Graph: the recurrence unrolled over the (static) sequence
into plain graph ops, in float32 whatever the activations' dtype.

    q, k, v: [B, T, H * D] -> [B, H, T, D]; decay, beta -> [B, H_kv (or 1), T, d_k (or 1)]
    for t in 0 .. T-1:                                        state S: [B, H_kv, d_k, d_v]
        S = exp(g_t) * S                                      gated, gated_delta
        v_t = beta_t * (v_t - k_t^T S)                        delta, gated_delta
        S = S + k_t (x) v_t                                   outer product
        o_t = scale * q_t^T S                                 query heads grouped over the KV heads
    output = o as [B, T, H_q * d_v] in the query's dtype; present_state = S in past_state's dtype
    (the query's when no past state is given)

Every step reads the state the previous one wrote, so the graph grows with T; each step is a few
small matmuls and elementwise ops that the fuser groups.
"""
from __future__ import annotations

import numpy as np

from ...graph.ir import Value
from ..onnx import converter
from . import rnn_graph as g

RULES = ("linear", "gated", "delta", "gated_delta")


def _heads(ctx, x: Value, heads: int, what: str) -> Value:
    """[B, T, H * D] -> [B, H, T, D] in float32."""
    if x.ndim != 3:
        raise ValueError(f"{what} must have rank 3 [batch, seq, heads * size], got shape {x.shape}")
    b, t, hd = x.shape
    if hd % heads:
        raise ValueError(f"{what}'s last dimension {hd} is not divisible by its {heads} heads")
    y = g.transpose(ctx, g.reshape(ctx, x, (b, t, heads, hd // heads)), (0, 2, 1, 3))
    return _f32(ctx, y)


def _f32(ctx, x: Value) -> Value:
    return x if x.dtype == "float32" else ctx.add1("cast", [x], {"dtype": "float32"})


def _per_step(ctx, x: Value | None, kv_heads: int, what: str, sizes: tuple) -> Value | None:
    """decay / beta [B, T, n], n in `sizes`, as [B, heads, T, n // heads] in float32, where heads is
    1 for n == 1 (one value shared by all heads) and H_kv otherwise."""
    if x is None:
        return None
    if x.ndim != 3 or x.shape[2] not in sizes:
        raise ValueError(f"{what} must have shape [batch, seq, n] with n in {sorted(set(sizes))}, got {x.shape}")
    b, t, n = x.shape
    heads = 1 if n == 1 else kv_heads
    return _f32(ctx, g.transpose(ctx, g.reshape(ctx, x, (b, t, heads, n // heads)), (0, 2, 1, 3)))


def _at(ctx, x: Value, t: int) -> Value:
    """Step t of [B, H, T, D] as [B, H, 1, D]."""
    return g.slice_axis(ctx, x, 2, t, t + 1)


def _check(attrs: dict, decay, beta) -> tuple[str, int, int]:
    rule = str(attrs.get("update_rule", "gated_delta"))
    if rule not in RULES:
        raise ValueError(f"update_rule {rule!r} is not one of {', '.join(RULES)}")
    q_heads, kv_heads = attrs.get("q_num_heads"), attrs.get("kv_num_heads")
    if q_heads is None or kv_heads is None:
        raise ValueError("the attributes q_num_heads and kv_num_heads are required")
    q_heads, kv_heads = int(q_heads), int(kv_heads)
    if q_heads <= 0 or kv_heads <= 0 or q_heads % kv_heads:
        raise ValueError(f"q_num_heads ({q_heads}) must be a positive multiple of kv_num_heads ({kv_heads})")
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gated != (decay is not None):
        raise ValueError(f"update_rule {rule!r} {'requires' if gated else 'forbids'} the decay input")
    if delta != (beta is not None):
        raise ValueError(f"update_rule {rule!r} {'requires' if delta else 'forbids'} the beta input")
    return rule, q_heads, kv_heads


@converter("LinearAttention", since=27)
def convert_linear_attention(ctx, inputs: list, attrs: dict) -> list:
    query, key, value, past, decay, beta = (list(inputs) + [None] * 6)[:6]
    rule, q_heads, kv_heads = _check(attrs, decay, beta)
    q4, k4, v4 = _heads(ctx, query, q_heads, "query"), _heads(ctx, key, kv_heads, "key"), \
        _heads(ctx, value, kv_heads, "value")
    b, _, steps, d_k = q4.shape
    d_v, group = v4.shape[3], q_heads // kv_heads
    if k4.shape[:3] != (b, kv_heads, steps) or k4.shape[3] != d_k or v4.shape[2] != steps:
        raise ValueError(f"query {query.shape}, key {key.shape} and value {value.shape} do not fit together "
                         f"with {q_heads} query and {kv_heads} key/value heads")
    g4 = _per_step(ctx, decay, kv_heads, "decay", (kv_heads, kv_heads * d_k))
    beta4 = _per_step(ctx, beta, kv_heads, "beta", (kv_heads, 1))
    state_shape = (b, kv_heads, d_k, d_v)
    if past is not None:
        if tuple(past.shape) != state_shape:
            raise ValueError(f"past_state has shape {past.shape}, expected {state_shape} "
                             "[batch, kv_heads, d_k, d_v]")
        state = _f32(ctx, past)
    else:
        state = ctx.const(np.zeros(state_shape, np.float32))
    scale = float(attrs.get("scale", 0.0) or 0.0) or 1.0 / np.sqrt(d_k)

    outs = []
    for t in range(steps):
        k_row = _at(ctx, k4, t)                                     # [B, H_kv, 1, d_k]
        v_row = _at(ctx, v4, t)                                     # [B, H_kv, 1, d_v]
        k_col = g.reshape(ctx, k_row, (b, kv_heads, d_k, 1))
        if g4 is not None:
            decay_t = g.reshape(ctx, _at(ctx, g4, t), (b, g4.shape[1], g4.shape[3], 1))
            state = g.mul(ctx, state, g.unary(ctx, "exp", decay_t))
        if beta4 is not None:
            retrieved = g.matmul(ctx, k_row, state)                 # [B, H_kv, 1, d_v]
            v_row = g.mul(ctx, _at(ctx, beta4, t), g.sub(ctx, v_row, retrieved))
        state = ctx.add1("add", [state, g.mul(ctx, k_col, v_row)])
        q_t = g.reshape(ctx, _at(ctx, q4, t), (b, kv_heads, group, d_k))
        outs.append(g.reshape(ctx, g.matmul(ctx, q_t, state), (b, q_heads, 1, d_v)))
    y = g.scale(ctx, g.concat(ctx, outs, 2), scale)                 # [B, H_q, T, d_v]
    y = g.reshape(ctx, g.transpose(ctx, y, (0, 2, 1, 3)), (b, steps, q_heads * d_v))
    state_dtype = past.dtype if past is not None else query.dtype
    if y.dtype != query.dtype:
        y = ctx.add1("cast", [y], {"dtype": query.dtype})
    if state.dtype != state_dtype:
        state = ctx.add1("cast", [state], {"dtype": state_dtype})
    return [y, state]
