"""`conv2d.accel` and `matmul.accel`: int8 convolution and matrix product on the simulated
accelerator, with the requantizing epilogue on its tensor ALU (ACCEL.md 4.9, VTA's
`vta_conv2d.py`).

Layouts are blocked so that one buffer element is one operand of the GEMM core:

    data   (N/B, C/Bi, H, W, B, Bi)          int8     B = batch, Bi = block_in
    kernel (O/Bo, C/Bi, KH, KW, Bo, Bi)      int8     Bo = block_out
    bias   (O/Bo, B, Bo)                     int32
    out    (N/B, O/Bo, OH, OW, B, Bo)        int8

    pad[n, c, y, x, b, k] = data[..., y - p, x - p, ...] inside the image, else 0   (INP buffer)
    acc = sum_{ko, dy, dx, ki} int32(pad[n, ko, y*s + dy, x*s + dx, b, ki]) * int32(kernel[o, ko, dy, dx, j, ki])
    out = int8(min(max((acc >> shift) + bias[o, b, j], 0), 127))

`>> shift` is written as a floor division by 2**shift (the same integer function); the
accelerator's code generator turns it into the ALU's arithmetic shift.  Every intermediate lives
in the accumulator buffer; the final cast is the truncating STORE.

Schedule (VTA's template): the output is tiled (tile_co blocks x tile_h rows x tile_w columns);
the accumulator stages are attached at the tile (the store point); the convolution's input
channels are split by tile_ci and the input and weight copies are attached at the outer part
(one DMA batch per step); the innermost block product is tensorized with the GEMM intrinsic.
With `threads` = 2 the output-channel tiles (or, when they do not split evenly, the row tiles)
are split over two virtual threads: each gets its own copy of every buffer, which double-buffers
loads against GEMMs.  Knobs: tile_co, tile_h, tile_w, tile_ci, threads.
"""
from __future__ import annotations

import numpy as np

from ...ir.expr import const
from ...te.math import if_then_else
from ...te.math import max as te_max
from ...te.math import min as te_min
from ...te.schedule import create_schedule
from ...te.space import as_config
from ...te.tensor import compute, reduce_axis, thread_axis
from ...te.tensor import sum as te_sum
from ..accel_intrin import ACC_SCOPE, INP_SCOPE, WGT_SCOPE, gemm_intrin
from . import workload_template


def reference(data, kernel, bias, strides: int = 1, padding: int = 0, shift: int = 0, **_attrs) -> np.ndarray:
    """NumPy, in the blocked layouts: the convolution in int64, then the integer epilogue."""
    nb, cb, h, w, b, bi = data.shape
    ob, _, kh, kw, bo, _ = kernel.shape
    x = data.transpose(0, 4, 1, 5, 2, 3).reshape(nb * b, cb * bi, h, w).astype(np.int64)
    wt = kernel.transpose(0, 4, 1, 5, 2, 3).reshape(ob * bo, cb * bi, kh, kw).astype(np.int64)
    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh = (h + 2 * padding - kh) // strides + 1
    ow = (w + 2 * padding - kw) // strides + 1
    acc = np.zeros((nb * b, ob * bo, oh, ow), np.int64)
    for dy in range(kh):
        for dx in range(kw):
            patch = x[:, :, dy:dy + strides * oh:strides, dx:dx + strides * ow:strides]
            acc += np.einsum("nchw,oc->nohw", patch, wt[:, :, dy, dx])
    acc = acc.astype(np.int32)                                   # the accumulator wraps at 32 bits
    bias_nc = bias[:, 0, :].reshape(ob * bo).astype(np.int32)
    res = np.clip((acc >> shift) + bias_nc[None, :, None, None], 0, 127).astype(np.int8)
    return res.reshape(nb, b, ob, bo, oh, ow).transpose(0, 2, 4, 5, 1, 3).copy()


def _divisors(n: int, limit: int | None = None) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0 and (limit is None or d <= limit)]


def _default_tiles(ob: int, oh: int, ow: int, kh: int, kw: int, stride: int,
                   acc_depth: int, inp_depth: int) -> tuple[int, int, int]:
    """Tiles that leave room for two copies of every buffer (so one and two threads run the
    same tiling): whole rows up to 56 wide, 7 rows where that divides, as many output-channel
    blocks (up to 8, splitting in two) as fit."""
    tile_w = max(_divisors(ow, 56))
    tile_h = 7 if oh % 7 == 0 else max(_divisors(oh, 8))
    tile_co = 1
    for co in (8, 4, 2, 1):
        per_thread_acc = co * tile_h * tile_w + co
        per_thread_inp = ((tile_h - 1) * stride + kh) * ((tile_w - 1) * stride + kw)
        if ob % (2 * co) == 0 and 2 * per_thread_acc <= acc_depth and 2 * per_thread_inp <= inp_depth:
            tile_co = co
            break
    return tile_co, tile_h, tile_w


@workload_template("conv2d.accel", reference=reference)
def conv2d_accel(cfg, target, inputs, strides: int = 1, padding: int = 0, shift: int = 0,
                 acc_depth: int = 2048, inp_depth: int = 2048):
    """Schedule the int8 convolution with its epilogue; `inputs` are the blocked data, kernel and
    bias placeholders (the workload-template convention, so the tuner can instantiate it);
    returns (schedule, [out])."""
    cfg = as_config(cfg)
    data, kernel, bias = inputs
    nb, cb, h, w, batch, bi = (int(x.value) for x in data.shape)
    ob, _, kh, kw, bo, _ = (int(x.value) for x in kernel.shape)
    s_ = int(strides)
    oh, ow = (h + 2 * padding - kh) // s_ + 1, (w + 2 * padding - kw) // s_ + 1
    d_co, d_h, d_w = _default_tiles(ob, oh, ow, kh, kw, s_, acc_depth, inp_depth)
    cfg.define_knob("tile_co", _divisors(ob, 16), default=d_co)
    cfg.define_knob("tile_h", _divisors(oh, 28), default=d_h)
    cfg.define_knob("tile_w", _divisors(ow, 56), default=d_w)
    cfg.define_knob("tile_ci", _divisors(cb, 4), default=1)
    cfg.define_knob("threads", [1, 2], default=1)
    tile_co, tile_h, tile_w = cfg["tile_co"].val, cfg["tile_h"].val, cfg["tile_w"].val
    tile_ci, threads = cfg["tile_ci"].val, cfg["threads"].val

    if padding:
        pad = compute((nb, cb, h + 2 * padding, w + 2 * padding, batch, bi),
                      lambda n, c, y, x, b, k: if_then_else(
                          (y >= padding) & (y < h + padding) & (x >= padding) & (x < w + padding),
                          data[n, c, y - padding, x - padding, b, k], const(0, "int8")),
                      name="data_pad")
    else:
        pad = data
    ko = reduce_axis((0, cb), name="ko")
    dy = reduce_axis((0, kh), name="dy")
    dx = reduce_axis((0, kw), name="dx")
    ki = reduce_axis((0, bi), name="ki")
    acc = compute((nb, ob, oh, ow, batch, bo), lambda n, o, y, x, b, j: te_sum(
        pad[n, ko, y * s_ + dy, x * s_ + dx, b, ki].astype("int32")
        * kernel[o, ko, dy, dx, j, ki].astype("int32"), axis=[ko, dy, dx, ki]), name="conv_acc")
    shr = compute(acc.shape, lambda *i: acc[i] // const(1 << shift, "int32"), name="conv_shr")
    add = compute(acc.shape, lambda n, o, y, x, b, j: shr[n, o, y, x, b, j] + bias[o, b, j], name="conv_bias")
    lo = compute(acc.shape, lambda *i: te_max(add[i], const(0, "int32")), name="conv_relu")
    hi = compute(acc.shape, lambda *i: te_min(lo[i], const(127, "int32")), name="conv_clip")
    out = compute(acc.shape, lambda *i: hi[i].astype("int8"), name="conv_out")

    s = create_schedule(out.op)
    if padding:
        s[pad].set_scope(INP_SCOPE)
        data_buf = pad
    else:
        data_buf = s.cache_read(data, INP_SCOPE, [acc])
    kernel_buf = s.cache_read(kernel, WGT_SCOPE, [acc])
    bias_buf = s.cache_read(bias, ACC_SCOPE, [add])
    for t in (acc, shr, add, lo, hi):
        s[t].set_scope(ACC_SCOPE)

    n, o, y, x, b, j = s[out].op.axis
    co_o, co_i = s[out].split(o, factor=tile_co)
    h_o, h_i = s[out].split(y, factor=tile_h)
    w_o, w_i = s[out].split(x, factor=tile_w)
    if threads > 1 and (ob // tile_co) % threads == 0:
        vt, co_o = s[out].split(co_o, nparts=threads)
        s[out].reorder(vt, n, h_o, co_o, w_o, co_i, h_i, w_i, b, j)
    elif threads > 1 and (oh // tile_h) % threads == 0:
        vt, h_o = s[out].split(h_o, nparts=threads)
        s[out].reorder(vt, n, h_o, co_o, w_o, co_i, h_i, w_i, b, j)
    elif threads > 1:
        raise ValueError(f"conv2d.accel: neither the {ob // tile_co} output-channel tiles nor the "
                         f"{oh // tile_h} row tiles split evenly over {threads} virtual threads")
    else:
        vt = None
        s[out].reorder(n, h_o, co_o, w_o, co_i, h_i, w_i, b, j)
    if vt is not None:
        s[out].bind(vt, thread_axis("vthread"))
    for t in (acc, shr, add, lo, hi, bias_buf):
        s[t].compute_at(s[out], w_o)

    an, ao, ay, ax, ab, aj = s[acc].op.axis
    ako, ady, adx, aki = s[acc].op.reduce_axis
    ko_o, ko_i = s[acc].split(ako, factor=tile_ci)
    s[acc].reorder(ko_o, an, ko_i, ady, adx, ao, ay, ax, ab, aj, aki)
    s[data_buf].compute_at(s[acc], ko_o)
    s[kernel_buf].compute_at(s[acc], ko_o)
    s[acc].tensorize(ab, gemm_intrin(batch, bi, bo))
    return s, [out]
