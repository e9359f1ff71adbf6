"""max_pool_rows: 2-D max pooling of an image held as rows (N * H * W, C), the layout the int8
products write (graph/passes/alter_layout_int8.py), with its result in that layout (ops -> TE).

    max_pool_rows(x)[(n * OH + oh) * OW + ow, c] = max_{kh, kw} xp[n, oh * sh + kh * dh, ow * sw + kw * dw, c]

xp is x as (N, H, W, C) padded with the dtype's minimum (it never wins).  On 8-bit data it is the
QDQ model's dequantize -> max pool -> quantize with one scale and zero point (the form
quantization tools give pooling): the dequantization is increasing, so the maximum commutes
with it, and quantizing a dequantized value with the same parameters gives it back.
Attributes: image (N, H, W), kernel (KH, KW), strides, padding (top, left, bottom, right),
dilations.  Stages "pool_pad" and "pool_acc" (the maximum), like depthwise_integer_rows', whose
CPU template schedules both (`max_pool_rows.cpu`).  Pattern complex-out-fusable.
"""
from __future__ import annotations

import numpy as np

from .. import te
from ..ir import dtype as dt
from ..ir.expr import const
from .common import const_shape
from .quant_depthwise_rows import rows_window_geometry
from .registry import COMPLEX, OpError, TensorType, op

_DEFAULTS = {"strides": None, "padding": None, "dilations": None}


def _geometry(x_shape: tuple, image, kernel, strides, padding, dilations) -> tuple:
    return rows_window_geometry("max_pool_rows", x_shape, image, kernel, strides, padding, dilations)


@op("max_pool_rows", COMPLEX, schedule={"cpu": "max_pool_rows.cpu"}, attr_defaults=_DEFAULTS)
class max_pool_rows:
    @staticmethod
    def infer(x: TensorType, image, kernel, strides=None, padding=None, dilations=None) -> TensorType:
        if x is None:
            raise OpError("max_pool_rows: needs x")
        n, _, _, _, _, _, _, oh, ow = _geometry(tuple(x.shape), image, kernel, strides, padding, dilations)
        return TensorType((n * oh * ow, x.shape[1]), x.dtype)

    @staticmethod
    def compute(x: te.Tensor, image, kernel, strides=None, padding=None, dilations=None) -> te.Tensor:
        n, h, wd, (kh, kw), s, p, d, oh, ow = _geometry(const_shape(x), image, kernel, strides, padding, dilations)
        c = const_shape(x)[1]
        lowest = dt.value_range(x.dtype)[0]

        def padded(b, y, z, ch):
            inside = (y >= p[0]) & (y < p[0] + h) & (z >= p[1]) & (z < p[1] + wd)
            return te.if_then_else(inside, x[(b * h + y - p[0]) * wd + z - p[1], ch], const(lowest, x.dtype))

        xp = te.compute((n, h + p[0] + p[2], wd + p[1] + p[3], c), padded, name="pool_pad")
        ry = te.reduce_axis((0, kh), name="ry")
        rx = te.reduce_axis((0, kw), name="rx")

        def window(r, ch):
            b, rest = r // (oh * ow), r % (oh * ow)
            return te.max(xp[b, (rest // ow) * s[0] + ry * d[0], (rest % ow) * s[1] + rx * d[1], ch], axis=[ry, rx])

        acc = te.compute((n * oh * ow, c), window, name="pool_acc", attrs={"window": (oh, ow)})
        return te.compute((n * oh * ow, c), lambda r, ch: acc[r, ch], name="max_pool_rows", tag="max_pool_rows")

    @staticmethod
    def reference(x: np.ndarray, image, kernel, strides=None, padding=None, dilations=None) -> np.ndarray:
        n, h, wd, (kh, kw), s, p, d, oh, ow = _geometry(x.shape, image, kernel, strides, padding, dilations)
        c = x.shape[1]
        lowest = dt.value_range(x.dtype.name)[0]
        xp = np.full((n, h + p[0] + p[2], wd + p[1] + p[3], c), lowest, x.dtype)
        xp[:, p[0]:p[0] + h, p[1]:p[1] + wd] = x.reshape(n, h, wd, c)
        out = np.full((n, oh, ow, c), lowest, x.dtype)
        for i in range(kh):
            for j in range(kw):
                out = np.maximum(out, xp[:, i * d[0]:i * d[0] + s[0] * oh:s[0], j * d[1]:j * d[1] + s[1] * ow:s[1]])
        return out.reshape(n * oh * ow, c)
