"""Depthwise conv2d (groups == channels), NCHW, with the padded input laid out so that output
rows vectorize with unit-stride loads at any stride.

    out[n, c, y, x] = sum_{ry, rx} padded[n, c, y*sy + ry*dy, x*sx + rx*dx] * w[c, 0, ry, rx]

The stage "pad" holds `padded` with its columns dealt by phase (column % sx), so that for every
tap the products of an output row read one phase with unit stride (strided reads happen once
per input element, in the pad stage, instead of once per tap).  When the row length divides by
the stride the phases are cut into blocks of V columns with the data starting at a block
boundary ("pad_blocks": whether a value is padding is decided per row and block, so the copy
moves whole vectors); otherwise one condition per element ("pad_phases").  `padded_plane`
builds either; max_pool2d_rows (ops/nn_pool_rows.py) shares it.  The main stage computes rows
rounded up to whole vectors (`row_width`; the extra columns read padding and are dropped by the
stage "depthwise_conv2d_cols").  Weights stay (C, 1, KH, KW).  The graph pass
conv2d's layout rule (ops/layout_rules.py) turns float32 depthwise conv2d with constant weights into this op.
Pattern complex-out-fusable; the main stage is named and tagged "depthwise_conv2d".
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


def _row_ok(data, yy, pt):
    h = int(data.shape[2].value)
    return te.all(yy - pt >= 0, yy - pt < h)


def padded_plane(data: te.Tensor, pt: int, pl: int, rows: int, cols: int, sx: int, owp: int, last_tap: int,
                 fill=None):
    """The padded input of a sliding-window op over rows of `owp` outputs at column stride `sx`
    whose last tap is `last_tap` input columns right of the first: blocked when the row divides
    into the phases, phase-split otherwise.  Returns (stage "pad", column) where
    column(x, tap) is the index tail of padded column x * sx + tap."""
    fill = te.const(0, data.dtype) if fill is None else fill
    if int(data.shape[3].value) % sx == 0:
        return _block_padded(data, pt, pl, rows, sx, owp, last_tap, fill)
    return _phase_padded(data, pt, pl, rows, sx, max(-(-cols // sx), owp + last_tap // sx), fill)


def _block_padded(data: te.Tensor, pt: int, pl: int, rows: int, sx: int, owp: int, last_tap: int, fill):
    """The padded plane with its columns dealt by data phase (column % sx) into blocks of V
    columns, (rows, sx, blocks, V): V is the largest power of two (at most 16) that divides a phase
    row, and each phase's data starts at a block boundary, so whether an element is padding
    depends on its row and block only and the copy moves whole blocks (a condition per lane makes
    C compilers emit gathers).  Needs a row length divisible by the stride.  Stage "pad", tagged
    "pad_blocks".  Returns the stage and the (phase, block, lane) index of output column x at tap
    offset `tap` (in input columns)."""
    n, c, h, wd = const_shape(data)
    per_phase = wd // sx
    v = 16
    while per_phase % v:
        v //= 2
    if v == 2:
        # GCC 12 at -O3 with AVX2 or AVX-512 miscompiles the copy's pair of guarded stores per
        # block (its if-converted, vectorized loop wrote other rows' values into some blocks:
        # a 3x3 depthwise conv with padding 2 on widths 18, 22, 26, ..., 38 gave wrong results);
        # blocks of one column copy the same data, one guarded store each
        v = 1
    phase_rows = -(-pl // sx)                   # ceil(pl / sx)
    front = -(-phase_rows // v)                 # blocks of zeros before each phase's data
    reach = owp - 1 + (last_tap - pl) // sx + front * v
    blocks = max(reach // v + 1, front + per_phase // v)

    def body(i, ch, yy, px, blk, lane):
        inside = te.all(_row_ok(data, yy, pt), blk >= front, blk < front + per_phase // v)
        return te.if_then_else(inside, data[i, ch, yy - pt, ((blk - front) * v + lane) * sx + px], fill)

    stage = te.compute((n, c, rows, sx, blocks, v), body, name="pad", tag="pad_blocks")

    def column(x, tap):
        q = x + (tap - pl) // sx + front * v       # (tap - pl) // sx rounds down: taps left of the data
        return ((tap - pl) % sx, q // v, q % v)

    return stage, column


def _phase_padded(data: te.Tensor, pt: int, pl: int, rows: int, sx: int, phase_cols: int, fill):
    """Stride sx > 1: the padded plane with its columns dealt into sx phases, (rows, sx, cols / sx),
    so that the taps of an output row read one phase with unit stride."""
    n, c, h, wd = const_shape(data)

    def body(i, ch, yy, px, xq):
        x = xq * sx + px - pl
        return te.if_then_else(te.all(_row_ok(data, yy, pt), x >= 0, x < wd), data[i, ch, yy - pt, x], fill)

    stage = te.compute((n, c, rows, sx, phase_cols), body, name="pad", tag="pad_phases")
    return stage, lambda x, tap: (tap % sx, x + tap // sx)


@op("depthwise_conv2d", COMPLEX, schedule={"cpu": "window2d.cpu", "gpu": "depthwise_conv2d.gpu"},
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
        xpad, column = padded_plane(data, p[0], p[1], rows, cols, sx, owp, (kw - 1) * dx)
        ry = te.reduce_axis((0, kh), name="ry")
        rx = te.reduce_axis((0, kw), name="rx")
        full = te.compute(
            (n, c, oh, owp),
            lambda i, ch, y, x: te.sum(xpad[(i, ch, y * sy + ry * dy, *column(x, rx * dx))] * w[ch, 0, ry, rx],
                                       axis=[ry, rx]),
            name="depthwise_conv2d", tag="depthwise_conv2d")
        if owp == ow:
            return full
        return te.compute((n, c, oh, ow), lambda *i: full[i], name="depthwise_conv2d_cols")

    @staticmethod
    def reference(data, w, strides=(1, 1), padding=(0, 0, 0, 0), dilations=(1, 1)):
        s, p, d, _ = _attrs(data.shape, w.shape, strides, padding, dilations)
        return conv_reference(data, w, s, p, d, data.shape[1])
