"""deform_im2col: the sampled windows of a 2-D deformable convolution (ONNX DeformConv), so that
the convolution is one grouped matrix product of the weights with them (ops -> TE).

    cols[n, c, i, j, oh, ow] = mask[n, m, oh, ow] * bilinear(x[n, c], y, x)
        y = oh * sh - ph + i * dh + offset[n, 2 m, oh, ow]
        x = ow * sw - pw + j * dw + offset[n, 2 m + 1, oh, ow]
        m = (g * KH + i) * KW + j, g = c // (C / offset_group)   (the channel's offset group)

x is (N, C, H, W), offset (N, offset_group * 2 * KH * KW, OH, OW), mask (N, offset_group * KH *
KW, OH, OW) or absent (ones); the result is (N, C, KH, KW, OH, OW).  bilinear reads the four
pixels around (y, x) and counts those outside the image as 0 (GridSample's zeros padding with
align_corners, which the ONNX reference uses).  Injective: every element is a few data-dependent
reads, like a gather; the arithmetic runs in float32 (float64 for float64 input).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .. import te
from .common import const_shape
from .registry import INJECTIVE, OpError, TensorType, op

_DEFAULTS = {"strides": (1, 1), "pads": (0, 0, 0, 0), "dilations": (1, 1), "offset_group": 1}
_FLOATS = ("float16", "float32", "float64")


def deform_output_hw(hw: Sequence[int], kernel: Sequence[int], strides, pads, dilations) -> tuple:
    """(OH, OW) of the convolution."""
    return tuple((hw[i] + pads[i] + pads[2 + i] - dilations[i] * (kernel[i] - 1) - 1) // strides[i] + 1
                 for i in range(2))


def _check(x: TensorType, offset: TensorType, mask: TensorType | None, kernel, strides, pads, dilations,
           offset_group: int) -> tuple:
    if len(x.shape) != 4 or x.dtype not in _FLOATS:
        raise OpError(f"deform_im2col: X has shape {tuple(x.shape)} and dtype {x.dtype}; only floating "
                      "point 2-D data (N, C, H, W) is supported")
    kernel, strides, pads, dilations = (tuple(int(v) for v in t) for t in (kernel, strides, pads, dilations))
    if len(kernel) != 2 or len(strides) != 2 or len(dilations) != 2 or len(pads) != 4:
        raise OpError("deform_im2col: kernel, strides and dilations need 2 values and pads 4")
    n, c = x.shape[:2]
    if offset_group < 1 or c % offset_group:
        raise OpError(f"deform_im2col: offset_group={offset_group} must divide the {c} channels")
    oh, ow = deform_output_hw(x.shape[2:], kernel, strides, pads, dilations)
    kk = kernel[0] * kernel[1]
    want = (n, offset_group * 2 * kk, oh, ow)
    if tuple(offset.shape) != want or offset.dtype != x.dtype:
        raise OpError(f"deform_im2col: offset has shape {tuple(offset.shape)}; it must be {want} in {x.dtype}")
    if mask is not None and (tuple(mask.shape) != (n, offset_group * kk, oh, ow) or mask.dtype != x.dtype):
        raise OpError(f"deform_im2col: mask has shape {tuple(mask.shape)}; it must be "
                      f"{(n, offset_group * kk, oh, ow)} in {x.dtype}")
    return (n, c) + kernel + (oh, ow)


def _work(dtype: str) -> str:
    return "float64" if dtype == "float64" else "float32"


@op("deform_im2col", pattern=INJECTIVE, attr_defaults=_DEFAULTS)
class deform_im2col:
    def infer(x: TensorType, offset: TensorType, mask: TensorType | None = None, **a: Any) -> TensorType:
        return TensorType(_check(x, offset, mask, a["kernel"], a["strides"], a["pads"], a["dilations"],
                                 int(a["offset_group"])), x.dtype)

    def compute(x: te.Tensor, offset: te.Tensor, mask: te.Tensor | None = None, **a: Any) -> Any:
        n, c, h, w = const_shape(x)
        kh, kw = (int(v) for v in a["kernel"])
        (sh, sw), (ph, pw), (dh, dw) = a["strides"], a["pads"][:2], a["dilations"]
        per_group = c // int(a["offset_group"])
        oh, ow = deform_output_hw((h, w), (kh, kw), a["strides"], a["pads"], a["dilations"])
        work = _work(x.dtype)
        zero = te.const(0.0, work)

        def f(b, ch, i, j, y, z):
            m = ((ch // per_group) * kh + i) * kw + j
            py = (y * sh - ph + i * dh).astype(work) + offset[b, 2 * m, y, z].astype(work)
            px = (z * sw - pw + j * dw).astype(work) + offset[b, 2 * m + 1, y, z].astype(work)
            fy, fx = te.floor(py), te.floor(px)
            ly, lx = py - fy, px - fx
            y0, x0 = fy.astype("int64"), fx.astype("int64")
            total: Any = None
            for dy, wy in ((0, te.const(1.0, work) - ly), (1, ly)):
                for dx, wx in ((0, te.const(1.0, work) - lx), (1, lx)):
                    yi, xi = y0 + dy, x0 + dx
                    inside = te.all(yi >= 0, yi < h, xi >= 0, xi < w)
                    read = x[b, ch, te.min(te.max(yi, 0), h - 1), te.min(te.max(xi, 0), w - 1)].astype(work)
                    term = te.if_then_else(inside, read, zero) * (wy * wx)
                    total = term if total is None else total + term
            if mask is not None:
                total = total * mask[b, m, y, z].astype(work)
            return total.astype(x.dtype) if work != x.dtype else total

        return te.compute((n, c, kh, kw, oh, ow), f, name="deform_im2col", tag="deform_im2col")

    def reference(x: np.ndarray, offset: np.ndarray, mask: np.ndarray | None = None, **a: Any) -> np.ndarray:
        n, c, kh, kw, oh, ow = _check(TensorType(x.shape, x.dtype.name), TensorType(offset.shape, offset.dtype.name),
                                      None if mask is None else TensorType(mask.shape, mask.dtype.name), a["kernel"],
                                      a["strides"], a["pads"], a["dilations"], int(a["offset_group"]))
        (sh, sw), (ph, pw), (dh, dw) = a["strides"], a["pads"][:2], a["dilations"]
        groups, h, w = int(a["offset_group"]), x.shape[2], x.shape[3]
        work = _work(x.dtype.name)
        off = offset.astype(work).reshape(n, groups, kh, kw, 2, oh, ow)
        base_y = (np.arange(oh) * sh - ph)[None, :, None] + (np.arange(kh) * dh)[:, None, None]   # (KH, OH, 1)
        base_x = (np.arange(ow) * sw - pw)[None, None, :] + (np.arange(kw) * dw)[:, None, None]   # (KW, 1, OW)
        py = base_y[None, None, :, None] + off[:, :, :, :, 0]            # (N, G, KH, KW, OH, OW)
        px = base_x[None, None, None, :] + off[:, :, :, :, 1]
        fy, fx = np.floor(py), np.floor(px)
        ly, lx = py - fy, px - fx
        y0, x0 = fy.astype(np.int64), fx.astype(np.int64)
        xs = x.astype(work).reshape(n, groups, c // groups, h, w)
        bi = np.arange(n).reshape(n, 1, 1, 1, 1, 1)
        gi = np.arange(groups).reshape(1, groups, 1, 1, 1, 1)
        total = np.zeros((n, groups, c // groups, kh, kw, oh, ow), work)
        for dy, wy in ((0, 1.0 - ly), (1, ly)):
            for dx, wx in ((0, 1.0 - lx), (1, lx)):
                yi, xi = y0 + dy, x0 + dx
                inside = (yi >= 0) & (yi < h) & (xi >= 0) & (xi < w)
                read = xs[bi, gi, :, np.clip(yi, 0, h - 1), np.clip(xi, 0, w - 1)]   # (N, G, KH, KW, OH, OW, C/G)
                term = np.where(inside[..., None], read, 0.0) * (wy * wx)[..., None]
                total = total + np.moveaxis(term, -1, 2)
        if mask is not None:
            total = total * mask.astype(work).reshape(n, groups, 1, kh, kw, oh, ow)
        return total.reshape(n, c, kh, kw, oh, ow).astype(x.dtype)
