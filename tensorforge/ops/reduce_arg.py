"""argmax / argmin along one axis: a REDUCTION with a tuple reducer over (index, value) pairs.

The combiner keeps the pair with the larger (smaller) value, and on equal values the smaller
index (or the larger with `select_last_index`), so the result does not depend on the order in
which a schedule combines partial results.  The output is int64, as ONNX.
"""
from __future__ import annotations

import numpy as np

from .. import te
from ..ir import dtype as dt
from .common import normalize_axis, shape_of
from .reduce import reduce_index, reduce_shape
from .registry import REDUCTION, OpDef, OpError, TensorType, register

_DEFAULTS = {"axis": 0, "keepdims": 1, "select_last_index": 0}


def _reducer(largest: bool, last: bool):
    def fcombine(x, y):
        better = x[1] > y[1] if largest else x[1] < y[1]
        tie_wins = x[0] > y[0] if last else x[0] < y[0]
        keep = better | ((x[1] == y[1]) & tie_wins)
        return te.if_then_else(keep, x[0], y[0]), te.if_then_else(keep, x[1], y[1])

    def fidentity(t_index: str, t_value: str):
        # the identity loses every tie too: its index is the one the tie rule rejects
        worst = te.min_value(t_value) if largest else te.max_value(t_value)
        return (te.const(-1, t_index) if last else te.max_value(t_index)), worst

    return te.comm_reducer(fcombine, fidentity, name="argmax" if largest else "argmin")


def _arg_infer(name: str):
    def infer(x: TensorType, axis: int = 0, keepdims: int = 1, select_last_index: int = 0) -> TensorType:
        if not x.shape:
            raise OpError(f"{name}: input must have rank >= 1")
        a = normalize_axis(axis, len(x.shape), name)
        if x.shape[a] == 0:
            raise OpError(f"{name}: axis {a} is empty (shape {tuple(x.shape)}); there is no element to pick")
        return TensorType(reduce_shape(x.shape, (a,), keepdims), "int64")
    return infer


def _arg_compute(name: str, largest: bool):
    def compute(x: te.Tensor, axis: int = 0, keepdims: int = 1, select_last_index: int = 0) -> te.Tensor:
        shape = shape_of(x)
        a = normalize_axis(axis, len(shape), name)
        reducer = _reducer(largest, bool(select_last_index))
        vdtype = "uint8" if dt.is_bool(x.dtype) else x.dtype

        def f(*o):
            k = te.reduce_axis((0, shape[a]), name="k")
            value = x[reduce_index(o, (a,), [k], len(shape), keepdims)].astype(vdtype)
            return reducer((k.var.astype("int64"), value), axis=k)

        out_shape = reduce_shape(shape, (a,), keepdims)
        index, _value = te.compute(out_shape, f, name=f"{name}_pair")
        return te.compute(out_shape, lambda *o: index[o], name=name, tag=name)
    return compute


def _arg_reference(largest: bool):
    def reference(x: np.ndarray, axis: int = 0, keepdims: int = 1, select_last_index: int = 0) -> np.ndarray:
        a = normalize_axis(axis, x.ndim, "argmax" if largest else "argmin")
        fn = np.argmax if largest else np.argmin
        v = x.astype(np.uint8) if x.dtype == np.bool_ else x
        if select_last_index:
            out = x.shape[a] - 1 - fn(np.flip(v, a), axis=a)
        else:
            out = fn(v, axis=a)
        out = out.astype(np.int64)
        return np.expand_dims(out, a) if keepdims else out
    return reference


for _name, _largest in (("argmax", True), ("argmin", False)):
    register(OpDef(_name, REDUCTION, _arg_infer(_name), _arg_reference(_largest),
                   _arg_compute(_name, _largest), attr_defaults=dict(_DEFAULTS)))
