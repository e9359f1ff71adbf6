"""Pooling, NC+spatial layout: max_pool{1,2,3}d, avg_pool{1,2,3}d, lp_pool{1,2,3}d over sliding
windows, and global_max_pool, global_avg_pool, global_lp_pool over all spatial axes (any number;
the output keeps the rank: (N, C, 1, .., 1), as ONNX's GlobalAveragePool does).

Attributes: kernel (one int per spatial axis), strides, padding (begin_1.., end_1..), dilations,
ceil_mode (keep a last partial window, ONNX's rule), and count_include_pad (avg) / p (lp).

    max_pool: max over the window of the input, padding never wins (it is the dtype's minimum)
    avg_pool: sum over the window / count, where count covers the input cells of the window, or
              with count_include_pad the cells inside input + explicit padding (never the cells
              that only ceil_mode adds)
    lp_pool:  (sum over the input cells of the window of |x|^p) ^ (1/p)

TE: stage "pad" (the padded input, reaching as far as the last window does), a window reduction
("<op>_sum" for avg/lp; for max it is the output itself), and for avg/lp an elementwise output
stage; the output stage is named and tagged with the op name.  The global pools are one
reduction over the spatial axes (plus the output stage for avg / lp).  Pattern:
complex-out-fusable (as TVM registers its pools).
"""
from __future__ import annotations

import itertools

import numpy as np

from .. import te
from .common import const_shape
from .layout_rules import avg_pool_to_rows, max_pool_to_rows
from .nn_window import check_layout, np_pad, out_spatial, pad_stage, padded_extent, spatial_attrs, window_slices
from .registry import COMPLEX, OpDef, OpError, TensorType, register

RANKS = (1, 2, 3)
KINDS = ("max", "avg", "lp")


def pool_attrs(op: str, rank: int, shape: tuple, kernel, strides, padding, dilations) -> tuple:
    """Checked (kernel, strides, padding, dilations) for data of `shape` with `rank` spatial axes."""
    check_layout(op, shape, rank)
    kernel = tuple(int(k) for k in kernel) if kernel is not None else ()
    if len(kernel) != rank or any(k < 1 for k in kernel):
        raise OpError(f"{op}: kernel must be {rank} positive integers, got {kernel}")
    strides, padding, dilations = spatial_attrs(op, rank, strides, padding, dilations)
    if any(p < 0 for p in padding):
        raise OpError(f"{op}: padding must not be negative, got {padding}")
    return kernel, strides, padding, dilations


def _check_p(op: str, p) -> float:
    p = float(p)
    if p <= 0:
        raise OpError(f"{op}: p must be positive, got {p}")
    return p


def lp_power(v, p: float):
    """|v| ** p, with multiplications for p = 1 and 2."""
    a = te.abs(v)
    return a if p == 1 else a * a if p == 2 else te.pow(a, te.const(p, v.dtype))


def lp_root(v, p: float):
    """v ** (1 / p), with sqrt for p = 2."""
    return v if p == 1 else te.sqrt(v) if p == 2 else te.pow(v, te.const(1.0 / p, v.dtype))


def window_count(o, lo: int, hi: int, kernel: int, stride: int, dilation: int, pad_begin: int):
    """Number of k in [0, kernel) whose padded position o*stride + k*dilation - pad_begin lies in
    [lo, hi) (an index expression)."""
    start = o * stride - pad_begin
    first = te.max((lo - start + dilation - 1) // dilation, 0)
    last = te.min((hi - 1 - start) // dilation, kernel - 1)
    return te.max(last - first + 1, 0)


def _make(kind: str, rank: int) -> OpDef:
    name = f"{kind}_pool{rank}d"

    def infer(x: TensorType, kernel=None, strides=None, padding=None, dilations=None, ceil_mode: bool = False,
              count_include_pad: bool = False, p: float = 2) -> TensorType:
        if kind != "max" and not x.dtype.startswith("float"):
            raise OpError(f"{name}: the input must be a float tensor, got {x.dtype}")
        if kind == "lp":
            _check_p(name, p)
        k, s, pad, d = pool_attrs(name, rank, tuple(x.shape), kernel, strides, padding, dilations)
        out = out_spatial(name, tuple(x.shape[2:]), k, s, pad, d, bool(ceil_mode))
        return TensorType((x.shape[0], x.shape[1], *out), x.dtype)

    def compute(x: te.Tensor, kernel=None, strides=None, padding=None, dilations=None, ceil_mode: bool = False,
                count_include_pad: bool = False, p: float = 2) -> te.Tensor:
        shape = const_shape(x)
        k, s, pad, d = pool_attrs(name, rank, shape, kernel, strides, padding, dilations)
        out_sp = out_spatial(name, shape[2:], k, s, pad, d, bool(ceil_mode))
        out_shape = (shape[0], shape[1], *out_sp)
        fill = te.min_value(x.dtype) if kind == "max" else te.const(0, x.dtype)
        padded = pad_stage(x, pad[:rank], padded_extent(shape[2:], out_sp, k, s, d), fill)
        letters = "zyx"[3 - rank:]
        rk = [te.reduce_axis((0, k[i]), name=f"r{letters[i]}") for i in range(rank)]
        attrs = {"kernel": k, "strides": s, "padding": pad, "dilations": d, "ceil_mode": bool(ceil_mode)}

        def window(idx):
            n, c, o = idx[0], idx[1], idx[2:]
            return padded[(n, c, *[o[i] * s[i] + rk[i] * d[i] for i in range(rank)])]

        if kind == "max":
            return te.compute(out_shape, lambda *i: te.max(window(i), axis=rk), name=name, tag=name, attrs=attrs)
        if kind == "avg":
            total = te.compute(out_shape, lambda *i: te.sum(window(i), axis=rk), name=f"{name}_sum")

            def average(*i):
                count = None
                for a in range(rank):
                    lo, hi = (-pad[a], shape[2 + a] + pad[rank + a]) if count_include_pad else (0, shape[2 + a])
                    term = window_count(i[2 + a], lo, hi, k[a], s[a], d[a], pad[a])
                    count = term if count is None else count * term
                return total[i] / count.astype(x.dtype)

            return te.compute(out_shape, average, name=name, tag=name, attrs=attrs)
        pv = _check_p(name, p)

        total = te.compute(out_shape, lambda *i: te.sum(lp_power(window(i), pv), axis=rk), name=f"{name}_sum")
        return te.compute(out_shape, lambda *i: lp_root(total[i], pv), name=name, tag=name, attrs=attrs)

    def reference(x: np.ndarray, kernel=None, strides=None, padding=None, dilations=None, ceil_mode: bool = False,
                  count_include_pad: bool = False, p: float = 2) -> np.ndarray:
        k, s, pad, d = pool_attrs(name, rank, x.shape, kernel, strides, padding, dilations)
        return pool_reference(kind, x, k, s, pad, d, bool(ceil_mode), bool(count_include_pad), float(p))

    defaults = {"ceil_mode": False, **({"count_include_pad": False} if kind == "avg" else {}),
                **({"p": 2} if kind == "lp" else {})}
    return register(OpDef(name, COMPLEX, infer, reference, compute, attr_defaults=defaults,
                          alter_layout={("max", 2): max_pool_to_rows, ("avg", 2): avg_pool_to_rows}.get((kind, rank))))


def pool_reference(kind: str, x: np.ndarray, kernel, strides, padding, dilations, ceil_mode: bool,
                   count_include_pad: bool, p: float) -> np.ndarray:
    """Pooling in NumPy: every kernel offset contributes one strided slice of the padded input."""
    rank = x.ndim - 2
    out_sp = out_spatial("pool", x.shape[2:], kernel, strides, padding, dilations, ceil_mode)
    extent = padded_extent(x.shape[2:], out_sp, kernel, strides, dilations)
    acc = np.float64 if kind != "max" else x.dtype
    fill = (np.iinfo(x.dtype).min if x.dtype.kind in "iu" else -np.inf) if kind == "max" else 0
    xp = np_pad(x.astype(acc), padding[:rank], extent, fill)
    # 1 inside the counted region, 0 elsewhere: the divisor of avg_pool
    region = np.zeros((1, 1, *extent))
    lo = [0 if count_include_pad else padding[i] for i in range(rank)]
    hi = [padding[i] + x.shape[2 + i] + (padding[rank + i] if count_include_pad else 0) for i in range(rank)]
    region[(0, 0, *[slice(lo[i], hi[i]) for i in range(rank)])] = 1
    result, count = None, np.zeros((1, 1, *out_sp))
    for k in itertools.product(*[range(kk) for kk in kernel]):
        sl = window_slices(k, out_sp, strides, dilations)
        v = xp[sl]
        count += region[sl]
        if kind == "lp":
            v = np.abs(v) ** p
        result = v if result is None else (np.maximum(result, v) if kind == "max" else result + v)
    if kind == "avg":
        result = result / count
    elif kind == "lp":
        result = result ** (1.0 / p)
    return result.astype(x.dtype)


for _kind in KINDS:
    for _rank in RANKS:
        _make(_kind, _rank)


# -- global pooling: one window covering every spatial axis; output (N, C, 1, .., 1) ----------------
def _global_out_shape(shape: tuple) -> tuple:
    return (shape[0], shape[1]) + (1,) * (len(shape) - 2)


def _make_global(kind: str) -> OpDef:
    name = f"global_{kind}_pool"

    def infer(x: TensorType, p: float = 2) -> TensorType:
        if len(x.shape) < 3:
            raise OpError(f"{name}: x must be (N, C, D1, ...), got shape {tuple(x.shape)}")
        if kind != "max" and not x.dtype.startswith("float"):
            raise OpError(f"{name}: the input must be a float tensor, got {x.dtype}")
        if kind == "lp" and float(p) <= 0:
            raise OpError(f"{name}: p must be positive, got {p}")
        return TensorType(_global_out_shape(tuple(x.shape)), x.dtype)

    def compute(x: te.Tensor, p: float = 2) -> te.Tensor:
        shape = const_shape(x)
        out_shape = _global_out_shape(shape)
        rk = [te.reduce_axis((0, d), name=f"r{a}") for a, d in enumerate(shape[2:])]

        def load(i):
            return x[(i[0], i[1], *rk)]

        if kind == "max":
            return te.compute(out_shape, lambda *i: te.max(load(i), axis=rk), name=name, tag=name)
        pv = float(p)
        if kind == "avg":
            total = te.compute(out_shape, lambda *i: te.sum(load(i), axis=rk), name=f"{name}_sum")
            count = te.const(float(np.prod(shape[2:])), x.dtype)
            return te.compute(out_shape, lambda *i: total[i] / count, name=name, tag=name)

        total = te.compute(out_shape, lambda *i: te.sum(lp_power(load(i), pv), axis=rk), name=f"{name}_sum")
        return te.compute(out_shape, lambda *i: lp_root(total[i], pv), name=name, tag=name)

    def reference(x: np.ndarray, p: float = 2) -> np.ndarray:
        axes = tuple(range(2, x.ndim))
        if kind == "max":
            return np.max(x, axis=axes, keepdims=True)
        acc = x.astype(np.float64)
        if kind == "avg":
            return np.mean(acc, axis=axes, keepdims=True).astype(x.dtype)
        pv = float(p)
        return (np.sum(np.abs(acc) ** pv, axis=axes, keepdims=True) ** (1.0 / pv)).astype(x.dtype)

    return register(OpDef(name, COMPLEX, infer, reference, compute, attr_defaults={"p": 2} if kind == "lp" else {}))


for _kind in KINDS:
    _make_global(_kind)
