"""Convolution: conv1d / conv2d / conv3d, one record per rank, NC+spatial layout.

    out[n, m, *o] = sum_{c, *k} pad(data)[n, g*Cg + c, *(o*stride + k*dilation)] * weight[m, c, *k]

with `g = m // (M / groups)` the group of output channel m and `Cg = C / groups` (groups == C is
a depthwise convolution).  Inputs: data (N, C, *spatial), weight (M, C / groups, *kernel).
Attributes: strides, padding (begin_1.., end_1..), dilations (one int per spatial axis each;
None means 1 / 0 / 1) and groups.  The bias is not part of the op: the ONNX converter adds it
with a separate broadcast node, so that fusion folds it into the convolution's epilogue.

The TE compute has a stage "pad" (zero padding, skipped when there is none) and the main stage
named and tagged with the op name ("conv2d"), the one a schedule template looks for.  Pattern:
complex-out-fusable.  Accumulation happens in the data dtype, except that float16 and bfloat16
products are summed in float32 and rounded once (a stage "<name>_cast"), as the reference does
and as ONNX's reference computes them.
"""
from __future__ import annotations

import itertools

import numpy as np

from .. import te
from .common import const_shape
from .layout_rules import conv_to_depthwise
from .nn_window import check_layout, np_pad, out_spatial, pad_stage, padded_extent, spatial_attrs, window_slices
from .registry import COMPLEX, OpDef, OpError, TensorType, register

RANKS = (1, 2, 3)


def conv_attrs(op: str, rank: int, data: tuple, weight: tuple, strides, padding, dilations, groups: int) -> tuple:
    """Checked (strides, padding, dilations, groups) for data and weight with `rank` spatial axes."""
    check_layout(op, data, rank)
    check_layout(op, weight, rank, "weight")
    strides, padding, dilations = spatial_attrs(op, rank, strides, padding, dilations)
    groups = int(groups)
    if groups < 1 or data[1] % groups or weight[0] % groups:
        raise OpError(f"{op}: groups={groups} must divide the input channels {data[1]} and the "
                      f"output channels {weight[0]}")
    if weight[1] * groups != data[1]:
        raise OpError(f"{op}: weight {tuple(weight)} expects {weight[1] * groups} input channels "
                      f"with groups={groups}, data {tuple(data)} has {data[1]}")
    if any(p < 0 for p in padding):
        raise OpError(f"{op}: padding must not be negative, got {padding}")
    return strides, padding, dilations, groups


def conv_out_shape(op: str, data: tuple, weight: tuple, strides, padding, dilations) -> tuple:
    spatial = out_spatial(op, data[2:], weight[2:], strides, padding, dilations)
    return (data[0], weight[0], *spatial)


def _make(rank: int) -> OpDef:
    name = f"conv{rank}d"

    def infer(data: TensorType, weight: TensorType, strides=None, padding=None, dilations=None,
              groups: int = 1) -> TensorType:
        if data is None or weight is None:
            raise OpError(f"{name}: needs data and weight")
        if weight.dtype != data.dtype:
            raise OpError(f"{name}: weight dtype {weight.dtype} differs from data dtype {data.dtype}")
        s, p, d, _ = conv_attrs(name, rank, tuple(data.shape), tuple(weight.shape), strides, padding, dilations, groups)
        return TensorType(conv_out_shape(name, tuple(data.shape), tuple(weight.shape), s, p, d), data.dtype)

    def compute(data: te.Tensor, weight: te.Tensor, strides=None, padding=None, dilations=None,
                groups: int = 1) -> te.Tensor:
        dshape, wshape = const_shape(data), const_shape(weight)
        s, p, d, g = conv_attrs(name, rank, dshape, wshape, strides, padding, dilations, groups)
        out_shape = conv_out_shape(name, dshape, wshape, s, p, d)
        extent = padded_extent(dshape[2:], out_shape[2:], wshape[2:], s, d)
        padded = pad_stage(data, p[:rank], extent, 0)
        cin_g, cout_g = wshape[1], wshape[0] // g
        rc = te.reduce_axis((0, cin_g), name="rc")
        letters = "zyx"[3 - rank:]
        rk = [te.reduce_axis((0, wshape[2 + i]), name=f"r{letters[i]}") for i in range(rank)]
        acc = te_accum_dtype(data.dtype)

        def body(*idx):
            n, m, o = idx[0], idx[1], idx[2:]
            chan = rc if g == 1 else (m // cout_g) * cin_g + rc
            src = [o[i] * s[i] + rk[i] * d[i] for i in range(rank)]
            return te.sum(padded[(n, chan, *src)].astype(acc) * weight[(m, rc, *rk)].astype(acc), axis=[rc, *rk])

        out = te.compute(out_shape, body, name=name, tag=name,
                         attrs={"strides": s, "padding": p, "dilations": d, "groups": g})
        return cast_back(out, data.dtype)

    def reference(data: np.ndarray, weight: np.ndarray, strides=None, padding=None, dilations=None,
                  groups: int = 1) -> np.ndarray:
        s, p, d, g = conv_attrs(name, rank, data.shape, weight.shape, strides, padding, dilations, groups)
        return conv_reference(data, weight, s, p, d, g)

    return register(OpDef(name, COMPLEX, infer, reference, compute,
                          schedule={"gpu": "conv2d.gpu"} if rank == 2 else {}, attr_defaults={"groups": 1},
                          alter_layout=conv_to_depthwise if rank == 2 else None))


def _accum_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float32) if dtype.name in ("float16", "bfloat16") else dtype


def te_accum_dtype(dtype: str) -> str:
    """The dtype a convolution sums its products in: float32 for the half types, else its own."""
    return "float32" if dtype in ("float16", "bfloat16") else dtype


def cast_back(out: te.Tensor, dtype: str) -> te.Tensor:
    """`out` rounded to `dtype` in a stage "<name>_cast" (nothing when it has that dtype already)."""
    if out.dtype == dtype:
        return out
    return te.compute(const_shape(out), lambda *i: out[i].astype(dtype), name=f"{out.op.name}_cast")


def conv_reference(data: np.ndarray, weight: np.ndarray, strides: tuple, padding: tuple, dilations: tuple,
                   groups: int) -> np.ndarray:
    """Grouped convolution in NumPy: one batched contraction per kernel offset."""
    rank = data.ndim - 2
    n, c = data.shape[:2]
    m = weight.shape[0]
    out_sp = out_spatial("conv", data.shape[2:], weight.shape[2:], strides, padding, dilations)
    acc = _accum_dtype(data.dtype)
    extent = padded_extent(data.shape[2:], out_sp, weight.shape[2:], strides, dilations)
    xp = np_pad(data.astype(acc), padding[:rank], extent, 0)
    w = weight.astype(acc).reshape(groups, m // groups, c // groups, *weight.shape[2:])
    out = np.zeros((n, groups, m // groups, *out_sp), dtype=acc)
    for k in itertools.product(*[range(kk) for kk in weight.shape[2:]]):
        window = xp[window_slices(k, out_sp, strides, dilations)]
        window = window.reshape(n, groups, c // groups, *out_sp)
        out += np.einsum("ngc...,gmc->ngm...", window, w[(Ellipsis, *k)])
    return out.reshape(n, m, *out_sp).astype(data.dtype)


for _rank in RANKS:
    _make(_rank)
