"""Transposed convolution: conv_transpose1d / 2d / 3d, NC+spatial layout.

Input i of data contributes weight[c, m, k] * data[n, c, i] to output position
`i*stride + k*dilation - pad_begin`.  Inputs: data (N, C, *spatial), weight (C, M / groups, *kernel);
output (N, M, *out) with

    out = stride * (in - 1) + output_padding + (kernel - 1) * dilation + 1 - pad_begin - pad_end

Attributes: strides, padding (begin_1.., end_1..; negative values grow the output with zeros),
output_padding, dilations, groups.  The ONNX converter turns output_shape and auto_pad into
padding and adds the bias as a separate node.

TE: the stage "pad" spreads the input `stride` apart and pads it by `(kernel-1)*dilation - pad_begin`
at the front (the classic "dilate then pad" rewrite, done in one guarded stage); the main stage,
named and tagged with the op name, is then an ordinary convolution with the kernel flipped and its
in/out channel axes swapped.  Pattern: complex-out-fusable.
"""
from __future__ import annotations

import itertools

import numpy as np

from .. import te
from .common import const_shape
from .nn_conv import cast_back, te_accum_dtype
from .nn_window import check_layout, effective_kernel, spatial_attrs
from .registry import COMPLEX, OpDef, OpError, TensorType, register

RANKS = (1, 2, 3)


def transpose_attrs(op: str, rank: int, data: tuple, weight: tuple, strides, padding, output_padding, dilations,
                    groups) -> tuple:
    """Checked (strides, padding, output_padding, dilations, groups) for `rank` spatial axes."""
    check_layout(op, data, rank)
    check_layout(op, weight, rank, "weight")
    strides, padding, dilations = spatial_attrs(op, rank, strides, padding, dilations)
    output_padding = tuple(int(v) for v in output_padding) if output_padding is not None else (0,) * rank
    if len(output_padding) != rank or any(v < 0 for v in output_padding):
        raise OpError(f"{op}: output_padding must be {rank} non-negative integers, got {output_padding}")
    groups = int(groups)
    if groups < 1 or data[1] % groups:
        raise OpError(f"{op}: groups={groups} must divide the input channels {data[1]}")
    if weight[0] != data[1]:
        raise OpError(f"{op}: weight {tuple(weight)} must have the data's {data[1]} input channels first")
    return strides, padding, output_padding, dilations, groups


def transpose_out_shape(op: str, data: tuple, weight: tuple, strides, padding, output_padding,
                        dilations, groups: int) -> tuple:
    rank = len(data) - 2
    out = []
    for i in range(rank):
        size = (strides[i] * (data[2 + i] - 1) + output_padding[i]
                + effective_kernel(weight[2 + i], dilations[i]) - padding[i] - padding[rank + i])
        if size < 1:
            raise OpError(f"{op}: padding {padding} leaves no output along spatial axis {i}")
        out.append(size)
    return (data[0], weight[1] * groups, *out)


def _make(rank: int) -> OpDef:
    name = f"conv_transpose{rank}d"

    def infer(data: TensorType, weight: TensorType, strides=None, padding=None, output_padding=None,
              dilations=None, groups: int = 1) -> TensorType:
        if data is None or weight is None:
            raise OpError(f"{name}: needs data and weight")
        if weight.dtype != data.dtype:
            raise OpError(f"{name}: weight dtype {weight.dtype} differs from data dtype {data.dtype}")
        attrs = transpose_attrs(name, rank, tuple(data.shape), tuple(weight.shape), strides, padding,
                                output_padding, dilations, groups)
        return TensorType(transpose_out_shape(name, tuple(data.shape), tuple(weight.shape), *attrs), data.dtype)

    def compute(data: te.Tensor, weight: te.Tensor, strides=None, padding=None, output_padding=None,
                dilations=None, groups: int = 1) -> te.Tensor:
        dshape, wshape = const_shape(data), const_shape(weight)
        s, p, op_, d, g = transpose_attrs(name, rank, dshape, wshape, strides, padding, output_padding,
                                          dilations, groups)
        out_shape = transpose_out_shape(name, dshape, wshape, s, p, op_, d, g)
        kernel = wshape[2:]
        front = [effective_kernel(kernel[i], d[i]) - 1 - p[i] for i in range(rank)]
        extent = [out_shape[2 + i] + effective_kernel(kernel[i], d[i]) - 1 for i in range(rank)]
        spread = _spread_stage(data, s, front, extent)
        cin_g, cout_g = dshape[1] // g, wshape[1]
        rc = te.reduce_axis((0, cin_g), name="rc")
        letters = "zyx"[3 - rank:]
        rk = [te.reduce_axis((0, kernel[i]), name=f"r{letters[i]}") for i in range(rank)]
        acc = te_accum_dtype(data.dtype)

        def body(*idx):
            n, m, o = idx[0], idx[1], idx[2:]
            chan = rc if g == 1 else (m // cout_g) * cin_g + rc
            wm = m if g == 1 else m % cout_g
            src = [o[i] + rk[i] * d[i] for i in range(rank)]
            flipped = [kernel[i] - 1 - rk[i] for i in range(rank)]
            return te.sum(spread[(n, chan, *src)].astype(acc) * weight[(chan, wm, *flipped)].astype(acc),
                          axis=[rc, *rk])

        out = te.compute(out_shape, body, name=name, tag=name,
                         attrs={"strides": s, "padding": p, "output_padding": op_, "dilations": d, "groups": g})
        return cast_back(out, data.dtype)

    def reference(data: np.ndarray, weight: np.ndarray, strides=None, padding=None, output_padding=None,
                  dilations=None, groups: int = 1) -> np.ndarray:
        attrs = transpose_attrs(name, rank, data.shape, weight.shape, strides, padding, output_padding,
                                dilations, groups)
        return conv_transpose_reference(data, weight, *attrs)

    return register(OpDef(name, COMPLEX, infer, reference, compute, attr_defaults={"groups": 1}))


def _spread_stage(data: te.Tensor, strides, front, extent) -> te.Tensor:
    """Stage "pad": data[n, c, i] placed at `front + i*stride`, zeros everywhere else."""
    shape = const_shape(data)
    rank = len(shape) - 2
    if all(s == 1 for s in strides) and all(f == 0 for f in front) and \
            all(e <= sz for e, sz in zip(extent, shape[2:])):
        return data
    zero = te.const(0, data.dtype)

    def body(*idx):
        n, c, sp = idx[0], idx[1], idx[2:]
        shifted = [sp[i] - front[i] for i in range(rank)]
        conds, src = [], []
        for i in range(rank):
            conds += [shifted[i] >= 0, shifted[i] < (shape[2 + i] - 1) * strides[i] + 1]
            if strides[i] > 1:
                conds.append(shifted[i] % strides[i] == 0)
                src.append(shifted[i] // strides[i])
            else:
                src.append(shifted[i])
        return te.if_then_else(te.all(*conds), data[(n, c, *src)], zero)

    return te.compute((shape[0], shape[1], *extent), body, name="pad")


def conv_transpose_reference(data: np.ndarray, weight: np.ndarray, strides, padding, output_padding,
                             dilations, groups: int) -> np.ndarray:
    """Scatter form: every kernel offset adds one strided slab of the output."""
    rank = data.ndim - 2
    n, c = data.shape[:2]
    kernel = weight.shape[2:]
    mg = weight.shape[1]
    out_shape = transpose_out_shape("conv_transpose", data.shape, weight.shape, strides, padding,
                                    output_padding, dilations, groups)
    acc = np.float32 if data.dtype.name in ("float16", "bfloat16") else data.dtype
    # buffer coordinate = full coordinate + shift, covering [min(0, pad_begin), max(full, out + pad_begin))
    shift = [max(0, -padding[i]) for i in range(rank)]
    full = [strides[i] * (data.shape[2 + i] - 1) + effective_kernel(kernel[i], dilations[i]) for i in range(rank)]
    size = [shift[i] + max(full[i], out_shape[2 + i] + padding[i]) for i in range(rank)]
    buf = np.zeros((n, groups, mg, *size), dtype=acc)
    x = data.astype(acc).reshape(n, groups, c // groups, *data.shape[2:])
    w = weight.astype(acc).reshape(groups, c // groups, mg, *kernel)
    for k in itertools.product(*[range(kk) for kk in kernel]):
        contrib = np.einsum("ngc...,gcm->ngm...", x, w[(Ellipsis, *k)])
        where = tuple(slice(shift[i] + k[i] * dilations[i],
                            shift[i] + k[i] * dilations[i] + strides[i] * (data.shape[2 + i] - 1) + 1,
                            strides[i]) for i in range(rank))
        buf[(slice(None), slice(None), slice(None), *where)] += contrib
    crop = tuple(slice(shift[i] + padding[i], shift[i] + padding[i] + out_shape[2 + i]) for i in range(rank))
    out = buf[(slice(None), slice(None), slice(None), *crop)]
    return out.reshape(out_shape).astype(data.dtype)


for _rank in RANKS:
    _make(_rank)
