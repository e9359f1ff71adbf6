"""Depthwise conv2d (groups == channels) in the blocked layout NCHW[x]c, weights packed as
(C / B, KH, KW, B).

    out[n, cb, y, x, ci] = sum_{ry, rx} xpad[n, cb, y*sy + ry*dy, x*sx + rx*dx, ci] * wp[cb, ry, rx, ci]

Each channel is its own convolution, so vectorizing over B channels makes every product a full
SIMD multiply for any width and stride (vectorizing along a row instead leaves lanes idle on the
7- and 14-wide maps of MobileNet and needs strided loads at stride 2).  `xpad` (stage "pad") is
the zero-padded input re-laid-out with the B channels of a block innermost; the output is
NCHW[B]c and `nchwc_to_nchw` turns it back (the CPU template fuses both layout changes into the
kernel).  The graph pass `alter_layout_depthwise` introduces the op for float32 depthwise conv2d
with constant weights and a channel count that splits into blocks.  Pattern complex-out-fusable.
"""
from __future__ import annotations

import numpy as np

from .. import te
from .common import const_shape
from .nn_conv import conv_reference
from .nn_window import out_spatial, padded_extent, spatial_attrs
from .registry import COMPLEX, OpError, TensorType, op


def pack_depthwise_weight(w: np.ndarray, block: int) -> np.ndarray:
    """(C, 1, KH, KW) -> (C / block, KH, KW, block)."""
    c, _, kh, kw = w.shape
    return np.ascontiguousarray(w.reshape(c // block, block, kh, kw).transpose(0, 2, 3, 1))


def unpack_depthwise_weight(wp: np.ndarray) -> np.ndarray:
    cb, kh, kw, b = wp.shape
    return np.ascontiguousarray(wp.transpose(0, 3, 1, 2).reshape(cb * b, 1, kh, kw))


def _attrs(data, wp, strides, padding, dilations):
    if len(data) != 4 or len(wp) != 4 or data[1] != wp[0] * wp[3]:
        raise OpError(f"depthwise_conv2d_nchwc: data {tuple(data)} and packed weight {tuple(wp)} disagree")
    s, p, d = spatial_attrs("depthwise_conv2d_nchwc", 2, strides, padding, dilations)
    if any(v < 0 for v in p):
        raise OpError(f"depthwise_conv2d_nchwc: padding must not be negative, got {p}")
    out = out_spatial("depthwise_conv2d_nchwc", data[2:], wp[1:3], s, p, d)
    return s, p, d, out


@op("depthwise_conv2d_nchwc", COMPLEX, schedule={"c": "depthwise_conv2d_nchwc.cpu"},
    attr_defaults={"strides": (1, 1), "padding": (0, 0, 0, 0), "dilations": (1, 1)})
class depthwise_conv2d_nchwc:
    @staticmethod
    def infer(data: TensorType, wp: TensorType, strides=(1, 1), padding=(0, 0, 0, 0), dilations=(1, 1)):
        if data.dtype != wp.dtype:
            raise OpError(f"depthwise_conv2d_nchwc: dtypes differ ({data.dtype} and {wp.dtype})")
        _, _, _, (oh, ow) = _attrs(tuple(data.shape), tuple(wp.shape), strides, padding, dilations)
        return TensorType((data.shape[0], wp.shape[0], oh, ow, wp.shape[3]), data.dtype)

    @staticmethod
    def compute(data: te.Tensor, wp: te.Tensor, strides=(1, 1), padding=(0, 0, 0, 0), dilations=(1, 1)):
        n, c, h, w = const_shape(data)
        cb, kh, kw, b = const_shape(wp)
        (sy, sx), p, (dy, dx), (oh, ow) = _attrs((n, c, h, w), (cb, kh, kw, b), strides, padding, dilations)
        rows, cols = padded_extent((h, w), (oh, ow), (kh, kw), (sy, sx), (dy, dx))
        zero = te.const(0, data.dtype)

        def pad_body(i, fo, yy, xx, fi):
            y, x = yy - p[0], xx - p[1]
            conds = [cond for cond, needed in ((y >= 0, p[0] > 0), (y < h, rows - p[0] > h),
                                               (x >= 0, p[1] > 0), (x < w, cols - p[1] > w)) if needed]
            load = data[i, fo * b + fi, y, x]
            return te.if_then_else(te.all(*conds), load, zero) if conds else load

        xpad = te.compute((n, cb, rows, cols, b), pad_body, name="pad")
        ry = te.reduce_axis((0, kh), name="ry")
        rx = te.reduce_axis((0, kw), name="rx")
        return te.compute(
            (n, cb, oh, ow, b),
            lambda i, fo, y, x, fi: te.sum(xpad[i, fo, y * sy + ry * dy, x * sx + rx * dx, fi]
                                           * wp[fo, ry, rx, fi], axis=[ry, rx]),
            name="depthwise_conv2d_nchwc", tag="depthwise_conv2d_nchwc")

    @staticmethod
    def reference(data, wp, strides=(1, 1), padding=(0, 0, 0, 0), dilations=(1, 1)):
        s, p, d, _ = _attrs(data.shape, wp.shape, strides, padding, dilations)
        out = conv_reference(data, unpack_depthwise_weight(wp), s, p, d, data.shape[1])
        n, f, oh, ow = out.shape
        b = wp.shape[3]
        return np.ascontiguousarray(out.reshape(n, f // b, b, oh, ow).transpose(0, 1, 3, 4, 2))
