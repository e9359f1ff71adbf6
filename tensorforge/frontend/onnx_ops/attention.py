"""ONNX Attention (opsets 23-25) -> Graph, decomposed into plain graph ops:

    Q, K, V (3-D inputs are split into heads: reshape + transpose to [batch, heads, seq, size])
    K, V = concat(past, K / V) along the sequence         (present_key / present_value)
    K, V heads repeated to Q's head count (grouped-query attention)
    scores = (Q * sqrt(scale)) @ (K * sqrt(scale))^T        one batched matmul
    scores = softcap * tanh(scores / softcap)               when softcap > 0
    probs = softmax(scores + bias)                          bias: attention_bias.py
    probs = where(fully masked row, 0, probs)
    Y = probs @ V                                           (3-D: heads merged back)

Every step is a graph op in the inputs' dtype, as in the operator's function body (the
`_expanded` graphs): in float16 and bfloat16 each step's value is rounded to the dtype (softmax
rounds as its own body does, ops/nn_softmax.py), unless softmax_precision names a wider type for
the softmax.  This is what the ONNX reference computes; ONNX Runtime's CPU kernel computes
float16 attention in float32 and rounds once, which differs from it by several ulps.

The fourth output qk_matmul_output is the raw scores (mode 0), the soft-capped scores (1),
scores + bias (2) or the probabilities (3), as the operator's definition and ONNX Runtime have
it (the ONNX reference evaluator returns the soft-capped scores for mode 0 as well).
"""
from __future__ import annotations

import numpy as np

from ...graph.ir import Value
from ..onnx import converter
from . import attention_bias as ab
from . import rnn_graph as g


def _split_heads(ctx, x: Value, heads: int | None, what: str) -> Value:
    """A 3-D [batch, seq, heads * size] input as [batch, heads, seq, size]; 4-D passes through."""
    if x.ndim == 4:
        return x
    if x.ndim != 3:
        raise ValueError(f"Attention: {what} must have rank 3 or 4, got shape {x.shape}")
    if heads is None or heads <= 0 or x.shape[2] % heads:
        raise ValueError(f"Attention: 3-D {what} of hidden size {x.shape[2]} needs q_num_heads and kv_num_heads "
                         f"attributes that divide it (got {heads})")
    b, s, hidden = x.shape
    return g.transpose(ctx, g.reshape(ctx, x, (b, s, heads, hidden // heads)), (0, 2, 1, 3))


def _repeat_heads(ctx, x: Value, reps: int) -> Value:
    """[b, h, s, d] -> [b, h * reps, s, d], each head repeated `reps` times in place (h0 h0 h1 h1 ..)."""
    if reps == 1:
        return x
    b, h, s, d = x.shape
    y = ctx.add1("expand", [g.reshape(ctx, x, (b, h, 1, s, d))], {"shape": (b, h, reps, s, d)})
    return g.reshape(ctx, y, (b, h * reps, s, d))


def _with_past(ctx, x: Value, past: Value | None, what: str) -> Value:
    if past is None:
        return x
    if past.ndim != 4 or past.shape[:2] != x.shape[:2] or past.shape[3] != x.shape[3]:
        raise ValueError(f"Attention: past_{what} {past.shape} does not match {what} {x.shape} "
                         "(expected [batch, kv_heads, past_seq, head_size])")
    return g.concat(ctx, [past, x], 2)


def _matmul(ctx, a: Value, b: Value, transpose_b: bool = False) -> Value:
    """A MatMul node of the body: float16 operands are widened to float32 (exactly), multiplied by
    the float32 GEMM templates and the product rounded back once, which is a float16 MatMul's
    value (ops/nn_dense.py accumulates it in float32 too) at float32 GEMM speed."""
    if a.dtype != "float16":
        return g.matmul(ctx, a, b, transpose_b=transpose_b)
    wide = [ctx.add1("cast", [x], {"dtype": "float32"}) for x in (a, b)]
    return ctx.add1("cast", [g.matmul(ctx, *wide, transpose_b=transpose_b)], {"dtype": "float16"})


def _softcap(ctx, x: Value, cap: float) -> Value:
    c = g.scalar(ctx, cap, x.dtype)
    return g.mul(ctx, g.unary(ctx, "tanh", ctx.add1("div", [x, c])), c)


def _dtype_name(onnx_type: int) -> str:
    """The NumPy name of an ONNX element type (softmax_precision)."""
    from onnx import helper
    try:
        name = np.dtype(helper.tensor_dtype_to_np_dtype(int(onnx_type))).name
    except Exception:
        name = None
    if name not in ("float16", "float32", "float64"):
        raise NotImplementedError(f"Attention: softmax_precision {onnx_type} ({name or 'unknown'}) is not supported; "
                                  "float16, float32 and float64 are")
    return name


def _masked_softmax(ctx, logits: Value, bias: Value | None, precision: int | None) -> Value:
    """softmax over the keys (in `precision` when given), in the logits' dtype; rows whose every
    key is masked give zeros: they are zeroed before the softmax (so no NaN arises from an all
    -inf row) and after it."""
    dtype = logits.dtype
    if precision is not None and _dtype_name(precision) != dtype:
        logits = ctx.add1("cast", [logits], {"dtype": _dtype_name(precision)})
    masked_rows = ab.fully_masked_rows(ctx, bias) if bias is not None else None
    if masked_rows is not None:
        logits = g.where(ctx, masked_rows, g.scalar(ctx, 0, logits.dtype), logits)
    probs = ctx.add1("softmax", [logits], {"axes": (logits.ndim - 1,)})
    if masked_rows is not None:
        probs = g.where(ctx, masked_rows, g.scalar(ctx, 0, probs.dtype), probs)
    return ctx.add1("cast", [probs], {"dtype": dtype}) if probs.dtype != dtype else probs


def _check_attrs(attrs: dict) -> dict:
    mode = int(attrs.get("qk_matmul_output_mode", 0))
    if mode not in (0, 1, 2, 3):
        raise ValueError(f"Attention: qk_matmul_output_mode must be 0..3, got {mode}")
    left, right = int(attrs.get("left_window_size", -1)), int(attrs.get("right_window_size", -1))
    if left < -1 or right < -1:
        raise ValueError(f"Attention: window sizes must be -1 or nonnegative, got left {left}, right {right}")
    return {"mode": mode, "left": left, "right": right, "causal": bool(attrs.get("is_causal", 0)),
            "softcap": float(attrs.get("softcap", 0.0)), "scale": attrs.get("scale"),
            "precision": attrs.get("softmax_precision")}


@converter("Attention", since=23)
def convert_attention(ctx, inputs: list, attrs: dict) -> list:
    q, k, v, mask, past_k, past_v, nonpad = (list(inputs) + [None] * 7)[:7]
    a = _check_attrs(attrs)
    if (past_k is None) != (past_v is None):
        raise ValueError("Attention: past_key and past_value must be given together")
    if nonpad is not None and past_k is not None:
        raise ValueError("Attention: nonpad_kv_seqlen cannot be combined with past_key/past_value")
    if not (q.ndim == k.ndim == v.ndim):
        raise ValueError(f"Attention: Q, K and V must have the same rank, got {q.shape}, {k.shape}, {v.shape}")
    three_d = q.ndim == 3
    q4 = _split_heads(ctx, q, attrs.get("q_num_heads"), "Q")
    k4 = _with_past(ctx, _split_heads(ctx, k, attrs.get("kv_num_heads"), "K"), past_k, "key")
    v4 = _with_past(ctx, _split_heads(ctx, v, attrs.get("kv_num_heads"), "V"), past_v, "value")
    batch, q_heads, q_len, head = q4.shape
    kv_heads, kv_len = k4.shape[1], k4.shape[2]
    if q_heads % kv_heads or v4.shape[1] != kv_heads:
        raise ValueError(f"Attention: {q_heads} query heads cannot be grouped over {kv_heads} key / "
                         f"{v4.shape[1]} value heads")
    if k4.shape[3] != head or v4.shape[2] != kv_len:
        raise ValueError(f"Attention: K {k4.shape} / V {v4.shape} do not fit Q {q4.shape}")
    dtype = q.dtype

    scale = a["scale"] if a["scale"] is not None else 1.0 / np.sqrt(head)
    root = g.scalar(ctx, np.sqrt(scale), dtype)
    k_rep, v_rep = _repeat_heads(ctx, k4, q_heads // kv_heads), _repeat_heads(ctx, v4, q_heads // kv_heads)
    raw = _matmul(ctx, g.mul(ctx, q4, root), g.mul(ctx, k_rep, root), transpose_b=True)
    scores = _softcap(ctx, raw, a["softcap"]) if a["softcap"] > 0 else raw

    rules = ab.MaskRules(q_len, kv_len, past_k.shape[2] if past_k is not None else None, a["causal"],
                         a["left"], a["right"])
    bias = ab.attention_bias(ctx, rules, mask, nonpad, dtype)
    with_bias = g.add(ctx, scores, bias)
    probs = _masked_softmax(ctx, with_bias, bias, a["precision"])
    y = _matmul(ctx, probs, v_rep)                                         # [b, heads, q, v_size]
    if three_d:
        y = g.reshape(ctx, g.transpose(ctx, y, (0, 2, 1, 3)), (batch, q_len, q_heads * y.shape[3]))
    qk_out = {0: raw, 1: scores, 2: with_bias, 3: probs}[a["mode"]]
    return [y, k4, v4, qk_out]
