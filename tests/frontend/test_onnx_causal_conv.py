"""ONNX CausalConvWithState (opset 27): the compiled model against a NumPy causal depthwise
convolution, with and without past state and bias, the SiLU activation, kernel size one,
float16 (accumulated in float32), and clear errors."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx_compiled_helpers import compile_and_run, one_node_model, rand  # noqa: E402

from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.ir import GraphError  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:model .* declares ONNX opset")


def causal_conv_reference(x, w, bias=None, past=None, activation="none"):
    batch, channels, length = x.shape
    k = w.shape[2]
    pad = np.zeros((batch, channels, k - 1), np.float32) if past is None else past.astype(np.float32)
    padded = np.concatenate([pad, x.astype(np.float32)], axis=2)
    y = np.zeros((batch, channels, length), np.float32)
    for t in range(length):
        y[:, :, t] = np.sum(padded[:, :, t:t + k] * w[None, :, 0, :].astype(np.float32), axis=2)
    if bias is not None:
        y += bias.astype(np.float32)[None, :, None]
    y = y.astype(x.dtype).astype(np.float32)
    if activation != "none":
        y = y / (1 + np.exp(-y))
    return y.astype(x.dtype), padded[:, :, length:].astype(x.dtype) if k > 1 else np.zeros((batch, channels, 0), x.dtype)


@pytest.mark.parametrize("k, with_bias, with_past, activation", [
    (4, False, False, "none"), (3, True, True, "none"), (4, False, True, "silu"), (2, True, False, "swish"),
    (1, True, False, "none"),
])
def test_causal_conv(k, with_bias, with_past, activation):
    x, w = rand((2, 5, 7), seed=1), rand((5, 1, k), seed=2)
    bias = rand((5,), seed=3) if with_bias else None
    past = rand((2, 5, k - 1), seed=4) if with_past else None
    model, feeds = one_node_model("CausalConvWithState", {"x": x, "w": w, "b": bias, "past": past},
                                  dict(activation=activation), outputs=("y", "state"), opset=27)
    y, state = compile_and_run(model, feeds)
    want_y, want_state = causal_conv_reference(x, w, bias, past, activation)
    np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-5)
    assert state.shape == want_state.shape
    np.testing.assert_array_equal(state, want_state)


def test_causal_conv_decode_step_float16():
    x, w, past = rand((1, 3, 1), "float16", 1), rand((3, 1, 4), "float16", 2), rand((1, 3, 3), "float16", 3)
    model, feeds = one_node_model("CausalConvWithState", {"x": x, "w": w, "b": None, "past": past},
                                  dict(activation="silu"), outputs=("y", "state"), opset=27)
    y, state = compile_and_run(model, feeds)
    want_y, want_state = causal_conv_reference(x, w, None, past, "silu")
    assert y.dtype == np.float16
    np.testing.assert_allclose(y.astype(np.float32), want_y.astype(np.float32), rtol=1e-3, atol=1e-3)
    np.testing.assert_array_equal(state, want_state)


def test_causal_conv_errors_are_named():
    x, w = rand((2, 5, 7)), rand((5, 1, 3))
    model, _ = one_node_model("CausalConvWithState", {"x": x, "w": w}, dict(activation="gelu"),
                              outputs=("y", "state"), opset=27)
    with pytest.raises(GraphError, match="activation 'gelu' is not one of"):
        from_onnx(model)
    model, _ = one_node_model("CausalConvWithState", {"x": x, "w": w, "b": None, "past": rand((2, 5, 3))},
                              outputs=("y", "state"), opset=27)
    with pytest.raises(GraphError, match=r"past_state has shape \(2, 5, 3\), expected \(2, 5, 2\)"):
        from_onnx(model)
