"""softmax, log_softmax and hardmax over a set of axes (attribute `axes`, a tuple; default the last).

ONNX opset >= 13 normalizes along one axis (`axes=(axis,)`); older opsets flatten the input to 2-D
at `axis` and normalize each row, which is the same as normalizing over `axes=(axis, .., rank-1)`.

TE stages (each reduction stage keeps the input's rank, with size 1 on the reduced axes):
  softmax:      "softmax_max" -> "softmax_exp" -> "softmax_sum" -> output "softmax"
  log_softmax:  "log_softmax_max" -> "log_softmax_sum" (of exp(x - max)) -> output
  hardmax:      "hardmax_argmax" (a tuple reduction keeping the first maximum) -> one-hot output
The output stage is tagged with the op name.  softmax / log_softmax are complex-out-fusable
(elementwise consumers can fuse onto their output, as in TVM); hardmax is opaque.

Rounding.  ONNX defines Softmax-13 and LogSoftmax-13 as function bodies of nodes in the input's
type (ReduceMax, Sub, Exp, ReduceSum, Div; LogSoftmax: ..., Log, Sub), and every node's result is
a tensor of that type.  The stages follow the body node by node, so in float16 and bfloat16 each
step's value is rounded to the dtype (the loop IR rounds every half-precision operation) and the
sum accumulates as ReduceSum does (`reduce.accum_dtype`: float16 in float32, rounded once;
bfloat16 in bfloat16).  This is what the ONNX reference evaluator computes for float16 Softmax
and for both expanded bodies, bit for bit along the innermost axis (NumPy sums float16 along
other axes one rounded addition at a time, so there the sum may differ by an ulp).  The
reference's non-expanded LogSoftmax takes the log of the rounded softmax instead, which gives
-inf where a probability underflows.  ONNX Runtime's CPU kernels compute 16-bit softmax in
float32 and round once, so they can differ from the definition by a few ulps.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .. import te
from .common import const_shape, normalize_axis, shape_of
from .layout_rules import log_softmax_to_rows, softmax_to_rows
from .reduce import accum_dtype
from .registry import COMPLEX, OPAQUE, OpError, TensorType, op


def norm_axes(name: str, axes: Sequence[int] | int | None, ndim: int) -> tuple:
    """Sorted, non-negative, distinct axes; None means the last axis."""
    if axes is None:
        axes = (-1,)
    if isinstance(axes, int):
        axes = (axes,)
    out = tuple(sorted({normalize_axis(int(a), ndim, name) for a in axes}))
    if len(out) != len(axes):
        raise OpError(f"{name}: repeated axes in {tuple(axes)}")
    if ndim == 0:
        raise OpError(f"{name}: the input must have rank >= 1")
    return out


def _check_float(name: str, x: TensorType) -> None:
    if not (x.dtype.startswith("float") or x.dtype == "bfloat16"):
        raise OpError(f"{name}: the input must be a float tensor, got {x.dtype}")


def _reduce_stage(x: te.Tensor, axes: tuple, reducer, value, name: str) -> te.Tensor:
    """`reducer(value(index), axis=...)` over `axes`, kept as size-1 axes."""
    shape = shape_of(x)
    red = {a: te.reduce_axis((0, shape[a]), name=f"r{a}") for a in axes}
    kept = tuple(1 if a in red else d for a, d in enumerate(shape))

    def body(*i):
        idx = tuple(red[a] if a in red else i[a] for a in range(len(shape)))
        return reducer(value(idx), axis=list(red.values()))

    return te.compute(kept, body, name=name)


def _at(stage: te.Tensor, i: tuple, axes: tuple):
    """stage (a reduced, keep-dims tensor) read at output index i."""
    return stage[tuple(0 if a in axes else v for a, v in enumerate(i))]


def _np_max(x: np.ndarray, axes: tuple) -> np.ndarray:
    return np.max(x, axis=axes, keepdims=True)


def _np_sum(x: np.ndarray, axes: tuple) -> np.ndarray:
    """ReduceSum's value (keep-dims) in x's dtype: accumulated in `accum_dtype`, rounded once."""
    acc = np.dtype(accum_dtype(x.dtype.name))
    return np.sum(x.astype(acc), axis=axes, keepdims=True).astype(x.dtype)


def _infer(name: str):
    def infer(x: TensorType, axes=None) -> TensorType:
        _check_float(name, x)
        norm_axes(name, axes, len(x.shape))
        return TensorType(tuple(x.shape), x.dtype)
    return staticmethod(infer)


@op("softmax", COMPLEX, attr_defaults={"axes": (-1,)})
class softmax:
    infer = _infer("softmax")
    alter_layout = staticmethod(softmax_to_rows)

    @staticmethod
    def compute(x: te.Tensor, axes=(-1,)) -> te.Tensor:
        axes = norm_axes("softmax", axes, len(x.shape))
        acc = accum_dtype(x.dtype)
        mx = _reduce_stage(x, axes, te.max, lambda i: x[i], "softmax_max")
        e = te.compute(shape_of(x), lambda *i: te.exp(x[i] - _at(mx, i, axes)), name="softmax_exp")
        total = _reduce_stage(e, axes, te.sum, lambda i: e[i].astype(acc), "softmax_sum")
        return te.compute(shape_of(x), lambda *i: e[i] / _at(total, i, axes).astype(x.dtype),
                          name="softmax", tag="softmax")

    @staticmethod
    def reference(x: np.ndarray, axes=(-1,)) -> np.ndarray:
        axes = norm_axes("softmax", axes, x.ndim)
        e = np.exp(x - _np_max(x, axes))
        return (e / _np_sum(e, axes)).astype(x.dtype)


@op("log_softmax", COMPLEX, attr_defaults={"axes": (-1,)})
class log_softmax:
    infer = _infer("log_softmax")
    alter_layout = staticmethod(log_softmax_to_rows)

    @staticmethod
    def compute(x: te.Tensor, axes=(-1,)) -> te.Tensor:
        axes = norm_axes("log_softmax", axes, len(x.shape))
        acc = accum_dtype(x.dtype)
        mx = _reduce_stage(x, axes, te.max, lambda i: x[i], "log_softmax_max")
        total = _reduce_stage(x, axes, te.sum, lambda i: te.exp(x[i] - _at(mx, i, axes)).astype(acc),
                              "log_softmax_sum")
        return te.compute(shape_of(x),
                          lambda *i: x[i] - _at(mx, i, axes) - te.log(_at(total, i, axes).astype(x.dtype)),
                          name="log_softmax", tag="log_softmax")

    @staticmethod
    def reference(x: np.ndarray, axes=(-1,)) -> np.ndarray:
        axes = norm_axes("log_softmax", axes, x.ndim)
        shifted = x - _np_max(x, axes)
        return (shifted - np.log(_np_sum(np.exp(shifted), axes))).astype(x.dtype)


def _argmax_reducer():
    """(index, value) pairs: keep the larger value, and on ties the smaller (first) index."""
    def combine(a, b):
        take_b = te.any(b[1] > a[1], te.all(b[1] == a[1], b[0] < a[0]))
        return te.if_then_else(take_b, b[0], a[0]), te.if_then_else(take_b, b[1], a[1])

    def identity(index_dtype, value_dtype):
        return te.max_value(index_dtype), te.min_value(value_dtype)

    return te.comm_reducer(combine, identity, name="argmax")


_argmax = _argmax_reducer()


def _flat_index(idx: tuple, axes: tuple, shape: tuple):
    """Row-major position of idx within the sub-block spanned by `axes`."""
    flat = None
    for a in axes:
        term = idx[a] if not isinstance(idx[a], te.IterVar) else idx[a].var
        flat = term if flat is None else flat * shape[a] + term
    return flat


@op("hardmax", OPAQUE, attr_defaults={"axes": (-1,)})
class hardmax:
    infer = _infer("hardmax")

    @staticmethod
    def compute(x: te.Tensor, axes=(-1,)) -> te.Tensor:
        shape = const_shape(x)
        axes = norm_axes("hardmax", axes, len(shape))
        red = {a: te.reduce_axis((0, shape[a]), name=f"r{a}") for a in axes}
        kept = tuple(1 if a in red else d for a, d in enumerate(shape))

        def argmax_body(*i):
            idx = tuple(red[a] if a in red else i[a] for a in range(len(shape)))
            pos = _flat_index(idx, axes, shape)
            return _argmax((te.cast(pos, "int32"), x[idx]), axis=list(red.values()))

        best, _ = te.compute(kept, argmax_body, name="hardmax_argmax")
        one, zero = te.const(1, x.dtype), te.const(0, x.dtype)
        return te.compute(shape, lambda *i: te.if_then_else(_flat_index(i, axes, shape) == _at(best, i, axes),
                                                            one, zero), name="hardmax", tag="hardmax")

    @staticmethod
    def reference(x: np.ndarray, axes=(-1,)) -> np.ndarray:
        axes = norm_axes("hardmax", axes, x.ndim)
        rest = [a for a in range(x.ndim) if a not in axes]
        moved = np.transpose(x, rest + list(axes))
        rows = moved.reshape(-1, int(np.prod([x.shape[a] for a in axes])))
        onehot = np.zeros_like(rows)
        if rows.size:
            onehot[np.arange(rows.shape[0]), np.argmax(rows, axis=1)] = 1
        back = onehot.reshape(moved.shape)
        return np.transpose(back, np.argsort(rest + list(axes))).astype(x.dtype)
