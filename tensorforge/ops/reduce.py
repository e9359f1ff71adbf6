"""Reductions over axes: reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod, reduce_l1,
reduce_l2, reduce_log_sum, reduce_sum_square (one table, one factory) and reduce_log_sum_exp.

Each is  post(reduce(pre(x) over axes))  with pre in {x, |x|, x*x}, reduce in {sum, max, min,
prod} and post in {x, mean, sqrt, log}.  Attributes: `axes` (None: every axis; (): no axis, so
only pre and post apply, as ONNX's noop_with_empty_axes does), `keepdims`.  Integers reduce in
their own dtype (wrapping, as ONNX Runtime); float16 accumulates in float32.  An empty reduction
gives the reducer's identity (0, 1, -inf, +inf, iinfo limits).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .. import te
from ..ir import dtype as dt
from .common import const_shape, element_count, shape_of
from .index_math import normalize_axes
from .registry import REDUCTION, OpDef, OpError, TensorType, register

_DEFAULTS = {"axes": None, "keepdims": 1}


# -- shapes and indices shared with reduce_arg and reduce_scan --------------------------------
def reduced_axes(ndim: int, axes: Sequence[int] | None, op: str) -> tuple:
    if axes is None:
        return tuple(range(ndim))
    return tuple(sorted(normalize_axes(axes, ndim, op)))


def reduce_shape(shape: Sequence[int], axes: tuple, keepdims: int) -> tuple:
    return tuple(1 if k in axes else d for k, d in enumerate(shape) if keepdims or k not in axes)


def reduce_index(out_index: Sequence, axes: tuple, rvars: Sequence, ndim: int, keepdims: int) -> tuple:
    """The input index read at output `out_index` and reduce variables `rvars` (one per axis)."""
    it_out, it_r = iter(out_index), iter(rvars)
    index = []
    for k in range(ndim):
        if k in axes:
            if keepdims:
                next(it_out)
            index.append(next(it_r))
        else:
            index.append(next(it_out))
    return tuple(index)


def accum_dtype(dtype: str) -> str:
    return "float32" if dtype == "float16" else dtype


# -- the table ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Reduction:
    name: str
    reducer: str        # sum | max | min | prod
    pre: str = "id"     # id | abs | square
    post: str = "id"    # id | mean | sqrt | log
    floats_only: bool = False
    allow_bool: bool = False

    def acc_dtype(self, dtype: str) -> str:
        if dtype == "bool":
            return "uint8"
        if self.post == "sqrt" and not dt.is_float(dtype):
            return "uint64" if dt.is_uint(dtype) else "int64"
        return accum_dtype(dtype)


REDUCTIONS = (
    Reduction("reduce_sum", "sum"),
    Reduction("reduce_mean", "sum", post="mean"),
    Reduction("reduce_max", "max", allow_bool=True),
    Reduction("reduce_min", "min", allow_bool=True),
    Reduction("reduce_prod", "prod"),
    Reduction("reduce_l1", "sum", pre="abs"),
    Reduction("reduce_l2", "sum", pre="square", post="sqrt"),
    Reduction("reduce_log_sum", "sum", post="log", floats_only=True),
    Reduction("reduce_sum_square", "sum", pre="square"),
)
_TE_REDUCERS = {"sum": te.sum, "max": te.max, "min": te.min, "prod": te.prod}
_NP_REDUCERS = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod}


def _te_pre(r: Reduction, v, acc: str):
    """pre(v) in the accumulator type; integers apply pre in their own type first (as NumPy)."""
    if dt.is_float(acc):
        v = v.astype(acc)
    if r.pre == "abs":
        v = te.abs(v)
    elif r.pre == "square":
        v = v * v
    return v.astype(acc)


def _te_post(r: Reduction, acc, count, dtype: str):
    """`count`: the elements each output reduced, an int or a shape expression."""
    if r.post == "mean" and not isinstance(count, int):
        if dt.is_float(dtype):
            return (acc / count.astype(acc.dtype)).astype(dtype)
        divisor = te.max(count, te.const(1, count.dtype)).astype(acc.dtype)     # an empty sum is 0
        if dt.is_uint(dtype):
            return (acc // divisor).astype(dtype)
        return te.if_then_else(acc < 0, -((-acc) // divisor), acc // divisor).astype(dtype)
    if r.post == "mean":
        if dt.is_float(dtype):
            return (acc / te.const(float(count), acc.dtype)).astype(dtype)
        if count == 0:
            return te.const(0, dtype)
        if dt.is_uint(dtype):
            return (acc // count).astype(dtype)
        return te.if_then_else(acc < 0, -((-acc) // count), acc // count).astype(dtype)
    if r.post in ("sqrt", "log"):
        fdtype = acc.dtype if dt.is_float(acc.dtype) else "float64"
        fn = te.sqrt if r.post == "sqrt" else te.log
        return fn(acc.astype(fdtype)).astype(dtype)
    return acc.astype(dtype)


def _np_run(r: Reduction, x: np.ndarray, axes: tuple, keepdims: int) -> np.ndarray:
    dtype, acc = x.dtype.name, r.acc_dtype(x.dtype.name)
    v = x.astype(acc) if dt.is_float(acc) else x
    v = np.abs(v) if r.pre == "abs" else v * v if r.pre == "square" else v
    v = v.astype(acc)
    if r.reducer in ("max", "min") and 0 in [x.shape[a] for a in axes]:
        ident = (te.min_value if r.reducer == "max" else te.max_value)(acc).value
        out = np.full(reduce_shape(x.shape, axes, 1), ident, dtype=acc)
    else:
        kwargs = {"dtype": acc} if r.reducer in ("sum", "prod") else {}
        out = _NP_REDUCERS[r.reducer](v, axis=axes, keepdims=True, **kwargs)
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    with np.errstate(all="ignore"):
        if r.post == "mean":
            out = out / np.asarray(count, acc) if dt.is_float(dtype) else \
                (np.trunc(out.astype(np.float64) / count) if count else np.zeros_like(out))
        elif r.post in ("sqrt", "log"):
            fn = np.sqrt if r.post == "sqrt" else np.log
            out = fn(out if dt.is_float(acc) else out.astype(np.float64))
    out = np.asarray(out).astype(dtype)
    return out if keepdims else out.reshape(reduce_shape(x.shape, axes, 0))


def check_input(name: str, x: TensorType, floats_only: bool = False, allow_bool: bool = False) -> None:
    if x.dtype == "bool" and not allow_bool:
        raise OpError(f"{name}: bool input is not supported")
    if floats_only and not dt.is_float(x.dtype):
        raise OpError(f"{name}: input must be a float tensor (the op uses log/exp), got {x.dtype}")


def _make(r: Reduction) -> OpDef:
    def infer(x: TensorType, axes: Sequence[int] | None = None, keepdims: int = 1) -> TensorType:
        check_input(r.name, x, r.floats_only, r.allow_bool)
        return TensorType(reduce_shape(x.shape, reduced_axes(len(x.shape), axes, r.name), keepdims), x.dtype)

    def compute(x: te.Tensor, axes: Sequence[int] | None = None, keepdims: int = 1) -> te.Tensor:
        shape = shape_of(x)      # shape expressions where it varies (shape_generic.py)
        axes = reduced_axes(len(shape), axes, r.name)
        acc, count = r.acc_dtype(x.dtype), element_count([shape[a] for a in axes])
        if not isinstance(count, int) and acc == "float32" and r.reducer in ("sum", "prod"):
            # a reduction of any length (shape_generic.py) adds in float64: its length is not
            # known to be short, and a float32 sum of 2^20 values one by one drifted by 1.4e-4
            acc = "float64"
        rvars = [te.reduce_axis((0, shape[a]), name=f"r{a}") for a in axes]

        def f(*o):
            value = _te_pre(r, x[reduce_index(o, axes, rvars, len(shape), keepdims)], acc)
            if rvars:
                value = _TE_REDUCERS[r.reducer](value, axis=rvars)
            return value

        out_shape = reduce_shape(shape, axes, keepdims)
        if r.post == "id" and acc == x.dtype:
            return te.compute(out_shape, f, name=r.name, tag=r.name)
        red = te.compute(out_shape, f, name=f"{r.name}_acc")
        return te.compute(out_shape, lambda *o: _te_post(r, red[o], count, x.dtype), name=r.name, tag=r.name)

    def reference(x: np.ndarray, axes: Sequence[int] | None = None, keepdims: int = 1) -> np.ndarray:
        return _np_run(r, x, reduced_axes(x.ndim, axes, r.name), keepdims)

    return OpDef(r.name, REDUCTION, infer, reference, compute, attr_defaults=dict(_DEFAULTS))


for _r in REDUCTIONS:
    register(_make(_r))


# -- log-sum-exp: a max stage keeps exp from overflowing --------------------------------------
def _lse_infer(x: TensorType, axes: Sequence[int] | None = None, keepdims: int = 1) -> TensorType:
    check_input("reduce_log_sum_exp", x, floats_only=True)
    return TensorType(reduce_shape(x.shape, reduced_axes(len(x.shape), axes, "reduce_log_sum_exp"), keepdims), x.dtype)


def _lse_compute(x: te.Tensor, axes: Sequence[int] | None = None, keepdims: int = 1) -> te.Tensor:
    """log(sum(exp(x))) = m + log(sum(exp(x - m))) with m the largest finite element (0 if none)."""
    shape = const_shape(x)
    axes = reduced_axes(len(shape), axes, "reduce_log_sum_exp")
    acc = accum_dtype(x.dtype)
    out_shape = reduce_shape(shape, axes, 1)
    ninf = te.min_value(acc)

    def load(o, rvars):
        return x[reduce_index(o, axes, rvars, len(shape), 1)].astype(acc)

    def peak(*o):
        rvars = [te.reduce_axis((0, shape[a]), name=f"m{a}") for a in axes]
        v = load(o, rvars)
        v = te.if_then_else(te.isinf(v), ninf, v)
        return te.max(v, axis=rvars) if rvars else v

    m = te.compute(out_shape, peak, name="reduce_log_sum_exp_max")

    def shift(o):
        return te.if_then_else(m[o] == ninf, te.const(0.0, acc), m[o])

    def total(*o):
        rvars = [te.reduce_axis((0, shape[a]), name=f"r{a}") for a in axes]
        v = te.exp(load(o, rvars) - shift(o))
        return te.sum(v, axis=rvars) if rvars else v

    s = te.compute(out_shape, total, name="reduce_log_sum_exp_sum")
    final_shape = reduce_shape(shape, axes, keepdims)

    def f(*o):
        full = tuple(te.const(0, "int32") if k in axes else None for k in range(len(shape)))
        if not keepdims:
            it = iter(o)
            full = tuple(z if z is not None else next(it) for z in full)
        else:
            full = o
        return (te.log(s[full]) + shift(full)).astype(x.dtype)

    return te.compute(final_shape, f, name="reduce_log_sum_exp", tag="reduce_log_sum_exp")


def _lse_reference(x: np.ndarray, axes: Sequence[int] | None = None, keepdims: int = 1) -> np.ndarray:
    axes = reduced_axes(x.ndim, axes, "reduce_log_sum_exp")
    acc = accum_dtype(x.dtype.name)
    v = x.astype(acc)
    finite = np.where(np.isinf(v), -np.inf, v)
    m = np.max(finite, axis=axes, keepdims=True, initial=-np.inf)
    m = np.where(np.isneginf(m), 0, m).astype(acc)
    with np.errstate(all="ignore"):
        out = np.log(np.sum(np.exp(v - m), axis=axes, keepdims=True, dtype=acc)) + m
    out = out.astype(x.dtype)
    return out if keepdims else out.reshape(reduce_shape(x.shape, axes, 0))


register(OpDef("reduce_log_sum_exp", REDUCTION, _lse_infer, _lse_reference, _lse_compute,
               attr_defaults=dict(_DEFAULTS)))
