"""The additive attention bias of ONNX Attention (ONNX -> Graph): attn_mask, causal frontier,
sliding window and key padding, combined into one tensor of 0 / -inf (plus a float mask's
values) that broadcasts against the [batch, heads, q, kv] scores.

Every structural rule is "key j is allowed for query i" with the query at absolute position
p = i + offset: causal j <= p; window p - left <= j <= p + right; padding j < nonpad_kv_seqlen[b].
The offset is the past length (internal cache), nonpad_kv_seqlen[b] - q (external cache), or 0.
With a static offset the rules fold into one constant; with nonpad_kv_seqlen given at run time
each rule is one comparison of a constant [q, kv] index table against the per-batch lengths.
All disallowed entries are -inf, so the terms may be added in any order with the same result.

Also: which query rows end up with every key disallowed (they must give zeros, not NaN).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...graph.ir import Value
from . import rnn_graph as g


@dataclass(frozen=True)
class MaskRules:
    q_len: int
    kv_len: int
    past_len: int | None       # internal cache length, when past_key is given
    causal: bool
    left: int                  # -1: unbounded
    right: int                 # -1: unbounded


def _neg_bias(ctx, disallowed: Value, dtype: str) -> Value:
    """where(disallowed, -inf, 0)."""
    return g.where(ctx, disallowed, g.scalar(ctx, -np.inf, dtype), g.scalar(ctx, 0, dtype))


def mask_bias(ctx, mask: Value, kv_len: int, dtype: str) -> Value:
    """attn_mask as an additive bias: bool True -> 0, False -> -inf; float masks as given.  A mask
    shorter than kv_len on its last axis is padded with False / -inf."""
    pad = kv_len - mask.shape[-1]
    if pad < 0:
        raise ValueError(f"Attention: attn_mask's last axis ({mask.shape[-1]}) is longer than the "
                         f"key/value sequence ({kv_len})")
    if mask.dtype != "bool" and mask.dtype != dtype:
        raise ValueError(f"Attention: a float attn_mask must have the dtype of Q ({dtype}), got {mask.dtype}")
    if pad > 0:
        fill = False if mask.dtype == "bool" else -np.inf
        block = ctx.const(np.full(tuple(mask.shape[:-1]) + (pad,), fill, dtype=mask.dtype))
        mask = g.concat(ctx, [mask, block], mask.ndim - 1)
    if mask.dtype == "bool":
        return g.where(ctx, mask, g.scalar(ctx, 0, dtype), g.scalar(ctx, -np.inf, dtype))
    return mask


def _index_tables(rules: MaskRules) -> tuple[np.ndarray, np.ndarray]:
    i = np.arange(rules.q_len, dtype=np.int64).reshape(-1, 1)
    j = np.arange(rules.kv_len, dtype=np.int64).reshape(1, -1)
    return i, j


def static_allowed(rules: MaskRules) -> np.ndarray:
    """[q, kv] bool: the causal and window rules with a static offset (past length or 0)."""
    i, j = _index_tables(rules)
    p = i + (rules.past_len or 0)
    allowed = np.ones((rules.q_len, rules.kv_len), dtype=bool)
    if rules.causal:
        allowed &= j <= p
    if rules.left >= 0:
        allowed &= p - j <= rules.left
    if rules.right >= 0:
        allowed &= j - p <= rules.right
    return allowed


def nonpad_bias(ctx, rules: MaskRules, nonpad: Value, dtype: str) -> Value:
    """[batch, 1, q, kv] bias of the padding, causal and window rules with the per-batch offset
    nonpad[b] - q (ONNX forbids combining nonpad_kv_seqlen with a past cache)."""
    i, j = _index_tables(rules)
    n = g.reshape(ctx, nonpad, (nonpad.shape[0], 1, 1, 1))
    n = ctx.add1("cast", [n], {"dtype": "int64"}) if n.dtype != "int64" else n

    def const(table: np.ndarray) -> Value:
        return ctx.const(np.broadcast_to(table, (rules.q_len, rules.kv_len)).astype(np.int64))

    terms = [_neg_bias(ctx, ctx.add1("greater", [const(j + 1), n]), dtype)]          # j >= n: padding
    # p = i + n - q; causal: j <= p  <=>  j - i + q <= n
    if rules.causal:
        terms.append(_neg_bias(ctx, ctx.add1("greater", [const(j - i + rules.q_len), n]), dtype))
    # left window: p - j <= left  <=>  n <= j - i + q + left
    if rules.left >= 0:
        terms.append(_neg_bias(ctx, ctx.add1("greater", [n, const(j - i + rules.q_len + rules.left)]), dtype))
    # right window: j - p <= right  <=>  j - i + q - right <= n
    if rules.right >= 0:
        terms.append(_neg_bias(ctx, ctx.add1("greater", [const(j - i + rules.q_len - rules.right), n]), dtype))
    return _sum(ctx, terms)


def _sum(ctx, terms: list) -> Value:
    out = terms[0]
    for t in terms[1:]:
        out = g.add(ctx, out, t)
    return out


def attention_bias(ctx, rules: MaskRules, mask: Value | None, nonpad: Value | None, dtype: str) -> Value | None:
    """The whole additive bias, or None when nothing is masked."""
    terms = []
    if mask is not None:
        terms.append(mask_bias(ctx, mask, rules.kv_len, dtype))
    if nonpad is not None:
        terms.append(nonpad_bias(ctx, rules, nonpad, dtype))
    else:
        allowed = static_allowed(rules)
        if not allowed.all():
            terms.append(ctx.const(np.where(allowed, 0, -np.inf).astype(dtype)))
    return _sum(ctx, terms) if terms else None


def fully_masked_rows(ctx, bias: Value) -> Value | None:
    """A bool [..., q, 1] of the rows whose every key is disallowed, or None when the bias is
    constant and no row is."""
    if ctx.is_const(bias):
        rows = np.isneginf(np.max(ctx.value_of(bias), axis=-1, keepdims=True))
        if not rows.any():
            return None
    row_max = ctx.add1("reduce_max", [bias], {"axes": (bias.ndim - 1,), "keepdims": True})
    return ctx.add1("equal", [row_max, g.scalar(ctx, -np.inf, bias.dtype)])
