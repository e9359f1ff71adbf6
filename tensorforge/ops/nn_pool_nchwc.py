"""Pooling in the blocked layout NCHW[b]c: max_pool2d_nchwc, avg_pool2d_nchwc over sliding
windows, global_avg_pool_nchwc and global_max_pool_nchwc over the whole plane.

Input (N, C / b, H, W, b); the windowed pools write (N, C / b, OH, OW, b), the global ones
(N, C / b, 1, 1, b).  The values are those of max_pool2d, avg_pool2d, global_avg_pool and
global_max_pool (ops/nn_pool.py) with the same attributes, in the blocked layout: the channels
of a block are the SIMD lanes, so every window tap is one contiguous vector at any stride.

TE: stage "pad" (padded with the dtype's minimum for max, zero for avg; the block rides along as
an axis that needs no padding), the window reduction (the output itself for max,
"avg_pool2d_nchwc_sum" then the division by the window's cell count for avg).  The global pools
are one reduction over (H, W) (then the division for avg).  Main stages are named and tagged with
the op name.  Pattern complex-out-fusable, like the NCHW pools.  The graph pass
`alter_layout_propagate` uses them where the input is already blocked.
"""
from __future__ import annotations

import numpy as np

from .. import te
from .common import const_shape
from .nn_conv_nchwc import to_nchw, to_nchwc
from .nn_pool import pool_attrs, pool_reference, window_count
from .nn_window import out_spatial, pad_stage, padded_extent
from .registry import COMPLEX, OpError, TensorType, op


def _nchw(op: str, shape: tuple) -> tuple:
    if len(shape) != 5:
        raise OpError(f"{op}: the input must be (N, C/b, H, W, b), got shape {tuple(shape)}")
    n, cb, h, w, b = shape
    return (n, cb * b, h, w)


def _window_attrs(op: str, shape: tuple, kernel, strides, padding, dilations, ceil_mode):
    k, s, p, d = pool_attrs(op, 2, _nchw(op, shape), kernel, strides, padding, dilations)
    return k, s, p, d, out_spatial(op, tuple(shape[2:4]), k, s, p, d, bool(ceil_mode))


def _window(kind: str, x: te.Tensor, kernel, strides, padding, dilations, ceil_mode, count_include_pad=False):
    op = f"{kind}_pool2d_nchwc"
    n, cb, h, w, b = shape = const_shape(x)
    k, s, p, d, (oh, ow) = _window_attrs(op, shape, kernel, strides, padding, dilations, ceil_mode)
    fill = te.min_value(x.dtype) if kind == "max" else te.const(0, x.dtype)
    rows, cols = padded_extent((h, w), (oh, ow), k, s, d)
    padded = pad_stage(x, (p[0], p[1], 0), (rows, cols, b), fill)
    ry = te.reduce_axis((0, k[0]), name="ry")
    rx = te.reduce_axis((0, k[1]), name="rx")

    def tap(i, c, y, xx, ci):
        return padded[i, c, y * s[0] + ry * d[0], xx * s[1] + rx * d[1], ci]

    out_shape = (n, cb, oh, ow, b)
    attrs = {"strides": s, "dilations": d}
    if kind == "max":
        return te.compute(out_shape, lambda *i: te.max(tap(*i), axis=[ry, rx]), name=op, tag=op, attrs=attrs)
    total = te.compute(out_shape, lambda *i: te.sum(tap(*i), axis=[ry, rx]), name=f"{op}_sum", tag=f"{op}_sum",
                       attrs=attrs)

    def average(i, c, y, xx, ci):
        count = None
        for a, o in ((0, y), (1, xx)):
            lo, hi = (-p[a], shape[2 + a] + p[2 + a]) if count_include_pad else (0, shape[2 + a])
            term = window_count(o, lo, hi, k[a], s[a], d[a], p[a])
            count = term if count is None else count * term
        return total[i, c, y, xx, ci] / count.astype(x.dtype)

    return te.compute(out_shape, average, name=op, tag=op)


def _window_reference(kind, x, kernel, strides, padding, dilations, ceil_mode, count_include_pad=False):
    k, s, p, d, _ = _window_attrs(f"{kind}_pool2d_nchwc", x.shape, kernel, strides, padding, dilations, ceil_mode)
    out = pool_reference(kind, to_nchw(x), k, s, p, d, bool(ceil_mode), bool(count_include_pad), 2.0)
    return to_nchwc(out, x.shape[4])


def _window_infer(kind, x, kernel, strides, padding, dilations, ceil_mode):
    op = f"{kind}_pool2d_nchwc"
    if not x.dtype.startswith("float"):
        raise OpError(f"{op}: the input must be a float tensor, got {x.dtype}")
    *_, (oh, ow) = _window_attrs(op, tuple(x.shape), kernel, strides, padding, dilations, ceil_mode)
    return TensorType((x.shape[0], x.shape[1], oh, ow, x.shape[4]), x.dtype)


@op("max_pool2d_nchwc", COMPLEX, schedule={"cpu": "window2d_nchwc.cpu"}, attr_defaults={"ceil_mode": False})
class max_pool2d_nchwc:
    @staticmethod
    def infer(x: TensorType, kernel=None, strides=None, padding=None, dilations=None, ceil_mode=False):
        return _window_infer("max", x, kernel, strides, padding, dilations, ceil_mode)

    @staticmethod
    def compute(x: te.Tensor, kernel=None, strides=None, padding=None, dilations=None, ceil_mode=False):
        return _window("max", x, kernel, strides, padding, dilations, ceil_mode)

    @staticmethod
    def reference(x, kernel=None, strides=None, padding=None, dilations=None, ceil_mode=False):
        return _window_reference("max", x, kernel, strides, padding, dilations, ceil_mode)


@op("avg_pool2d_nchwc", COMPLEX, schedule={"cpu": "window2d_nchwc.cpu"},
    attr_defaults={"ceil_mode": False, "count_include_pad": False})
class avg_pool2d_nchwc:
    @staticmethod
    def infer(x: TensorType, kernel=None, strides=None, padding=None, dilations=None, ceil_mode=False,
              count_include_pad=False):
        return _window_infer("avg", x, kernel, strides, padding, dilations, ceil_mode)

    @staticmethod
    def compute(x: te.Tensor, kernel=None, strides=None, padding=None, dilations=None, ceil_mode=False,
                count_include_pad=False):
        return _window("avg", x, kernel, strides, padding, dilations, ceil_mode, count_include_pad)

    @staticmethod
    def reference(x, kernel=None, strides=None, padding=None, dilations=None, ceil_mode=False,
                  count_include_pad=False):
        return _window_reference("avg", x, kernel, strides, padding, dilations, ceil_mode, count_include_pad)


def _global(kind: str, x: te.Tensor) -> te.Tensor:
    op = f"global_{kind}_pool_nchwc"
    n, cb, h, w, b = const_shape(x)
    ry = te.reduce_axis((0, h), name="ry")
    rx = te.reduce_axis((0, w), name="rx")
    shape = (n, cb, 1, 1, b)
    if kind == "max":
        return te.compute(shape, lambda i, c, y, xx, ci: te.max(x[i, c, ry, rx, ci], axis=[ry, rx]), name=op, tag=op)
    total = te.compute(shape, lambda i, c, y, xx, ci: te.sum(x[i, c, ry, rx, ci], axis=[ry, rx]),
                       name=f"{op}_sum", tag=f"{op}_sum")
    count = te.const(float(h * w), x.dtype)
    return te.compute(shape, lambda *i: total[i] / count, name=op, tag=op)


def _global_infer(kind: str, x: TensorType) -> TensorType:
    op = f"global_{kind}_pool_nchwc"
    _nchw(op, tuple(x.shape))
    if not x.dtype.startswith("float"):
        raise OpError(f"{op}: the input must be a float tensor, got {x.dtype}")
    return TensorType((x.shape[0], x.shape[1], 1, 1, x.shape[4]), x.dtype)


@op("global_avg_pool_nchwc", COMPLEX, schedule={"cpu": "global_pool_nchwc.cpu"})
class global_avg_pool_nchwc:
    @staticmethod
    def infer(x: TensorType):
        return _global_infer("avg", x)

    @staticmethod
    def compute(x: te.Tensor):
        return _global("avg", x)

    @staticmethod
    def reference(x):
        return np.mean(x.astype(np.float64), axis=(2, 3), keepdims=True).astype(x.dtype)


@op("global_max_pool_nchwc", COMPLEX, schedule={"cpu": "global_pool_nchwc.cpu"})
class global_max_pool_nchwc:
    @staticmethod
    def infer(x: TensorType):
        return _global_infer("max", x)

    @staticmethod
    def compute(x: te.Tensor):
        return _global("max", x)

    @staticmethod
    def reference(x):
        return np.max(x, axis=(2, 3), keepdims=True)
