"""ImageDecoder on the host: lossless encodings decode to the exact pixels, in RGB, BGR and
Grayscale; an undecodable stream gives an empty image; a missing Pillow says how to install it."""
from __future__ import annotations

import io
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx_host_helpers import run

from tensorforge.errors import MissingDependencyError

Image = pytest.importorskip("PIL.Image")
U8 = TensorProto.UINT8


def encoded(pixels: np.ndarray, fmt: str) -> np.ndarray:
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format=fmt)
    return np.frombuffer(buf.getvalue(), dtype=np.uint8).copy()


def decode(stream: np.ndarray, pixel_format: str | None = None) -> np.ndarray:
    attrs = {"pixel_format": pixel_format} if pixel_format else {}
    return run([helper.make_node("ImageDecoder", ["s"], ["y"], **attrs)], {"s": stream}, {"y": U8})[0]


PIXELS = np.random.default_rng(5).integers(0, 256, size=(7, 11, 3), dtype=np.uint8)


@pytest.mark.parametrize("fmt", ["PNG", "BMP", "TIFF", "PPM"])
def test_lossless_formats_decode_exactly(fmt):
    stream = encoded(PIXELS, fmt)
    rgb = decode(stream)
    assert rgb.dtype == np.uint8 and rgb.shape == (7, 11, 3)
    np.testing.assert_array_equal(rgb, PIXELS)
    np.testing.assert_array_equal(decode(stream, "BGR"), PIXELS[:, :, ::-1])


def test_grayscale_is_601_luma():
    gray = decode(encoded(PIXELS, "PNG"), "Grayscale")
    assert gray.shape == (7, 11, 1)
    luma = PIXELS.astype(np.float64) @ np.array([0.299, 0.587, 0.114])
    np.testing.assert_allclose(gray[:, :, 0], luma, atol=1.0)


def test_jpeg_decodes_close_to_the_source():
    smooth = np.broadcast_to(np.linspace(0, 255, 16, dtype=np.uint8)[None, :, None], (16, 16, 3)).copy()
    out = decode(encoded(smooth, "JPEG"))
    assert out.shape == (16, 16, 3)
    assert np.abs(out.astype(int) - smooth).max() <= 8


def test_undecodable_stream_gives_an_empty_image():
    out = decode(np.frombuffer(b"not an image at all", dtype=np.uint8).copy(), "Grayscale")
    assert out.shape == (0, 0, 1) and out.dtype == np.uint8


def test_missing_pillow_names_the_extra(monkeypatch):
    stream = encoded(PIXELS, "PNG")
    monkeypatch.setitem(sys.modules, "PIL", None)
    with pytest.raises(MissingDependencyError, match=r"ImageDecoder needs Pillow: pip install 'tensorforge\[image\]'"):
        decode(stream)
