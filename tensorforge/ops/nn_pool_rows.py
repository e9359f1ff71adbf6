"""max_pool2d and avg_pool2d with their padded input laid out as depthwise_conv2d's
(ops/nn_depthwise.py), so that a CPU schedule vectorizes along output rows with unit-stride loads
at any stride.

    max_pool2d_rows(x)[n, c, y, x] = max_{ry, rx} padded[n, c, y*sy + ry*dy, x*sx + rx*dx]
    avg_pool2d_rows(x)[n, c, y, x] = sum_{ry, rx} padded[...] / count(y, x)

with the padding (and ceil_mode's extra cells) at the dtype's minimum for max, so it never wins,
and at 0 for avg, whose count covers the window's input cells (with count_include_pad also the
explicit padding), as avg_pool2d counts them: the values of the pools with the same attributes.
The layout rules of max_pool2d and avg_pool2d (ops/layout_rules.py) rewrite float32/float64 pools
that stay in NCHW into them (a 3x3 stride-1 average pool over 256 channels of 28x28 ran the
generic template at 2.2x ONNX Runtime's time).  TE: stage "pad" (see `padded_plane`), the main
stage over rows rounded up to whole vectors, and a last stage keeping the real columns (and
dividing by the count).  Pattern complex-out-fusable.
"""
from __future__ import annotations

from .. import te
from .common import const_shape
from .nn_depthwise import padded_plane, row_width
from .nn_pool import pool_attrs, pool_reference, window_count
from .nn_window import out_spatial, padded_extent
from .registry import COMPLEX, OpError, TensorType, op

NAME = "max_pool2d_rows"


def _attrs(shape, kernel, strides, padding, dilations, ceil_mode):
    k, s, p, d = pool_attrs(NAME, 2, tuple(shape), kernel, strides, padding, dilations)
    return k, s, p, d, out_spatial(NAME, tuple(shape[2:]), k, s, p, d, bool(ceil_mode))


def _window_rows(x: te.Tensor, name: str, reducer, pad_value, kernel, strides, padding, dilations, ceil_mode):
    """(the stage reducing each window over rows rounded up to whole vectors, the checked
    (kernel, strides, padding, dilations, output size)): `reducer` over
    padded[n, c, y*sy + ry*dy, x*sx + rx*dx], the padding at `pad_value`."""
    shape = const_shape(x)
    attrs = _attrs(shape, kernel, strides, padding, dilations, ceil_mode)
    (kh, kw), (sy, sx), p, (dy, dx), (oh, ow) = attrs
    rows, cols = padded_extent(shape[2:], (oh, ow), (kh, kw), (sy, sx), (dy, dx))
    owp = row_width(ow)
    xpad, column = padded_plane(x, p[0], p[1], rows, cols, sx, owp, (kw - 1) * dx, pad_value)
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    full = te.compute((shape[0], shape[1], oh, owp),
                      lambda i, ch, y, xo: reducer(xpad[(i, ch, y * sy + ry * dy, *column(xo, rx * dx))], axis=[ry, rx]),
                      name=name, tag=name)
    return full, attrs


@op(NAME, COMPLEX, schedule={"cpu": "window2d.cpu"}, attr_defaults={"ceil_mode": False})
class max_pool2d_rows:
    @staticmethod
    def infer(x: TensorType, kernel=None, strides=None, padding=None, dilations=None, ceil_mode: bool = False):
        if x.dtype not in ("float32", "float64"):
            raise OpError(f"{NAME}: the input must be float32 or float64, got {x.dtype}")
        *_, (oh, ow) = _attrs(x.shape, kernel, strides, padding, dilations, ceil_mode)
        return TensorType((x.shape[0], x.shape[1], oh, ow), x.dtype)

    @staticmethod
    def compute(x: te.Tensor, kernel=None, strides=None, padding=None, dilations=None, ceil_mode: bool = False):
        shape = const_shape(x)
        full, (*_, (oh, ow)) = _window_rows(x, NAME, te.max, te.min_value(x.dtype), kernel, strides, padding,
                                            dilations, ceil_mode)
        owp = const_shape(full)[3]
        if owp == ow:
            return full
        return te.compute((shape[0], shape[1], oh, ow), lambda *i: full[i], name=f"{NAME}_cols")

    @staticmethod
    def reference(x, kernel=None, strides=None, padding=None, dilations=None, ceil_mode: bool = False):
        k, s, p, d, _ = _attrs(x.shape, kernel, strides, padding, dilations, ceil_mode)
        return pool_reference("max", x, k, s, p, d, bool(ceil_mode), False, 2.0)


AVG = "avg_pool2d_rows"


@op(AVG, COMPLEX, schedule={"cpu": "window2d.cpu"}, attr_defaults={"ceil_mode": False, "count_include_pad": False})
class avg_pool2d_rows:
    @staticmethod
    def infer(x: TensorType, kernel=None, strides=None, padding=None, dilations=None, ceil_mode: bool = False,
              count_include_pad: bool = False):
        if x.dtype not in ("float32", "float64"):
            raise OpError(f"{AVG}: the input must be float32 or float64, got {x.dtype}")
        *_, (oh, ow) = _attrs(x.shape, kernel, strides, padding, dilations, ceil_mode)
        return TensorType((x.shape[0], x.shape[1], oh, ow), x.dtype)

    @staticmethod
    def compute(x: te.Tensor, kernel=None, strides=None, padding=None, dilations=None, ceil_mode: bool = False,
                count_include_pad: bool = False):
        shape = const_shape(x)
        total, ((kh, kw), (sy, sx), p, (dy, dx), (oh, ow)) = _window_rows(
            x, AVG, te.sum, te.const(0, x.dtype), kernel, strides, padding, dilations, ceil_mode)
        span = [(-p[a], shape[2 + a] + p[2 + a]) if count_include_pad else (0, shape[2 + a]) for a in range(2)]

        def average(i, ch, y, xo):
            count = (window_count(y, *span[0], kh, sy, dy, p[0]) * window_count(xo, *span[1], kw, sx, dx, p[1]))
            return total[i, ch, y, xo] / count.astype(x.dtype)

        return te.compute((shape[0], shape[1], oh, ow), average, name=f"{AVG}_count")

    @staticmethod
    def reference(x, kernel=None, strides=None, padding=None, dilations=None, ceil_mode: bool = False,
                  count_include_pad: bool = False):
        k, s, p, d, _ = _attrs(x.shape, kernel, strides, padding, dilations, ceil_mode)
        return pool_reference("avg", x, k, s, p, d, bool(ceil_mode), bool(count_include_pad), 2.0)
