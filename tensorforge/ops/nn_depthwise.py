"""Depthwise conv2d (groups == channels), NCHW, with the padded input split by column phase.

    out[n, c, y, x] = sum_{ry, rx} xpad[n, c, y*sy + ry*dy, (rx*dx) % sx, x + (rx*dx) // sx] * w[c, 0, ry, rx]

`xpad` (stage "pad") is the zero-padded input with its columns dealt into sx phases:
xpad[n, c, yy, px, xq] = padded[n, c, yy, xq*sx + px].  For every tap the products of an output
row then read one phase with unit stride, so a CPU schedule vectorizes along x with plain vector
loads at any stride (strided gathers happen once per input element, in the pad stage, instead of
once per tap).  The main stage computes rows rounded up to whole vectors (`row_width`; the
extra columns read zeros and are dropped by the stage "depthwise_conv2d_cols").  Weights stay
(C, 1, KH, KW).  The graph pass `alter_layout_depthwise` turns
float32 depthwise conv2d with constant weights into this op.  Pattern complex-out-fusable; the
main stage is named and tagged "depthwise_conv2d".
"""
from __future__ import annotations

from .. import te
from .common import const_shape
from .nn_conv import conv_reference
from .nn_window import out_spatial, padded_extent, spatial_attrs
from .registry import COMPLEX, OpError, TensorType, op


def row_width(ow: int) -> int:
    """Columns the main stage computes: whole 512-bit vectors of float32 (16), or the next power of
    two for narrower rows, so that every row is a run of full machine vectors."""
    return 1 << (ow - 1).bit_length() if ow < 16 else -(-ow // 16) * 16


def _attrs(data, w, strides, padding, dilations):
    if len(data) != 4 or len(w) != 4 or w[0] != data[1] or w[1] != 1:
        raise OpError(f"depthwise_conv2d: data {tuple(data)} needs a weight of shape ({data[1]}, 1, KH, KW), "
                      f"got {tuple(w)}")
    s, p, d = spatial_attrs("depthwise_conv2d", 2, strides, padding, dilations)
    if any(v < 0 for v in p):
        raise OpError(f"depthwise_conv2d: padding must not be negative, got {p}")
    return s, p, d, out_spatial("depthwise_conv2d", data[2:], w[2:], s, p, d)


@op("depthwise_conv2d", COMPLEX, schedule={"c": "depthwise_conv2d.cpu"},
    attr_defaults={"strides": (1, 1), "padding": (0, 0, 0, 0), "dilations": (1, 1)})
class depthwise_conv2d:
    @staticmethod
    def infer(data: TensorType, w: TensorType, strides=(1, 1), padding=(0, 0, 0, 0), dilations=(1, 1)):
        if data.dtype != w.dtype:
            raise OpError(f"depthwise_conv2d: dtypes differ ({data.dtype} and {w.dtype})")
        _, _, _, (oh, ow) = _attrs(tuple(data.shape), tuple(w.shape), strides, padding, dilations)
        return TensorType((data.shape[0], data.shape[1], oh, ow), data.dtype)

    @staticmethod
    def compute(data: te.Tensor, w: te.Tensor, strides=(1, 1), padding=(0, 0, 0, 0), dilations=(1, 1)):
        n, c, h, wd = const_shape(data)
        _, _, kh, kw = const_shape(w)
        (sy, sx), p, (dy, dx), (oh, ow) = _attrs((n, c, h, wd), (c, 1, kh, kw), strides, padding, dilations)
        rows, cols = padded_extent((h, wd), (oh, ow), (kh, kw), (sy, sx), (dy, dx))
        owp = row_width(ow)
        phase_cols = max(-(-cols // sx), owp + ((kw - 1) * dx) // sx)
        zero = te.const(0, data.dtype)

        def pad_body(i, ch, yy, px, xq):
            y, x = yy - p[0], xq * sx + px - p[1]
            conds = [y >= 0, y < h, x >= 0, x < wd]
            return te.if_then_else(te.all(*conds), data[i, ch, y, x], zero)

        xpad = te.compute((n, c, rows, sx, phase_cols), pad_body, name="pad")
        ry = te.reduce_axis((0, kh), name="ry")
        rx = te.reduce_axis((0, kw), name="rx")
        full = te.compute(
            (n, c, oh, owp),
            lambda i, ch, y, x: te.sum(xpad[i, ch, y * sy + ry * dy, (rx * dx) % sx, x + (rx * dx) // sx]
                                       * w[ch, 0, ry, rx], axis=[ry, rx]),
            name="depthwise_conv2d", tag="depthwise_conv2d")
        if owp == ow:
            return full
        return te.compute((n, c, oh, ow), lambda *i: full[i], name="depthwise_conv2d_cols")

    @staticmethod
    def reference(data, w, strides=(1, 1), padding=(0, 0, 0, 0), dilations=(1, 1)):
        s, p, d, _ = _attrs(data.shape, w.shape, strides, padding, dilations)
        return conv_reference(data, w, s, p, d, data.shape[1])
