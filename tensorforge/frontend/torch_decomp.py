"""Decompositions that the torch.compile backend adds to PyTorch's core ATen table, and the
ones both PyTorch paths leave out of it: `col2im` (F.fold), which has a converter of its own
and whose decomposition crops the padding with a negative pad that the graph lacks.

nn.TransformerEncoderLayer in eval mode under no_grad takes PyTorch's "fast path", one fused
native op (`aten._transformer_encoder_layer_fwd`) that has no decomposition of its own.  Here it
is written out as the layer computes it (the slow path of torch/nn/modules/transformer.py):
packed QKV projection, scaled dot-product attention per head (softmax(q k^T / sqrt(d)) v, as the
ONNX export of the layer computes it), output projection, residuals,
layer norms (before or after each block) and the ReLU or GELU feed-forward.
"""
from __future__ import annotations

import math
from typing import Any


def encoder_layer_fwd(src: Any, embed_dim: int, num_heads: int, qkv_weight: Any, qkv_bias: Any,
                      proj_weight: Any, proj_bias: Any, use_gelu: bool, norm_first: bool, eps: float,
                      norm_weight_1: Any, norm_bias_1: Any, norm_weight_2: Any, norm_bias_2: Any,
                      ffn_weight_1: Any, ffn_bias_1: Any, ffn_weight_2: Any, ffn_bias_2: Any,
                      mask: Any = None, mask_type: Any = None) -> Any:
    import torch
    import torch.nn.functional as F
    if mask is not None:
        raise NotImplementedError("the fused transformer encoder layer with a mask is not supported")
    head_dim = embed_dim // num_heads

    def attention(x):
        b, s, _ = x.shape            # the fast path runs batch-first layers only
        # per head as one batch of b * num_heads matrices: 3-D products, no 4-D views around them
        q, k, v = (t.reshape(b, s, num_heads, head_dim).transpose(1, 2).reshape(b * num_heads, s, head_dim)
                   for t in F.linear(x, qkv_weight, qkv_bias).chunk(3, dim=-1))
        # softmax(q k^T / sqrt(d)) v written out: PyTorch's decomposition of
        # scaled_dot_product_attention scales q and k by d^-1/4 each and guards the softmax
        # against fully masked rows, which this unmasked attention has none of
        scores = torch.bmm(q * (1.0 / math.sqrt(head_dim)), k.transpose(1, 2))
        out = torch.bmm(torch.softmax(scores, dim=-1), v).reshape(b, num_heads, s, head_dim)
        return F.linear(out.transpose(1, 2).reshape(b, s, embed_dim), proj_weight, proj_bias)

    def feed_forward(x):
        hidden = F.linear(x, ffn_weight_1, ffn_bias_1)
        hidden = F.gelu(hidden) if use_gelu else F.relu(hidden)
        return F.linear(hidden, ffn_weight_2, ffn_bias_2)

    def norm1(x):
        return F.layer_norm(x, (embed_dim,), norm_weight_1, norm_bias_1, eps)

    def norm2(x):
        return F.layer_norm(x, (embed_dim,), norm_weight_2, norm_bias_2, eps)

    if norm_first:
        x = src + attention(norm1(src))
        return x + feed_forward(norm2(x))
    x = norm1(src + attention(src))
    return norm2(x + feed_forward(x))


def decompositions() -> dict:
    """PyTorch's core ATen decompositions plus the ones above, col2im left out."""
    import torch
    from torch._decomp import core_aten_decompositions
    table = dict(core_aten_decompositions())
    table[torch.ops.aten._transformer_encoder_layer_fwd.default] = encoder_layer_fwd
    table.pop(torch.ops.aten.col2im.default)
    return table


def export_decompositions() -> Any:
    """from_torch's table for run_decompositions: PyTorch's default, col2im left out."""
    import torch
    from torch.export import default_decompositions
    table = default_decompositions()
    table.pop(torch.ops.aten.col2im.default)
    return table
