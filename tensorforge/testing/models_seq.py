"""Sequence workloads of the TVM paper, written as ONNX graphs with random weights: the LSTM
language model and a small BERT-style transformer encoder.

Each builder takes (batch, seed) and returns (onnx.ModelProto, {input name: example input}).
"""
from __future__ import annotations

import numpy as np

from .models_builder import OnnxModelBuilder

# -- LSTM language model (Zaremba et al. 2014, "medium": 2 layers of 650, 35 steps) ---------------
LSTM_VOCAB, LSTM_HIDDEN, LSTM_STEPS, LSTM_LAYERS = 10000, 650, 35, 2


def lstm_lm(batch: int = 1, seed: int = 0):
    """Word-level LSTM language model: tokens [steps, batch] -> Gather embedding -> 2 x LSTM ->
    Gemm decoder -> logits [steps, batch, vocab].  Weights uniform in +-0.05 as in the paper."""
    mb = OnnxModelBuilder("lstm_lm", seed)
    tokens = mb.input("tokens", (LSTM_STEPS, batch), np.int64)
    emb = mb.uniform((LSTM_VOCAB, LSTM_HIDDEN), 0.1, "embedding")
    y = mb.node("Gather", [emb, tokens], "embed", axis=0)                  # [steps, batch, hidden]
    h = LSTM_HIDDEN
    for layer in range(LSTM_LAYERS):
        w = mb.uniform((1, 4 * h, h), 0.05, f"lstm{layer}_W")
        r = mb.uniform((1, 4 * h, h), 0.05, f"lstm{layer}_R")
        b = mb.uniform((1, 8 * h), 0.05, f"lstm{layer}_B")
        y = mb.node("LSTM", [y, w, r, b], f"lstm{layer}", hidden_size=h)   # [steps, 1, batch, hidden]
        y = mb.node("Squeeze", [y, mb.ints([1], f"lstm{layer}_axes")], f"lstm{layer}_squeeze")
    y = mb.reshape(y, (LSTM_STEPS * batch, h), "flatten")
    y = mb.dense(y, h, LSTM_VOCAB, "decoder", gain=1.0)
    y = mb.reshape(y, (LSTM_STEPS, batch, LSTM_VOCAB), "logits")
    model = mb.finish([(y, (LSTM_STEPS, batch, LSTM_VOCAB))])
    tokens_in = mb.rng.integers(0, LSTM_VOCAB, size=(LSTM_STEPS, batch)).astype(np.int64)
    return model, {"tokens": tokens_in}


# -- BERT-style encoder ---------------------------------------------------------------------------
BERT_VOCAB, BERT_MAX_POS, BERT_HIDDEN, BERT_HEADS, BERT_LAYERS, BERT_SEQ, BERT_FFN = \
    30522, 512, 256, 4, 4, 128, 1024


def _attention(mb: OnnxModelBuilder, x: str, batch: int, base: str) -> str:
    """Multi-head self attention: Q/K/V projections, head split, softmax(QK^T / sqrt(d)) V."""
    s, hid, heads = BERT_SEQ, BERT_HIDDEN, BERT_HEADS
    d = hid // heads

    def heads_of(name: str) -> str:
        y = mb.reshape(mb.linear(x, hid, hid, f"{base}_{name}"), (batch, s, heads, d), f"{base}_{name}_split")
        return mb.node("Transpose", [y], f"{base}_{name}_heads", perm=[0, 2, 1, 3])   # [b, heads, s, d]

    q, k, v = heads_of("q"), heads_of("k"), heads_of("v")
    kt = mb.node("Transpose", [k], f"{base}_kt", perm=[0, 1, 3, 2])
    scores = mb.node("MatMul", [q, kt], f"{base}_scores")
    scale = mb.const(np.array(1.0 / np.sqrt(d), np.float32), f"{base}_scale")
    probs = mb.node("Softmax", [mb.node("Mul", [scores, scale], f"{base}_scaled")], f"{base}_probs", axis=-1)
    ctx = mb.node("MatMul", [probs, v], f"{base}_context")
    ctx = mb.node("Transpose", [ctx], f"{base}_merge", perm=[0, 2, 1, 3])
    ctx = mb.reshape(ctx, (batch, s, hid), f"{base}_merged")
    return mb.linear(ctx, hid, hid, f"{base}_out")


def _gelu(mb: OnnxModelBuilder, x: str, base: str) -> str:
    """Exact GELU through Erf (opset 17 has no Gelu op): x * 0.5 * (1 + erf(x / sqrt(2)))."""
    inv_sqrt2 = mb.const(np.array(1.0 / np.sqrt(2.0), np.float32), f"{base}_inv_sqrt2")
    one = mb.const(np.array(1.0, np.float32), f"{base}_one")
    half = mb.const(np.array(0.5, np.float32), f"{base}_half")
    erf = mb.node("Erf", [mb.node("Mul", [x, inv_sqrt2], f"{base}_div")], f"{base}_erf")
    return mb.node("Mul", [mb.node("Mul", [x, half], f"{base}_half"),
                           mb.node("Add", [erf, one], f"{base}_plus1")], base)


def _encoder_layer(mb: OnnxModelBuilder, x: str, batch: int, base: str) -> str:
    """Post-LN transformer layer: LN(x + attn(x)), then LN(y + ffn(y)) with a GELU FFN."""
    y = mb.layer_norm(mb.node("Add", [x, _attention(mb, x, batch, f"{base}_attn")], f"{base}_res1"),
                      BERT_HIDDEN, f"{base}_ln1")
    f = _gelu(mb, mb.linear(y, BERT_HIDDEN, BERT_FFN, f"{base}_ffn1"), f"{base}_gelu")
    f = mb.linear(f, BERT_FFN, BERT_HIDDEN, f"{base}_ffn2")
    return mb.layer_norm(mb.node("Add", [y, f], f"{base}_res2"), BERT_HIDDEN, f"{base}_ln2")


def bert_encoder(batch: int = 1, seed: int = 0):
    """BERT-style encoder: 4 layers, hidden 256, 4 heads, sequence 128; token + position
    embeddings through Gather, LayerNormalization, Erf-GELU, Softmax attention.
    input_ids [batch, seq] -> hidden states [batch, seq, hidden]."""
    mb = OnnxModelBuilder("bert_encoder", seed)
    ids = mb.input("input_ids", (batch, BERT_SEQ), np.int64)
    tok = mb.node("Gather", [mb.normal((BERT_VOCAB, BERT_HIDDEN), 0.02, "token_embedding"), ids],
                  "token_embed", axis=0)
    positions = mb.ints(np.arange(BERT_SEQ).reshape(1, BERT_SEQ), "position_ids")
    pos = mb.node("Gather", [mb.normal((BERT_MAX_POS, BERT_HIDDEN), 0.02, "position_embedding"), positions],
                  "position_embed", axis=0)
    y = mb.layer_norm(mb.node("Add", [tok, pos], "embed"), BERT_HIDDEN, "embed_ln")
    for layer in range(BERT_LAYERS):
        y = _encoder_layer(mb, y, batch, f"layer{layer}")
    model = mb.finish([(y, (batch, BERT_SEQ, BERT_HIDDEN))])
    ids_in = mb.rng.integers(0, BERT_VOCAB, size=(batch, BERT_SEQ)).astype(np.int64)
    return model, {"input_ids": ids_in}
