"""ONNX LinearAttention (opset 27) -> Graph, in float32 whatever the activations' dtype.  The
operator is defined as a recurrence over the sequence:

    q, k, v: [B, T, H * D] -> [B, H, T, D]; decay, beta -> [B, H_kv (or 1), T, d_k (or 1)]
    for t in 0 .. T-1:                                        state S: [B, H_kv, d_k, d_v]
        S = exp(g_t) * S                                      gated, gated_delta
        v_t = beta_t * (v_t - k_t^T S)                        delta, gated_delta
        S = S + k_t (x) v_t                                   outer product
        o_t = scale * q_t^T S                                 query heads grouped over the KV heads
    output = o as [B, T, H_q * d_v] in the query's dtype; present_state = S in past_state's dtype
    (the query's when no past state is given)

The linear rule, and the gated rule with one decay per head, have a closed form (attention with
a causal, decayed score matrix; see _parallel) that is a handful of graph ops whatever T.  The
delta rules and per-key decays are unrolled step by step (_recurrent): the graph grows with T,
each step a few small matmuls and elementwise ops that the fuser groups.
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


def _recurrent(ctx, q4: Value, k4: Value, v4: Value, g4: Value | None, beta4: Value | None, state: Value,
               group: int) -> tuple[Value, Value]:
    """(unscaled outputs [B, H_q, T, d_v], final state): the recurrence, one step at a time."""
    b, kv_heads, steps, d_k = k4.shape
    q_heads, d_v = q4.shape[1], v4.shape[3]
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
    return g.concat(ctx, outs, 2), state


def _parallel(ctx, q4: Value, k4: Value, v4: Value, g4: Value | None, state: Value,
              group: int) -> tuple[Value, Value]:
    """(unscaled outputs [B, H_q, T, d_v], final state) of the linear rule, or the gated rule with one
    decay per head, in closed form.  With G_t the running sum of the decays (0 without decay):

        o_t = exp(G_t) q_t^T S_0 + sum_{s <= t} exp(G_t - G_s) (q_t . k_s) v_s
        S_T = exp(G_T) S_0 + sum_s exp(G_T - G_s) k_s v_s^T

    The decay factors are exponentials of differences (never above 1), so nothing overflows; the
    cost is a [T, T] score matrix per head, as in softmax attention."""
    b, kv_heads, steps, _ = k4.shape
    q_heads, d_v = q4.shape[1], v4.shape[3]
    rows = group * steps                           # the group's query heads stacked along the time axis
    q_rows = g.reshape(ctx, q4, (b, kv_heads, rows, q4.shape[3]))
    scores = g.matmul(ctx, q_rows, k4, transpose_b=True)           # [B, H_kv, G * T, T]
    causal = np.tile(np.tril(np.ones((steps, steps), bool)), (group, 1))
    if g4 is None:
        weights = g.where(ctx, ctx.const(causal), scores, g.scalar(ctx, 0.0, "float32"))
        y = g.matmul(ctx, weights, v4)
        y = ctx.add1("add", [y, g.matmul(ctx, q_rows, state)])
        return g.reshape(ctx, y, (b, q_heads, steps, d_v)), \
            ctx.add1("add", [state, ctx.add1("matmul", [k4, v4], {"transpose_a": True})])
    total = ctx.add1("cumsum", [g4], {"axis": 2})                  # G_t: [B, H_kv, T, 1]
    diff = g.sub(ctx, total, g.reshape(ctx, total, (b, kv_heads, 1, steps)))       # G_t - G_s
    rows_diff = g.reshape(ctx, ctx.add1("expand", [g.reshape(ctx, diff, (b, kv_heads, 1, steps, steps))],
                                         {"shape": (b, kv_heads, group, steps, steps)}), (b, kv_heads, rows, steps))
    decay = g.unary(ctx, "exp", g.where(ctx, ctx.const(causal), rows_diff, g.scalar(ctx, -np.inf, "float32")))
    y = g.matmul(ctx, g.mul(ctx, scores, decay), v4)
    row_total = g.reshape(ctx, ctx.add1("expand", [g.reshape(ctx, total, (b, kv_heads, 1, steps, 1))],
                                         {"shape": (b, kv_heads, group, steps, 1)}), (b, kv_heads, rows, 1))
    y = ctx.add1("add", [y, g.mul(ctx, g.unary(ctx, "exp", row_total), g.matmul(ctx, q_rows, state))])
    last = g.slice_axis(ctx, total, 2, steps - 1, steps)            # G_T: [B, H_kv, 1, 1]
    weighted_v = g.mul(ctx, v4, g.unary(ctx, "exp", g.sub(ctx, last, total)))
    new_state = ctx.add1("add", [g.mul(ctx, g.unary(ctx, "exp", last), state),
                                 ctx.add1("matmul", [k4, weighted_v], {"transpose_a": True})])
    return g.reshape(ctx, y, (b, q_heads, steps, d_v)), new_state


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

    per_head_decay = g4 is None or g4.shape[3] == 1
    if beta4 is None and per_head_decay and steps > 1:
        y, state = _parallel(ctx, q4, k4, v4, g4, state, group)
    else:
        y, state = _recurrent(ctx, q4, k4, v4, g4, beta4, state, group)
    y = g.scale(ctx, y, scale)                                      # [B, H_q, T, d_v]
    y = g.reshape(ctx, g.transpose(ctx, y, (0, 2, 1, 3)), (b, steps, q_heads * d_v))
    state_dtype = past.dtype if past is not None else query.dtype
    if y.dtype != query.dtype:
        y = ctx.add1("cast", [y], {"dtype": query.dtype})
    if state.dtype != state_dtype:
        state = ctx.add1("cast", [state], {"dtype": state_dtype})
    return [y, state]
