"""ONNX HannWindow, HammingWindow, BlackmanWindow and MelWeightMatrix: the compiled model
(a constant) against NumPy's windows and a loop-by-loop triangular filter bank, periodic and
symmetric windows, the output_datatype attribute, and clear errors."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto  # noqa: E402
from onnx_compiled_helpers import compile_and_run, one_node_model  # noqa: E402

from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.ir import GraphError  # noqa: E402


def window_reference(kind, size, periodic):
    n = size + 1 if periodic else size          # a periodic window is the symmetric one of size + 1, cut
    if kind == "HannWindow":
        w = np.hanning(n)
    elif kind == "BlackmanWindow":
        w = np.blackman(n)
    else:
        w = 25 / 46 - 21 / 46 * np.cos(2 * np.pi * np.arange(n) / (n - 1))
    return w[:size]


@pytest.mark.parametrize("kind", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_window(kind, periodic):
    model, feeds = one_node_model(kind, {"size": np.array(10, np.int64)}, dict(periodic=periodic), opset=17,
                                  consts=("size",), out_dtypes={"y": np.float32})
    (y,) = compile_and_run(model, feeds)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, window_reference(kind, 10, periodic), rtol=1e-6, atol=1e-6)


def test_window_output_datatype():
    model, feeds = one_node_model("HannWindow", {"size": np.array(7, np.int32)},
                                  dict(output_datatype=TensorProto.DOUBLE), opset=17, consts=("size",),
                                  out_dtypes={"y": np.float64})
    (y,) = compile_and_run(model, feeds)
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, window_reference("HannWindow", 7, 1), rtol=1e-12)


def mel_reference(bins, length, rate, low, high):
    def to_mel(f):
        return 2595 * np.log10(1 + f / 700)

    def to_hz(m):
        return 700 * (10 ** (m / 2595) - 1)

    step = (to_mel(high) - to_mel(low)) / (bins + 2)
    corner = [int((length + 1) * to_hz(to_mel(low) + i * step) // rate) for i in range(bins + 2)]
    out = np.zeros((length // 2 + 1, bins))
    for i in range(bins):
        a, b, c = corner[i], corner[i + 1], corner[i + 2]
        for j in range(a, b + 1):
            out[j, i] = 1.0 if b == a else (j - a) / (b - a)
        for j in range(b, c):
            out[j, i] = (c - j) / (c - b)
    return out


def mel_inputs(bins=8, length=64, rate=8000, low=0.0, high=4000.0):
    return {"bins": np.array(bins, np.int64), "length": np.array(length, np.int64), "rate": np.array(rate, np.int64),
            "low": np.array(low, np.float32), "high": np.array(high, np.float32)}


@pytest.mark.parametrize("options", [{}, dict(bins=5, length=32, rate=16000, low=100.0, high=6000.0)])
def test_mel_weight_matrix(options):
    inputs = mel_inputs(**options)
    model, feeds = one_node_model("MelWeightMatrix", inputs, {}, opset=17, consts=tuple(inputs),
                                  out_dtypes={"y": np.float32})
    (y,) = compile_and_run(model, feeds)
    want = mel_reference(*(a.item() for a in inputs.values()))
    assert y.shape == want.shape
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-7)
    assert np.all(y.max(axis=0) == 1.0)                       # every filter peaks at 1


def test_mel_weight_matrix_bad_band_is_named():
    inputs = mel_inputs(low=3000.0, high=1000.0)
    model, _ = one_node_model("MelWeightMatrix", inputs, {}, opset=17, consts=tuple(inputs))
    with pytest.raises(GraphError, match="band edges"):
        from_onnx(model)
