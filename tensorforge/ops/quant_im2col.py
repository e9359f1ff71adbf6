"""im2col: the windows of a 2-D convolution as the rows of a matrix, so that the convolution is
one matrix product (ops -> TE).

    im2col(x)[(n * OH + oh) * OW + ow, (c * KH + kh) * KW + kw]
        = x[n, c, oh * sh - ph + kh * dh, ow * sw - pw + kw * dw]   (pad_value outside x)

x is (N, C, H, W); the result is (N * OH * OW, C * KH * KW), in x's dtype.  With the integer
convolutions the padding value is x's zero point, so padded cells add nothing.  Attributes:
kernel (KH, KW), strides, padding (top, left, bottom, right), dilations, pad_value.

Pattern complex-out-fusable, though the op is a gather: it reads each input element up to
KH * KW times, so fusing its producers into it (as an injective op would be) recomputes them
that often; as a master it stays a kernel of its own.  Its template `im2col.cpu` splits the
row and column axes back into (n, oh, ow) and (c, kh, kw), which leaves the indices free of
division.
"""
from __future__ import annotations

import numpy as np

from .. import te
from ..ir.expr import const
from .common import const_shape
from .nn_window import out_spatial, spatial_attrs
from .registry import COMPLEX, OpError, TensorType, op

_DEFAULTS = {"strides": None, "padding": None, "dilations": None, "pad_value": 0}


def _geometry(shape: tuple, kernel, strides, padding, dilations) -> tuple:
    if len(shape) != 4:
        raise OpError(f"im2col: x must be (N, C, H, W), got shape {tuple(shape)}")
    kernel = tuple(int(k) for k in kernel)
    s, p, d = spatial_attrs("im2col", 2, strides, padding, dilations)
    oh, ow = out_spatial("im2col", shape[2:], kernel, s, p, d)
    return kernel, s, p, d, oh, ow


@op("im2col", COMPLEX, schedule={"cpu": "im2col.cpu"}, attr_defaults=_DEFAULTS)
class im2col:
    @staticmethod
    def infer(x: TensorType, kernel, strides=None, padding=None, dilations=None, pad_value=0) -> TensorType:
        if x is None:
            raise OpError("im2col: needs x")
        (kh, kw), _, _, _, oh, ow = _geometry(tuple(x.shape), kernel, strides, padding, dilations)
        n, c = x.shape[:2]
        return TensorType((n * oh * ow, c * kh * kw), x.dtype)

    @staticmethod
    def compute(x: te.Tensor, kernel, strides=None, padding=None, dilations=None, pad_value=0) -> te.Tensor:
        shape = const_shape(x)
        (kh, kw), s, p, d, oh, ow = _geometry(shape, kernel, strides, padding, dilations)
        _, c, h, w = shape

        def body(r, col):
            n, rest = r // (oh * ow), r % (oh * ow)
            ci, kk = col // (kh * kw), col % (kh * kw)
            y = (rest // ow) * s[0] - p[0] + (kk // kw) * d[0]
            z = (rest % ow) * s[1] - p[1] + (kk % kw) * d[1]
            inside = (y >= 0) & (y < h) & (z >= 0) & (z < w)
            return te.if_then_else(inside, x[n, ci, y, z], const(pad_value, x.dtype))

        return te.compute((shape[0] * oh * ow, c * kh * kw), body, name="im2col", tag="im2col",
                          attrs={"window": (oh, ow, kh, kw)})

    @staticmethod
    def reference(x: np.ndarray, kernel, strides=None, padding=None, dilations=None, pad_value=0) -> np.ndarray:
        (kh, kw), s, p, d, oh, ow = _geometry(x.shape, kernel, strides, padding, dilations)
        n, c, h, w = x.shape
        xp = np.full((n, c, h + p[0] + p[2] + kh * d[0], w + p[1] + p[3] + kw * d[1]), pad_value, x.dtype)
        xp[:, :, p[0]:p[0] + h, p[1]:p[1] + w] = x
        cols = np.empty((n, oh, ow, c, kh, kw), x.dtype)
        for i in range(kh):
            for j in range(kw):
                cols[:, :, :, :, i, j] = xp[:, :, i * d[0]:i * d[0] + s[0] * oh:s[0],
                                            j * d[1]:j * d[1] + s[1] * ow:s[1]].transpose(0, 2, 3, 1)
        return cols.reshape(n * oh * ow, c * kh * kw)
