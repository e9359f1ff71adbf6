"""depthwise_integer_rows: an int8 depthwise convolution on an image held as rows (N * H * W, C),
the layout the int8 products write (graph/passes/alter_layout_int8.py), with its result in that
layout too (ops -> TE).

    depthwise_integer_rows(x, w, corr)[(n * OH + oh) * OW + ow, c]
        = sum_{kh, kw} xp[n, oh * sh + kh * dh, ow * sw + kw * dw, c] * w[kh * KW + kw, c] - corr[c]

xp is x as (N, H, W, C) padded with pad_value (x's zero point); w (KH * KW, C) holds the int8
weights as float32; corr[c] = pad_value * sum_k w[k, c] (so padded cells add nothing, as in
conv_integer's (x - zx) * w).  The sum runs in float32: each product is an integer of at most
255 * 128 in magnitude and a sum of up to 512 of them stays below 2^24, so every partial sum is
exact and FMA units (two per core, where the int32 multiply has one) do the work; the total
converts back to int32 exactly.  Attributes: image (N, H, W), kernel (KH, KW), strides,
padding (top, left, bottom, right), dilations, pad_value.

Stages: "dw_pad" (xp, 8-bit like x: the copy is a quarter of a float32 one, and a tap converts
its vector of bytes on the way to the FMA), "dw_acc" (the float sum, (N * OH * OW, C)) and the main stage
(int32, the correction subtracted).  Its CPU template `depthwise_integer_rows.cpu` keeps a tile
of pixels x one vector of channels in registers across the KH * KW taps and applies the
epilogue (bias, requantize, relu) to it.  Pattern complex-out-fusable.
"""
from __future__ import annotations

import numpy as np

from .. import te
from ..ir.expr import const
from .common import const_shape
from .nn_window import out_spatial, spatial_attrs
from .registry import COMPLEX, OpError, TensorType, op

MAX_TAPS = 512          # taps whose exact float32 sum of u8 x s8 products fits 24 bits

_DEFAULTS = {"strides": None, "padding": None, "dilations": None, "pad_value": 0}


def rows_window_geometry(name: str, x_shape: tuple, image, kernel, strides, padding, dilations,
                         max_taps: int | None = None) -> tuple:
    """(n, h, w, kernel, strides, padding, dilations, oh, ow) of a window op on rows x of an
    (N, H, W) image (this op's and max_pool_rows'), OpError naming `name` when they disagree or
    the window has more than `max_taps` taps."""
    n, h, w = (int(d) for d in image)
    if len(x_shape) != 2 or int(x_shape[0]) != n * h * w:
        raise OpError(f"{name}: x must be rows ({n * h * w}, C) of image {tuple(image)}, got shape {tuple(x_shape)}")
    kernel = tuple(int(k) for k in kernel)
    if max_taps is not None and kernel[0] * kernel[1] > max_taps:
        raise OpError(f"{name}: a {kernel} window has more than {max_taps} taps, whose float32 "
                      "sum would not be exact")
    s, p, d = spatial_attrs(name, 2, strides, padding, dilations)
    oh, ow = out_spatial(name, (h, w), kernel, s, p, d)
    return n, h, w, kernel, s, p, d, oh, ow


def _geometry(x_shape: tuple, image, kernel, strides, padding, dilations) -> tuple:
    return rows_window_geometry("depthwise_integer_rows", x_shape, image, kernel, strides, padding, dilations,
                                MAX_TAPS)


@op("depthwise_integer_rows", COMPLEX, schedule={"cpu": "depthwise_integer_rows.cpu"}, attr_defaults=_DEFAULTS)
class depthwise_integer_rows:
    @staticmethod
    def infer(x: TensorType, w: TensorType, corr: TensorType, image, kernel, strides=None, padding=None,
              dilations=None, pad_value=0) -> TensorType:
        if x is None or w is None or corr is None:
            raise OpError("depthwise_integer_rows: needs x, the weights and the correction")
        n, _, _, (kh, kw), _, _, _, oh, ow = _geometry(tuple(x.shape), image, kernel, strides, padding, dilations)
        c = x.shape[1]
        if x.dtype != "uint8" or w.dtype != "float32" or corr.dtype != "int32":
            raise OpError(f"depthwise_integer_rows: expects uint8 x, float32 weights and int32 correction, got "
                          f"{x.dtype}, {w.dtype} and {corr.dtype}")
        if tuple(w.shape) != (kh * kw, c) or tuple(corr.shape) != (c,):
            raise OpError(f"depthwise_integer_rows: weights must be ({kh * kw}, {c}) and the correction ({c},), "
                          f"got {tuple(w.shape)} and {tuple(corr.shape)}")
        return TensorType((n * oh * ow, c), "int32")

    @staticmethod
    def compute(x: te.Tensor, w: te.Tensor, corr: te.Tensor, image, kernel, strides=None, padding=None,
                dilations=None, pad_value=0) -> te.Tensor:
        n, h, wd, (kh, kw), s, p, d, oh, ow = _geometry(const_shape(x), image, kernel, strides, padding, dilations)
        c = const_shape(x)[1]
        hp, wp = h + p[0] + p[2], wd + p[1] + p[3]

        def padded(b, y, z, ch):
            inside = (y >= p[0]) & (y < p[0] + h) & (z >= p[1]) & (z < p[1] + wd)
            return te.if_then_else(inside, x[(b * h + y - p[0]) * wd + z - p[1], ch], const(pad_value, x.dtype))

        xp = te.compute((n, hp, wp, c), padded, name="dw_pad")
        ry = te.reduce_axis((0, kh), name="ry")
        rx = te.reduce_axis((0, kw), name="rx")

        def tap(r, ch):
            b, rest = r // (oh * ow), r % (oh * ow)
            y = (rest // ow) * s[0] + ry * d[0]
            z = (rest % ow) * s[1] + rx * d[1]
            return te.sum(xp[b, y, z, ch].astype("float32") * w[ry * kw + rx, ch], axis=[ry, rx])

        acc = te.compute((n * oh * ow, c), tap, name="dw_acc", attrs={"window": (oh, ow)})
        return te.compute((n * oh * ow, c), lambda r, ch: acc[r, ch].astype("int32") - corr[ch],
                          name="depthwise_integer_rows", tag="depthwise_integer_rows")

    @staticmethod
    def reference(x: np.ndarray, w: np.ndarray, corr: np.ndarray, image, kernel, strides=None, padding=None,
                  dilations=None, pad_value=0) -> np.ndarray:
        n, h, wd, (kh, kw), s, p, d, oh, ow = _geometry(x.shape, image, kernel, strides, padding, dilations)
        c = x.shape[1]
        xp = np.full((n, h + p[0] + p[2], wd + p[1] + p[3], c), pad_value, np.int64)
        xp[:, p[0]:p[0] + h, p[1]:p[1] + wd] = x.reshape(n, h, wd, c)
        out = np.zeros((n, oh, ow, c), np.int64)
        wi = np.rint(w).astype(np.int64)
        for i in range(kh):
            for j in range(kw):
                out += xp[:, i * d[0]:i * d[0] + s[0] * oh:s[0], j * d[1]:j * d[1] + s[1] * ow:s[1]] * wi[i * kw + j]
        return (out.reshape(n * oh * ow, c) - corr.astype(np.int64)).astype(np.int32)
