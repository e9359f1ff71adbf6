"""ONNX LinearAttention (opset 27): the compiled model against a NumPy recurrence for the four
update rules, grouped heads, per-head and per-key decay, a shared beta, a past state, float16,
and clear errors for bad attribute / input combinations."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx_compiled_helpers import compile_and_run, one_node_model, rand  # noqa: E402

from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.ir import GraphError  # noqa: E402


def linear_attention_reference(q, k, v, past, decay, beta, q_heads, kv_heads, rule, scale=0.0):
    """The recurrence, one token at a time, per batch and query head."""
    b, steps, _ = q.shape
    d_k, d_v = q.shape[2] // q_heads, v.shape[2] // kv_heads
    group = q_heads // kv_heads
    scale = scale or 1.0 / np.sqrt(d_k)
    state = np.zeros((b, kv_heads, d_k, d_v)) if past is None else past.astype(np.float64)
    out = np.zeros((b, steps, q_heads, d_v))
    for n in range(b):
        for h in range(kv_heads):
            s = state[n, h]
            for t in range(steps):
                kt = k[n, t, h * d_k:(h + 1) * d_k].astype(np.float64)
                vt = v[n, t, h * d_v:(h + 1) * d_v].astype(np.float64)
                if rule in ("gated", "gated_delta"):
                    gt = decay[n, t]
                    gt = gt[h] if gt.size == kv_heads else gt[h * d_k:(h + 1) * d_k]
                    s = s * np.exp(np.asarray(gt, np.float64)).reshape(-1, 1)
                if rule in ("delta", "gated_delta"):
                    bt = beta[n, t, 0 if beta.shape[2] == 1 else h]
                    vt = bt * (vt - s.T @ kt)
                s = s + np.outer(kt, vt)
                for j in range(group):
                    qh = h * group + j
                    out[n, t, qh] = scale * q[n, t, qh * d_k:(qh + 1) * d_k] @ s
            state[n, h] = s
    return out.reshape(b, steps, -1), state


def case(rule, b=2, steps=4, q_heads=2, kv_heads=2, d_k=3, d_v=4, past=False, decay_per_key=False,
         beta_shared=False, dtype="float32", **attrs):
    inputs = {"q": rand((b, steps, q_heads * d_k), dtype, 1, 0.5), "k": rand((b, steps, kv_heads * d_k), dtype, 2, 0.5),
              "v": rand((b, steps, kv_heads * d_v), dtype, 3),
              "past": rand((b, kv_heads, d_k, d_v), dtype, 4) if past else None, "decay": None, "beta": None}
    if rule in ("gated", "gated_delta"):
        inputs["decay"] = -np.abs(rand((b, steps, kv_heads * (d_k if decay_per_key else 1)), dtype, 5))
    if rule in ("delta", "gated_delta"):
        inputs["beta"] = (1 / (1 + np.exp(-rand((b, steps, 1 if beta_shared else kv_heads), "float64", 6)))).astype(dtype)
    attrs = dict(update_rule=rule, q_num_heads=q_heads, kv_num_heads=kv_heads, **attrs)
    return one_node_model("LinearAttention", inputs, attrs, outputs=("y", "state"), opset=27), inputs, attrs


@pytest.mark.filterwarnings("ignore:model .* declares ONNX opset")
@pytest.mark.parametrize("rule, options", [
    ("linear", {}), ("linear", dict(past=True, scale=0.3)), ("gated", {}), ("gated", dict(decay_per_key=True)),
    ("delta", dict(past=True)), ("gated_delta", {}), ("gated_delta", dict(q_heads=4, kv_heads=2, beta_shared=True)),
    ("gated_delta", dict(q_heads=3, kv_heads=1, steps=1, past=True, decay_per_key=True)),
    ("linear", dict(q_heads=4, kv_heads=2, past=True, steps=6)), ("gated", dict(q_heads=6, kv_heads=2, past=True)),
    ("gated", dict(steps=1, past=True)),
])
def test_linear_attention_rules(rule, options):
    (model, feeds), inputs, attrs = case(rule, **options)
    y, state = compile_and_run(model, feeds)
    want_y, want_state = linear_attention_reference(inputs["q"], inputs["k"], inputs["v"], inputs["past"],
                                                    inputs["decay"], inputs["beta"], attrs["q_num_heads"],
                                                    attrs["kv_num_heads"], rule, attrs.get("scale", 0.0))
    np.testing.assert_allclose(y, want_y, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(state, want_state, rtol=1e-4, atol=1e-5)


@pytest.mark.filterwarnings("ignore:model .* declares ONNX opset")
def test_linear_attention_float16_keeps_dtypes():
    (model, feeds), _, _ = case("gated_delta", dtype="float16", past=True)
    y, state = compile_and_run(model, feeds)
    assert y.dtype == np.float16 and state.dtype == np.float16
    f = {k: (a.astype(np.float32) if a is not None else None) for k, a in
         {"q": feeds["q"], "k": feeds["k"], "v": feeds["v"], "past": feeds["past"], "decay": feeds["decay"],
          "beta": feeds["beta"]}.items()}
    want_y, want_state = linear_attention_reference(f["q"], f["k"], f["v"], f["past"], f["decay"], f["beta"],
                                                    2, 2, "gated_delta")
    np.testing.assert_allclose(y.astype(np.float32), want_y, rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(state.astype(np.float32), want_state, rtol=1e-2, atol=1e-2)


@pytest.mark.filterwarnings("ignore:model .* declares ONNX opset")
@pytest.mark.parametrize("rule, drop, message", [
    ("gated", "decay", "requires the decay input"), ("delta", "beta", "requires the beta input"),
])
def test_linear_attention_missing_inputs_are_named(rule, drop, message):
    _, inputs, _ = case(rule)
    inputs = dict(inputs, **{drop: None})
    model, _ = one_node_model("LinearAttention", inputs, dict(update_rule=rule, q_num_heads=2, kv_num_heads=2),
                              outputs=("y", "state"), opset=27)
    with pytest.raises(GraphError, match=message):
        from_onnx(model)


@pytest.mark.filterwarnings("ignore:model .* declares ONNX opset")
def test_linear_attention_bad_head_counts_are_named():
    (model, _), _, _ = case("linear", q_heads=3, kv_heads=2, d_k=2)
    with pytest.raises(GraphError, match="positive multiple of kv_num_heads"):
        from_onnx(model)


@pytest.mark.filterwarnings("ignore:model .* declares ONNX opset")
@pytest.mark.parametrize("rule, closed_form", [("linear", True), ("gated", True), ("delta", False)])
def test_linear_attention_graph_size(rule, closed_form):
    """The linear and per-head gated rules convert to a graph whose size does not depend on the
    sequence length; the delta rules unroll one step at a time."""
    sizes = [len(from_onnx(case(rule, steps=steps)[0][0]).nodes) for steps in (4, 12)]
    assert (sizes[0] == sizes[1]) == closed_form, sizes
