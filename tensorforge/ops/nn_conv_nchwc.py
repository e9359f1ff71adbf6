"""conv2d in the blocked output layout NCHW[x]c, with weights packed as OIHW[x]o.

`conv2d_nchwc(data, packed_weight)` reads NCHW data and weights laid out as
(F / B, C, KH, KW, B) and writes (N, F / B, OH, OW, B): the B output channels of a block are
contiguous, so the CPU template accumulates a (OW-tile x B) register block with one vector
per output column (the GEMM micro-kernel shape).  `nchwc_to_nchw` turns the result back.
The graph pass `alter_layout` introduces both, packing constant weights at compile time.
"""
from __future__ import annotations

import numpy as np

from .. import te
from .nn_conv import conv_reference
from .nn_window import padded_extent, pad_stage
from .registry import COMPLEX, INJECTIVE, OpError, TensorType, op


def pack_weight(w: np.ndarray, block: int) -> np.ndarray:
    """OIHW -> (O / block, I, KH, KW, block)."""
    f, c, kh, kw = w.shape
    return np.ascontiguousarray(w.reshape(f // block, block, c, kh, kw).transpose(0, 2, 3, 4, 1))


def unpack_weight(wp: np.ndarray) -> np.ndarray:
    fb, c, kh, kw, b = wp.shape
    return wp.transpose(0, 4, 1, 2, 3).reshape(fb * b, c, kh, kw)


def _out_hw(data, wp, strides, padding, dilations):
    h, w = data[2], data[3]
    kh, kw = wp[2], wp[3]
    oh = (h + padding[0] + padding[2] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (w + padding[1] + padding[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    return oh, ow


@op("conv2d_nchwc", COMPLEX, schedule={"c": "conv2d_nchwc.cpu"},
    attr_defaults={"strides": (1, 1), "padding": (0, 0, 0, 0), "dilations": (1, 1)})
class conv2d_nchwc:
    @staticmethod
    def infer(data: TensorType, wp: TensorType, strides=(1, 1), padding=(0, 0, 0, 0), dilations=(1, 1)):
        if len(data.shape) != 4 or len(wp.shape) != 5 or data.shape[1] != wp.shape[1]:
            raise OpError(f"conv2d_nchwc: data {tuple(data.shape)} and packed weight {tuple(wp.shape)} disagree")
        oh, ow = _out_hw(data.shape, wp.shape, strides, padding, dilations)
        if oh <= 0 or ow <= 0:
            raise OpError("conv2d_nchwc: the window is larger than the padded input")
        return TensorType((data.shape[0], wp.shape[0], oh, ow, wp.shape[4]), data.dtype)

    @staticmethod
    def compute(data: te.Tensor, wp: te.Tensor, strides=(1, 1), padding=(0, 0, 0, 0), dilations=(1, 1)):
        n, c, h, w = (int(d.value) for d in data.shape)
        fb, _, kh, kw, b = (int(d.value) for d in wp.shape)
        oh, ow = _out_hw((n, c, h, w), (fb, c, kh, kw, b), strides, padding, dilations)
        ext = padded_extent((h, w), (oh, ow), (kh, kw), strides, dilations)
        padded = pad_stage(data, (padding[0], padding[1]), ext)
        rc = te.reduce_axis((0, c), name="rc")
        ry = te.reduce_axis((0, kh), name="ry")
        rx = te.reduce_axis((0, kw), name="rx")
        sy, sx = strides
        dy, dx = dilations
        return te.compute(
            (n, fb, oh, ow, b),
            lambda i, fo, y, x, fi: te.sum(padded[i, rc, y * sy + ry * dy, x * sx + rx * dx]
                                           * wp[fo, rc, ry, rx, fi], axis=[rc, ry, rx]),
            name="conv2d_nchwc", tag="conv2d_nchwc")

    @staticmethod
    def reference(data, wp, strides=(1, 1), padding=(0, 0, 0, 0), dilations=(1, 1)):
        out = conv_reference(data, unpack_weight(wp), strides, padding, dilations, 1)
        n, f, oh, ow = out.shape
        b = wp.shape[4]
        return np.ascontiguousarray(out.reshape(n, f // b, b, oh, ow).transpose(0, 1, 3, 4, 2))


@op("nchwc_to_nchw", INJECTIVE)
class nchwc_to_nchw:
    @staticmethod
    def infer(x: TensorType):
        n, fb, h, w, b = x.shape
        return TensorType((n, fb * b, h, w), x.dtype)

    @staticmethod
    def compute(x: te.Tensor):
        n, fb, h, w, b = (int(d.value) for d in x.shape)
        return te.compute((n, fb * b, h, w), lambda i, f, y, z: x[i, f // b, y, z, f % b], name="nchw")

    @staticmethod
    def reference(x):
        n, fb, h, w, b = x.shape
        return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(n, fb * b, h, w))
