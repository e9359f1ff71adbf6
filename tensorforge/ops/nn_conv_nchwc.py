"""conv2d in the blocked output layout NCHW[x]c, with weights packed as OIHW[x]o, and the two
layout transforms between NCHW and NCHW[x]c.

`conv2d_nchwc(data, packed_weight)` reads data laid out as `data_layout` says, NCHW (N, C, H, W)
or NCHW[b]c (N, C / b, H, W, b), and weights laid out as (F / B, C / G, KH, KW, B) for `groups`
G (each output block lies in one group, so B divides F / G, and a blocked input's b divides
C / G: output block fo reads the input channels of its group only); it writes
(N, F / B, OH, OW, B): the B output channels of a block are contiguous, so the CPU template
accumulates a (OW-tile x B) register block with one vector per output column (the GEMM
micro-kernel shape).  With blocked data the reduction over input channels is split into the
block (rco) and the channel within it (rci): data[n, rco, y, x, rci] walks contiguous memory as
rci runs, and each step of rci is one broadcast of an input value against the B-wide weight
vector.

`nchwc_to_nchw` and `nchw_to_nchwc` are injective copies, fused into a neighbouring kernel.
The graph passes `alter_layout` (packing constant weights at compile time) and
`alter_layout_propagate` (keeping values blocked between convolutions) introduce all three.
"""
from __future__ import annotations

import re

import numpy as np

from .. import te
from .nn_conv import conv_reference
from .nn_window import pad_stage, padded_extent
from .registry import COMPLEX, INJECTIVE, OpError, TensorType, op


def pack_weight(w: np.ndarray, block: int) -> np.ndarray:
    """OIHW -> (O / block, I, KH, KW, block)."""
    f, c, kh, kw = w.shape
    return np.ascontiguousarray(w.reshape(f // block, block, c, kh, kw).transpose(0, 2, 3, 4, 1))


def unpack_weight(wp: np.ndarray) -> np.ndarray:
    fb, c, kh, kw, b = wp.shape
    return wp.transpose(0, 4, 1, 2, 3).reshape(fb * b, c, kh, kw)


def to_nchwc(x: np.ndarray, block: int) -> np.ndarray:
    """(N, C, H, W) -> (N, C / block, H, W, block)."""
    n, c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(n, c // block, block, h, w).transpose(0, 1, 3, 4, 2))


def to_nchw(x: np.ndarray) -> np.ndarray:
    """(N, C / b, H, W, b) -> (N, C, H, W)."""
    n, cb, h, w, b = x.shape
    return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(n, cb * b, h, w))


def layout_block(layout: str, op: str = "conv2d_nchwc") -> int:
    """The channel block of a layout name: "NCHW" -> 0, "NCHW16c" -> 16."""
    if layout == "NCHW":
        return 0
    m = re.fullmatch(r"NCHW([1-9][0-9]*)c", str(layout))
    if m is None:
        raise OpError(f"{op}: data_layout must be 'NCHW' or 'NCHW<b>c' (e.g. 'NCHW16c'), got {layout!r}")
    return int(m.group(1))


def blocked_layout(block: int) -> str:
    return f"NCHW{block}c"


def _out_hw(hw, kernel, strides, padding, dilations):
    h, w = hw
    kh, kw = kernel
    oh = (h + padding[0] + padding[2] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (w + padding[1] + padding[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    return oh, ow


def _data_nchw_shape(shape: tuple, layout: str) -> tuple:
    """The NCHW shape of data given in `layout` (OpError when rank or block disagree)."""
    block = layout_block(layout)
    if not block:
        if len(shape) != 4:
            raise OpError(f"conv2d_nchwc: NCHW data must have rank 4, got shape {tuple(shape)}")
        return tuple(shape)
    if len(shape) != 5 or shape[4] != block:
        raise OpError(f"conv2d_nchwc: {layout} data must have shape (N, C/{block}, H, W, {block}), "
                      f"got {tuple(shape)}")
    return (shape[0], shape[1] * block, shape[2], shape[3])


# data_layout has no entry in attr_defaults, so an NCHW-input conv keeps the tuning task (and
# records) it had before blocked inputs existed
@op("conv2d_nchwc", COMPLEX, schedule={"cpu": "conv2d_nchwc.cpu"},
    attr_defaults={"strides": (1, 1), "padding": (0, 0, 0, 0), "dilations": (1, 1)})
class conv2d_nchwc:
    @staticmethod
    def infer(data: TensorType, wp: TensorType, strides=(1, 1), padding=(0, 0, 0, 0), dilations=(1, 1),
              data_layout="NCHW", groups=1, out_block=0, filters=0):
        n, c, h, w = _data_nchw_shape(tuple(data.shape), data_layout)
        groups = int(groups)
        if len(wp.shape) != 5 or groups < 1 or c != wp.shape[1] * groups:
            raise OpError(f"conv2d_nchwc: data {tuple(data.shape)} ({data_layout}) and packed weight "
                          f"{tuple(wp.shape)} disagree (groups {groups})")
        bi = layout_block(data_layout)
        if wp.shape[0] % groups or (bi and wp.shape[1] % bi):
            raise OpError(f"conv2d_nchwc: {groups} groups split neither the {wp.shape[0]} output blocks nor "
                          f"the {wp.shape[1]} input channels per group into whole blocks of {bi or 1}")
        oh, ow = _out_hw((h, w), wp.shape[2:4], strides, padding, dilations)
        if oh <= 0 or ow <= 0:
            raise OpError("conv2d_nchwc: the window is larger than the padded input")
        if out_block:
            ob, f = _narrow_output(tuple(wp.shape), bi, (strides, padding, dilations, groups), out_block, filters)
            return TensorType((n, f // ob, oh, ow, ob), data.dtype)
        return TensorType((n, wp.shape[0], oh, ow, wp.shape[4]), data.dtype)

    @staticmethod
    def compute(data: te.Tensor, wp: te.Tensor, strides=(1, 1), padding=(0, 0, 0, 0), dilations=(1, 1),
                data_layout="NCHW", groups=1, out_block=0, filters=0):
        shape = tuple(int(d.value) for d in data.shape)
        n, _, h, w = _data_nchw_shape(shape, data_layout)
        fb, c, kh, kw, b = (int(d.value) for d in wp.shape)       # c: input channels per group
        per_group = fb // int(groups)                              # output blocks per group
        oh, ow = _out_hw((h, w), (kh, kw), strides, padding, dilations)
        ext = padded_extent((h, w), (oh, ow), (kh, kw), strides, dilations)
        ry = te.reduce_axis((0, kh), name="ry")
        rx = te.reduce_axis((0, kw), name="rx")
        sy, sx = strides
        dy, dx = dilations
        bi = layout_block(data_layout)
        if not bi:
            padded = pad_stage(data, (padding[0], padding[1]), ext)
            rc = te.reduce_axis((0, c), name="rc")

            def channel(fo, rc):
                return rc if per_group == fb else fo // per_group * c + rc
            return te.compute(
                (n, fb, oh, ow, b),
                lambda i, fo, y, x, fi: te.sum(padded[i, channel(fo, rc), y * sy + ry * dy, x * sx + rx * dx]
                                               * wp[fo, rc, ry, rx, fi], axis=[rc, ry, rx]),
                name="conv2d_nchwc", tag="conv2d_nchwc", attrs={"stride_x": int(sx)})
        if out_block:
            ob, f = _narrow_output((fb, c, kh, kw, b), bi, (strides, padding, dilations, groups), out_block, filters)
            return _pointwise_rows(data, wp, oh, ow, bi, (sy, sx), (ob, f))
        if (kh, kw) == (1, 1) and not any(padding) and per_group == fb:
            return _pointwise_rows(data, wp, oh, ow, bi, (sy, sx))
        # the channel block rides along as a third "spatial" axis that needs no padding
        padded = pad_stage(data, (padding[0], padding[1], 0), (*ext, bi))
        rco = te.reduce_axis((0, c // bi), name="rco")
        rci = te.reduce_axis((0, bi), name="rci")

        def block(fo, rco):
            return rco if per_group == fb else fo // per_group * (c // bi) + rco
        return te.compute(
            (n, fb, oh, ow, b),
            lambda i, fo, y, x, fi: te.sum(padded[i, block(fo, rco), y * sy + ry * dy, x * sx + rx * dx, rci]
                                           * wp[fo, rco * bi + rci, ry, rx, fi], axis=[rco, ry, rx, rci]),
            name="conv2d_nchwc", tag="conv2d_nchwc", attrs={"stride_x": int(sx)})

    @staticmethod
    def reference(data, wp, strides=(1, 1), padding=(0, 0, 0, 0), dilations=(1, 1), data_layout="NCHW",
                  groups=1, out_block=0, filters=0):
        _data_nchw_shape(data.shape, data_layout)
        x = to_nchw(data) if layout_block(data_layout) else data
        w = unpack_weight(wp)
        if out_block:
            w = w[:int(filters)]
        out = conv_reference(x, w, strides, padding, dilations, int(groups))
        return to_nchwc(out, int(out_block) or wp.shape[4])


def _narrow_output(wp: tuple, bi: int, conv: tuple, out_block, filters) -> tuple[int, int]:
    """(out_block, filters) of a conv whose weight blocks are wider than its output's: checked
    that the weight's blocks split into whole output blocks and hold the filters, and that the
    conv is one the wide form serves (1x1, stride 1, unpadded, one group, on blocked data)."""
    strides, padding, dilations, groups = conv
    ob, f, b = int(out_block), int(filters), int(wp[4])
    if ob < 1 or b % ob or f < 1 or f % ob or f > wp[0] * b:
        raise OpError(f"conv2d_nchwc: out_block {ob} and filters {f} do not fit the packed weight {tuple(wp)} "
                      f"(the output blocks must split its blocks and hold at most its {wp[0] * b} filters)")
    if not bi or tuple(wp[2:4]) != (1, 1) or tuple(strides) != (1, 1) or any(padding) \
            or tuple(dilations) != (1, 1) or int(groups) != 1:
        raise OpError("conv2d_nchwc: out_block needs a 1x1, stride-1, unpadded conv of one group on blocked data")
    return ob, f


def _pointwise_rows(data: te.Tensor, wp: te.Tensor, oh: int, ow: int, bi: int,
                    strides: tuple = (1, 1), narrow: tuple | None = None) -> te.Tensor:
    """A 1x1 unpadded conv on blocked data is a matrix product over the output's positions in
    memory order: `conv2d_nchwc_rows` computes it on (N, F/B, OH * OW, B), so a register tile
    can span positions across rows (6 of them with AVX2's 6 x 16 micro-kernel, where a row of 14
    or 7 only splits into 7s), and `conv2d_nchwc` is that product seen as (N, F/B, OH, OW, B).
    With strides, a position reads every s-th input row and column (ResNet's downsampling
    convs): the tile's input values are broadcast one by one either way."""
    n = int(data.shape[0].value)
    fb, c, _, _, b = (int(d.value) for d in wp.shape)
    sy, sx = strides
    rco = te.reduce_axis((0, c // bi), name="rco")
    rci = te.reduce_axis((0, bi), name="rci")
    rows = te.compute(
        (n, fb, oh * ow, b),
        lambda i, fo, p, fi: te.sum(data[i, rco, p // ow * sy, p % ow * sx, rci] * wp[fo, rco * bi + rci, 0, 0, fi],
                                    axis=[rco, rci]),
        name="conv2d_nchwc_rows", tag="conv2d_nchwc_rows")
    if narrow is not None:          # output blocks of ob channels, r of them per block of rows
        ob, f = narrow
        r = b // ob
        return te.compute((n, f // ob, oh, ow, ob),
                          lambda i, fo, y, x, fi: rows[i, fo // r, y * ow + x, fo % r * ob + fi],
                          name="conv2d_nchwc", tag="conv2d_nchwc", attrs={"stride_x": int(sx), "out_block": ob})
    return te.compute((n, fb, oh, ow, b), lambda i, fo, y, x, fi: rows[i, fo, y * ow + x, fi],
                      name="conv2d_nchwc", tag="conv2d_nchwc", attrs={"stride_x": int(sx)})


@op("nchwc_to_nchw", INJECTIVE)
class nchwc_to_nchw:
    @staticmethod
    def infer(x: TensorType):
        if len(x.shape) != 5:
            raise OpError(f"nchwc_to_nchw: the input must be (N, C/b, H, W, b), got shape {tuple(x.shape)}")
        n, fb, h, w, b = x.shape
        return TensorType((n, fb * b, h, w), x.dtype)

    @staticmethod
    def compute(x: te.Tensor):
        n, fb, h, w, b = (int(d.value) for d in x.shape)
        return te.compute((n, fb * b, h, w), lambda i, f, y, z: x[i, f // b, y, z, f % b], name="nchw")

    @staticmethod
    def reference(x):
        return to_nchw(x)


@op("nchw_to_nchwc", INJECTIVE)
class nchw_to_nchwc:
    @staticmethod
    def infer(x: TensorType, block: int = 16):
        block = int(block)
        if len(x.shape) != 4 or block < 1 or x.shape[1] % block:
            raise OpError(f"nchw_to_nchwc: the input must be (N, C, H, W) with C divisible by the block "
                          f"{block}, got shape {tuple(x.shape)}")
        n, c, h, w = x.shape
        return TensorType((n, c // block, h, w, block), x.dtype)

    @staticmethod
    def compute(x: te.Tensor, block: int = 16):
        n, c, h, w = (int(d.value) for d in x.shape)
        b = int(block)
        return te.compute((n, c // b, h, w, b), lambda i, fo, y, z, fi: x[i, fo * b + fi, y, z], name="nchwc",
                          tag="nchw_to_nchwc")

    @staticmethod
    def reference(x, block: int = 16):
        return to_nchwc(x, int(block))
