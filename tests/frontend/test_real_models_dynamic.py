"""Real models with symbolic dimensions, as they ship in PyPI wheels (skipped where the packages
are not installed: pip install --no-deps silero-vad rapidocr-onnxruntime): imported with no
shapes, compiled once, called with other shapes each time, every result matching ONNX Runtime."""
from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")


def _package_file(pkg: str, rel: str) -> str:
    spec = importlib.util.find_spec(pkg)
    path = os.path.join(list(spec.submodule_search_locations)[0], rel) if spec and spec.submodule_search_locations \
        else ""
    if not os.path.exists(path):
        pytest.skip(f"{pkg} is not installed")
    return path


def _check(path: str, calls: list[dict], atol: float) -> None:
    import tensorforge
    from tensorforge.frontend import from_onnx
    model = tensorforge.compile(from_onnx(path))
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for feeds in calls:
        for got, want in zip(model.run(**feeds), sess.run(None, feeds)):
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=atol)


def test_voice_activity_detector_built_around_an_if():
    path = _package_file("silero_vad", "data/silero_vad.onnx")
    rng = np.random.default_rng(0)
    state = np.zeros((2, 1, 128), np.float32)
    _check(path, [{"input": (0.1 * rng.standard_normal((1, n))).astype(np.float32), "state": state,
                   "sr": np.array(sr, np.int64)} for n, sr in ((512, 16000), (256, 8000), (512, 16000))], 1e-4)


def test_voice_activity_detector_over_audio_of_any_length():
    path = _package_file("silero_vad", "data/silero_vad_16k_sequence.onnx")
    rng = np.random.default_rng(1)
    zeros = np.zeros((1, 1, 128), np.float32)
    _check(path, [{"input": (0.1 * rng.standard_normal((n, 576))).astype(np.float32), "h": zeros, "c": zeros}
                  for n in (8, 3, 20)], 1e-4)


def test_text_detector_with_a_free_image_size():
    path = _package_file("rapidocr_onnxruntime", "models/ch_PP-OCRv4_det_infer.onnx")
    rng = np.random.default_rng(2)
    _check(path, [{"x": rng.standard_normal(s).astype(np.float32)} for s in ((1, 3, 96, 128), (2, 3, 64, 96))], 1e-4)
