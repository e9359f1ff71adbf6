"""Depthwise conv2d in the blocked layout NCHW[b]c: the channels of a block are the SIMD lanes.

    out[n, cb, y, x, ci] = sum_{ry, rx} padded[n, cb, y*sy + ry*dy, x*sx + rx*dx, ci] * w[cb, 0, ry, rx, ci]

Data (N, C / b, H, W, b), weight packed as (C / b, 1, KH, KW, b) (`pack_weight` of
ops/nn_conv_nchwc.py applied to the (C, 1, KH, KW) weight), output (N, C / b, OH, OW, b).  Every
tap of every output column is one vector load of b contiguous channels and one multiply-add
against the tap's weight vector, whatever the stride: no phase-split copy of the input is needed
(compare ops/nn_depthwise.py, which vectorizes NCHW along output rows).  The stage "pad" is the
zero-padded input (the block rides along as an axis that needs no padding; the CPU template
inlines it by default, so the taps test their bounds and no padded copy is built); the main stage is
named and tagged "depthwise_conv2d_nchwc".  The graph pass `alter_layout_propagate` uses it for
depthwise convolutions whose input is already blocked.  Pattern complex-out-fusable; CPU template
window2d_nchwc.cpu (ops/schedules/cpu_nchwc.py).
"""
from __future__ import annotations

from .. import te
from .common import const_shape
from .nn_conv import conv_reference
from .nn_conv_nchwc import to_nchw, to_nchwc, unpack_weight
from .nn_window import out_spatial, pad_stage, padded_extent, spatial_attrs
from .registry import COMPLEX, OpError, TensorType, op

NAME = "depthwise_conv2d_nchwc"


def _attrs(data: tuple, w: tuple, strides, padding, dilations):
    if len(data) != 5 or len(w) != 5 or tuple(w[0:2]) != (data[1], 1) or w[4] != data[4]:
        raise OpError(f"{NAME}: data {tuple(data)} (N, C/b, H, W, b) needs a weight of shape "
                      f"({data[1] if len(data) == 5 else 'C/b'}, 1, KH, KW, b), got {tuple(w)}")
    s, p, d = spatial_attrs(NAME, 2, strides, padding, dilations)
    if any(v < 0 for v in p):
        raise OpError(f"{NAME}: padding must not be negative, got {p}")
    return s, p, d, out_spatial(NAME, data[2:4], w[2:4], s, p, d)


@op(NAME, COMPLEX, schedule={"cpu": "window2d_nchwc.cpu"},
    attr_defaults={"strides": (1, 1), "padding": (0, 0, 0, 0), "dilations": (1, 1)})
class depthwise_conv2d_nchwc:
    @staticmethod
    def infer(data: TensorType, w: TensorType, strides=(1, 1), padding=(0, 0, 0, 0), dilations=(1, 1)):
        if data.dtype != w.dtype:
            raise OpError(f"{NAME}: dtypes differ ({data.dtype} and {w.dtype})")
        _, _, _, (oh, ow) = _attrs(tuple(data.shape), tuple(w.shape), strides, padding, dilations)
        n, cb, _, _, b = data.shape
        return TensorType((n, cb, oh, ow, b), data.dtype)

    @staticmethod
    def compute(data: te.Tensor, w: te.Tensor, strides=(1, 1), padding=(0, 0, 0, 0), dilations=(1, 1)):
        n, cb, h, wd, b = const_shape(data)
        kh, kw = const_shape(w)[2:4]
        (sy, sx), p, (dy, dx), (oh, ow) = _attrs((n, cb, h, wd, b), const_shape(w), strides, padding, dilations)
        rows, cols = padded_extent((h, wd), (oh, ow), (kh, kw), (sy, sx), (dy, dx))
        padded = pad_stage(data, (p[0], p[1], 0), (rows, cols, b))
        ry = te.reduce_axis((0, kh), name="ry")
        rx = te.reduce_axis((0, kw), name="rx")
        return te.compute(
            (n, cb, oh, ow, b),
            lambda i, c, y, x, ci: te.sum(padded[i, c, y * sy + ry * dy, x * sx + rx * dx, ci] * w[c, 0, ry, rx, ci],
                                          axis=[ry, rx]),
            name=NAME, tag=NAME, attrs={"strides": (sy, sx), "dilations": (dy, dx)})

    @staticmethod
    def reference(data, w, strides=(1, 1), padding=(0, 0, 0, 0), dilations=(1, 1)):
        s, p, d, _ = _attrs(data.shape, w.shape, strides, padding, dilations)
        x = to_nchw(data)
        return to_nchwc(conv_reference(x, unpack_weight(w), s, p, d, x.shape[1]), data.shape[4])
