"""ONNX DFT (opsets 17 and 20) and STFT: the compiled model against numpy.fft for real and
complex signals, forward and inverse, one-sided spectra (rfft / irfft), a dft_length that pads or
truncates, the axis as an attribute and as an input, frames with and without a window."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx_compiled_helpers import compile_and_run, one_node_model, rand  # noqa: E402

from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.ir import GraphError  # noqa: E402


def as_complex(x):
    return x[..., 0] if x.shape[-1] == 1 else x[..., 0] + 1j * x[..., 1]


def as_parts(z):
    return np.stack([z.real, z.imag], axis=-1)


def dft_reference(x, axis, n=None, inverse=False, onesided=False):
    z = as_complex(x.astype(np.float64))
    if inverse and onesided:
        n = n or 2 * (x.shape[axis] - 1)
        return np.fft.irfft(z, n=n, axis=axis)[..., None]
    n = n or x.shape[axis]
    y = np.fft.ifft(z, n=n, axis=axis) if inverse else np.fft.fft(z, n=n, axis=axis)
    if onesided:
        y = np.take(y, np.arange(n // 2 + 1), axis=axis)
    return as_parts(y)


CASES = [  # shape, axis, dft_length, inverse, onesided
    ((2, 8, 3, 1), 1, None, False, False), ((2, 8, 3, 2), 2, None, False, False),
    ((3, 9, 1), 1, None, False, True), ((2, 6, 4, 2), 1, 10, False, False), ((2, 6, 2), 1, 4, False, True),
    ((2, 5, 3, 2), 1, None, True, False), ((2, 5, 3, 2), 1, 7, True, True), ((2, 5, 2), 1, None, True, True),
    ((4, 6, 2), 0, 3, True, False),
]


@pytest.mark.parametrize("shape, axis, n, inverse, onesided", CASES)
@pytest.mark.parametrize("opset", [17, 20])
def test_dft(shape, axis, n, inverse, onesided, opset):
    x = rand(shape, seed=1)
    attrs = dict(inverse=int(inverse), onesided=int(onesided))
    inputs = {"x": x, "n": np.array(n, np.int64) if n is not None else None}
    if opset >= 20:
        inputs["axis"] = np.array(axis - len(shape), np.int64)      # negative axes count from the back
    else:
        attrs["axis"] = axis
    model, feeds = one_node_model("DFT", inputs, attrs, opset=opset, consts=("n", "axis"))
    (y,) = compile_and_run(model, feeds)
    np.testing.assert_allclose(y, dft_reference(x, axis, n, inverse, onesided), rtol=1e-4, atol=1e-4)


def test_dft_opset20_default_axis_is_minus_two():
    x = rand((2, 3, 8, 1), seed=2)
    model, feeds = one_node_model("DFT", {"x": x}, {}, opset=20)
    (y,) = compile_and_run(model, feeds)
    np.testing.assert_allclose(y, dft_reference(x, 2), rtol=1e-4, atol=1e-4)


def test_dft_rejects_the_complex_axis():
    model, _ = one_node_model("DFT", {"x": rand((2, 4, 1))}, dict(axis=2), opset=17)
    with pytest.raises(GraphError, match="not its last"):
        from_onnx(model)


def stft_reference(signal, step, length, window=None, onesided=True):
    frames = (signal.shape[1] - length) // step + 1
    window = np.ones(length) if window is None else window.astype(np.float64)
    z = as_complex(signal.astype(np.float64))
    framed = np.stack([z[:, f * step:f * step + length] * window for f in range(frames)], axis=1)
    y = np.fft.fft(framed, axis=2)
    return as_parts(y[:, :, :length // 2 + 1] if onesided else y)


@pytest.mark.parametrize("parts, with_window, onesided", [(1, False, 1), (1, True, 1), (2, True, 0), (1, True, 0)])
def test_stft(parts, with_window, onesided):
    signal = rand((2, 40, parts), seed=3)
    window = np.hanning(12).astype(np.float32) if with_window else None
    inputs = {"signal": signal, "step": np.array(5, np.int64), "window": window,
              "length": None if with_window else np.array(12, np.int64)}
    model, feeds = one_node_model("STFT", inputs, dict(onesided=onesided), opset=17,
                                  consts=("step", "window", "length"))
    (y,) = compile_and_run(model, feeds)
    np.testing.assert_allclose(y, stft_reference(signal, 5, 12, window, bool(onesided)), rtol=1e-4, atol=1e-4)
