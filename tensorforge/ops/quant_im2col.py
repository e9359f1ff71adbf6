"""im2col: the windows of a 2-D convolution as the rows of a matrix, so that the convolution is
one matrix product (ops -> TE).

    im2col(x)[(n * OH + oh) * OW + ow, (c * KH + kh) * KW + kw]
        = x[n, c, oh * sh - ph + kh * dh, ow * sw - pw + kw * dw]   (pad_value outside x)

x is (N, C, H, W); the result is (N * OH * OW, C * KH * KW), in x's dtype.  With the integer
convolutions the padding value is x's zero point, so padded cells add nothing.  Attributes:
kernel (KH, KW), strides, padding (top, left, bottom, right), dilations, pad_value, image.

With image=(N, H, W), x is the image as rows instead: (N * H * W, C), one pixel per row with
its channels along the row (NHWC order, the layout an int8 product writes), and the columns
run channel fastest:

    im2col(x, image)[(n * OH + oh) * OW + ow, (kh * KW + kw) * C + c]
        = x[(n * H + oh * sh - ph + kh * dh) * W + ow * sw - pw + kw * dw, c]

With columns=K (more than C * KH * KW), the result has K columns, the ones past the window's
holding pad_value: a product whose depth is padded (the int8 units take k in groups of 4)
then reads the im2col matrix itself instead of a padded copy of it.

With per_image=True (an NCHW x only), each image's windows are the columns of a matrix of its
own instead: (N, C * KH * KW, OH * OW), the (c, kh, kw) rows and the (oh, ow) columns in the
order above, so that W (M, C * KH * KW) times it is the image's output in NCHW with no
transposition:

    im2col(x, per_image)[n, (c * KH + kh) * KW + kw, oh * OW + ow] = im2col(x)[(n * OH + oh) * OW + ow, ...]

An NCHW x with padding is first copied into a padded image ("im2col_pad"), so the gather itself
tests no borders (the image is KH * KW / (stride^2) times smaller than the windows).

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

_DEFAULTS = {"strides": None, "padding": None, "dilations": None, "pad_value": 0, "image": None,
             "columns": None, "per_image": False}


def _nchw_shape(shape: tuple, image) -> tuple:
    """x's shape as (N, C, H, W): itself, or (N, C, H, W) of rows (N * H * W, C) of `image`."""
    if image is None:
        return tuple(shape)
    n, h, w = (int(d) for d in image)
    if len(shape) != 2 or int(shape[0]) != n * h * w:
        raise OpError(f"im2col: with image={tuple(image)} x must be rows ({n * h * w}, C), got shape {tuple(shape)}")
    return (n, int(shape[1]), h, w)


def _columns(width: int, columns) -> int:
    """The column count: the window's `width`, or `columns` when given (at least `width`)."""
    if columns is None:
        return width
    if int(columns) < width:
        raise OpError(f"im2col: columns={columns} is fewer than the window's {width} columns")
    return int(columns)


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
    def infer(x: TensorType, kernel, strides=None, padding=None, dilations=None, pad_value=0,
              image=None, columns=None, per_image=False) -> TensorType:
        if x is None:
            raise OpError("im2col: needs x")
        if per_image and (image is not None or columns is not None):
            raise OpError("im2col: per_image takes an NCHW image, with neither image= nor columns=")
        shape = _nchw_shape(tuple(x.shape), image)
        (kh, kw), _, _, _, oh, ow = _geometry(shape, kernel, strides, padding, dilations)
        n, c = shape[:2]
        if per_image:
            return TensorType((n, c * kh * kw, oh * ow), x.dtype)
        return TensorType((n * oh * ow, _columns(c * kh * kw, columns)), x.dtype)

    @staticmethod
    def compute(x: te.Tensor, kernel, strides=None, padding=None, dilations=None, pad_value=0,
                image=None, columns=None, per_image=False) -> te.Tensor:
        shape = _nchw_shape(const_shape(x), image)
        (kh, kw), s, p, d, oh, ow = _geometry(shape, kernel, strides, padding, dilations)
        _, c, h, w = shape
        width = c * kh * kw
        ncols = _columns(width, columns)
        if image is None and any(p):
            # an NCHW image is copied once with its border of pad_value (a few rows: the
            # image's size, not the windows'), so the KH * KW reads per element test nothing
            top, left = p[0], p[1]
            hp, wp = h + p[0] + p[2], w + p[1] + p[3]
            padded = te.compute((shape[0], c, hp, wp), lambda n, ci, y, z: te.if_then_else(
                (y >= top) & (y < top + h) & (z >= left) & (z < left + w), x[n, ci, y - top, z - left],
                const(pad_value, x.dtype)), name="im2col_pad")

            def padded_window(n, col, rest):
                ci, kk = col // (kh * kw), col % (kh * kw)
                return padded[n, ci, (rest // ow) * s[0] + (kk // kw) * d[0], (rest % ow) * s[1] + (kk % kw) * d[1]]

            if per_image:
                return te.compute((shape[0], width, oh * ow), padded_window, name="im2col", tag="im2col",
                                  attrs={"window": (oh, ow, kh, kw), "channels_last": 0, "per_image": 1,
                                         "padded_copy": d[1]})

            def padded_body(r, col):
                value = padded_window(r // (oh * ow), col, r % (oh * ow))
                if ncols > width:
                    return te.if_then_else(col < width, value, const(pad_value, x.dtype))
                return value

            return te.compute((shape[0] * oh * ow, ncols), padded_body, name="im2col", tag="im2col",
                              attrs={"window": (oh, ow, kh, kw), "channels_last": 0, "padded_copy": d[1]})

        def window(n, col, rest):
            if image is None:
                ci, kk = col // (kh * kw), col % (kh * kw)
            else:
                kk, ci = col // c, col % c
            y = (rest // ow) * s[0] - p[0] + (kk // kw) * d[0]
            z = (rest % ow) * s[1] - p[1] + (kk % kw) * d[1]
            inside = (y >= 0) & (y < h) & (z >= 0) & (z < w)
            if ncols > width:
                inside = (col < width) & inside           # first: the extra columns read nothing
            value = x[n, ci, y, z] if image is None else x[(n * h + y) * w + z, ci]
            return te.if_then_else(inside, value, const(pad_value, x.dtype))

        if per_image:
            return te.compute((shape[0], width, oh * ow), window, name="im2col", tag="im2col",
                              attrs={"window": (oh, ow, kh, kw), "channels_last": 0, "per_image": 1})

        def body(r, col):
            return window(r // (oh * ow), col, r % (oh * ow))

        return te.compute((shape[0] * oh * ow, ncols), body, name="im2col", tag="im2col",
                          attrs={"window": (oh, ow, kh, kw), "channels_last": c if image is not None else 0})

    @staticmethod
    def reference(x: np.ndarray, kernel, strides=None, padding=None, dilations=None, pad_value=0,
                  image=None, columns=None, per_image=False) -> np.ndarray:
        cols = _reference_window(x, kernel, strides, padding, dilations, pad_value, image)
        if per_image:
            return np.ascontiguousarray(cols.reshape(x.shape[0], -1, cols.shape[1]).transpose(0, 2, 1))
        ncols = _columns(cols.shape[1], columns)
        if ncols == cols.shape[1]:
            return cols
        out = np.full((cols.shape[0], ncols), pad_value, x.dtype)
        out[:, :cols.shape[1]] = cols
        return out


def _reference_window(x: np.ndarray, kernel, strides, padding, dilations, pad_value, image) -> np.ndarray:
    """The window columns, (N * OH * OW, C * KH * KW), of x or of the rows image."""
    if image is not None:
        n, h, w = image
        x4 = x.reshape(n, h, w, x.shape[1]).transpose(0, 3, 1, 2)
        cols = _reference_nchw(x4, kernel, strides, padding, dilations, pad_value)
        kh, kw = kernel
        c = x.shape[1]
        return np.ascontiguousarray(cols.reshape(-1, c, kh, kw).transpose(0, 2, 3, 1).reshape(cols.shape[0], -1))
    return _reference_nchw(x, kernel, strides, padding, dilations, pad_value)


def _reference_nchw(x: np.ndarray, kernel, strides, padding, dilations, pad_value) -> np.ndarray:
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
