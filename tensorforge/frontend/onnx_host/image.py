"""ImageDecoder (opset 20) on the host, through Pillow (the optional `image` extra).

The input is the bytes of an encoded image (BMP, JPEG, JPEG 2000, TIFF, PNG, WebP, PNM) as a
1-D uint8 tensor; the output is the decoded image, height x width x channels in uint8, with
channels RGB (the default), BGR, or one Grayscale channel (ITU-R 601-2 luma).  As the spec
says, a stream that cannot be decoded gives an empty image ([0, 0, channels]).  Pillow decodes
JPEG with libjpeg(-turbo)'s default "fancy" chroma upsampling, which is what ONNX specifies.
"""
from __future__ import annotations

import io

import numpy as np

from ...errors import MissingDependencyError
from . import host_op

_CHANNELS = {"RGB": 3, "BGR": 3, "Grayscale": 1}


def _pillow():
    try:
        from PIL import Image
    except ImportError:
        raise MissingDependencyError("ImageDecoder needs Pillow: pip install 'tensorforge[image]' "
                                     "(or pip install pillow)") from None
    return Image


def decode(data: bytes, pixel_format: str) -> np.ndarray:
    """The image in `data` as uint8 [H, W, C] in `pixel_format`; [0, 0, C] when undecodable."""
    image_module = _pillow()
    channels = _CHANNELS[pixel_format]
    try:
        with image_module.open(io.BytesIO(data)) as img:
            img.load()
            converted = img.convert("L" if pixel_format == "Grayscale" else "RGB")
    except Exception:     # any decoder failure: the spec's empty image
        return np.zeros((0, 0, channels), dtype=np.uint8)
    arr = np.asarray(converted, dtype=np.uint8)
    if pixel_format == "Grayscale":
        return np.ascontiguousarray(arr[:, :, None])
    if pixel_format == "BGR":
        return np.ascontiguousarray(arr[:, :, ::-1])
    return np.ascontiguousarray(arr)


@host_op("ImageDecoder")
def image_decoder(ctx, inputs, attrs):
    stream = np.asarray(inputs[0])
    if stream.dtype != np.uint8 or stream.ndim != 1:
        raise ctx.error(f"encoded_stream must be a 1-D uint8 tensor, got {stream.dtype.name} "
                        f"of shape {list(stream.shape)}")
    pixel_format = str(attrs.get("pixel_format", "RGB"))
    if pixel_format not in _CHANNELS:
        raise ctx.error(f"pixel_format must be RGB, BGR or Grayscale, got {pixel_format!r}")
    return [decode(stream.tobytes(), pixel_format)]
