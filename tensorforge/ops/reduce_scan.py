"""cumsum and cumprod (ONNX CumSum / CumProd with exclusive / reverse) as REDUCTIONs over a
triangular domain.

out[.., i, ..] = sum (product) of x[.., k, ..] over the k the flags select:  k <= i (plain),
k < i (exclusive), k >= i (reverse), k > i (both); an empty selection gives the identity (0 or
1).  Written as a full-length reduce axis with a `where` condition: O(n^2) along the axis if run
as written.  On CPUs the template `scan.cpu` tensorizes each line along the axis with
`scan_intrin`, a running sum (product) in C: O(n), in the order the reduction adds (k upward),
so the values are the same (a 512 x 1024 cumsum took 1.2 s as a reduction, 610x ONNX Runtime's
time).  Integers wrap in their dtype; float16 accumulates in float32.
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .. import te
from .common import const_shape, normalize_axis
from .reduce import accum_dtype
from .registry import REDUCTION, OpDef, OpError, TensorType, register

_SCANS: dict[str, tuple[Any, Any, int]] = {  # op name -> (TE reducer, NumPy scan, identity)
    "cumsum": (te.sum, np.cumsum, 0),
    "cumprod": (te.prod, np.cumprod, 1),
}


def _selected(k, i, exclusive: int, reverse: int):
    if reverse:
        return k > i if exclusive else k >= i
    return k < i if exclusive else k <= i


def scan_value(x_at, k, i, acc: str, reducer, exclusive: int, reverse: int):
    """The reduction of one output element: x_at(k) over the selected k (shared by the op's
    compute and `scan_intrin`, whose computes must match structurally)."""
    return reducer(x_at(k).astype(acc), axis=k, where=_selected(k.var, i, exclusive, reverse))


# C names of the accumulators a running sum has (float16 input accumulates in float32); the ops
# layer may not import the code generators' dialect tables (tests/test_layers.py)
_C_TYPES = {"float32": "float", "float64": "double", "int8": "int8_t", "int16": "int16_t",
            "int32": "int32_t", "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t",
            "uint32": "uint32_t", "uint64": "uint64_t"}


def scan_supported(dtype: str, acc: str) -> bool:
    return (dtype in _C_TYPES or dtype == "float16") and acc in _C_TYPES


@functools.lru_cache(maxsize=None)
def scan_intrin(name: str, n: int, dtype: str, acc: str, exclusive: int, reverse: int):
    """A tensor intrinsic for one line of `n` elements of a cumsum / cumprod: c[i] = the scan of
    a[k] over the selected k, as a running sum (product) in C; both lines at any stride."""
    from ..te.intrin import decl_buffer, decl_tensor_intrin
    from ..tir import nodes as N
    reducer, _, identity = _SCANS[name]
    a = te.placeholder((n,), dtype, name="a")
    c = te.compute((n,), lambda i: scan_value(lambda k: a[k], te.reduce_axis((0, n), name="k"), i, acc,
                                              reducer, exclusive, reverse), name="c")
    t, ta = _C_TYPES[acc], _C_TYPES.get(dtype, "tf_float16")
    # integers accumulate on the unsigned type of their width: wrap-around without undefined behaviour
    w = t if acc.startswith(("float", "uint")) else "u" + t
    op = "+" if name == "cumsum" else "*"
    helper = f"tf_{name}_{dtype}_{acc}_{n}_{'e' if exclusive else 'i'}{'r' if reverse else 'f'}"
    order = f"for (int64_t i = {n - 1}; i >= 0; --i)" if reverse else f"for (int64_t i = 0; i < {n}; ++i)"
    step = (f"c[i * sc] = ({t})r; r = r {op} ({w})({t})a[i * sa];" if exclusive
            else f"r = r {op} ({w})({t})a[i * sa]; c[i * sc] = ({t})r;")
    text = (f"static inline int {helper}({t}* c, const {ta}* a, int64_t sc, int64_t sa) {{\n"
            f"  {w} r = ({w}){identity};\n  {order} {{ {step} }}\n  return 0;\n}}")

    def lower(ins, outs):
        (ab,), (cb,) = ins, outs
        return N.Evaluate(N.CallExtern("int32", helper, (cb.access_ptr(), ab.access_ptr(), cb.strides[0], ab.strides[0])))

    from ..ir.expr import Var
    binds = {a: decl_buffer((n,), dtype, "a", strides=(Var("a_s"),)),
             c: decl_buffer((n,), acc, "c", strides=(Var("c_s"),))}
    return decl_tensor_intrin(c.op, lower, binds, name=helper, helpers=((helper, text),))


def _make(name: str) -> OpDef:
    reducer, np_scan, identity = _SCANS[name]

    def infer(x: TensorType, axis: int, exclusive: int = 0, reverse: int = 0) -> TensorType:
        if not x.shape:
            raise OpError(f"{name}: input must have rank >= 1")
        if x.dtype == "bool":
            raise OpError(f"{name}: bool input is not supported")
        normalize_axis(axis, len(x.shape), name)
        return TensorType(tuple(x.shape), x.dtype)

    def compute(x: te.Tensor, axis: int, exclusive: int = 0, reverse: int = 0) -> Any:
        shape = const_shape(x)
        a = normalize_axis(axis, len(shape), name)
        acc = accum_dtype(x.dtype)

        def f(*o: Any) -> Any:
            k = te.reduce_axis((0, shape[a]), name="k")
            return scan_value(lambda kk: x[o[:a] + (kk,) + o[a + 1:]], k, o[a], acc, reducer, exclusive, reverse)

        if acc == x.dtype:
            return te.compute(shape, f, name=name, tag=name)
        total: Any = te.compute(shape, f, name=f"{name}_acc")
        return te.compute(shape, lambda *o: total[o].astype(x.dtype), name=name, tag=name)

    def reference(x: np.ndarray, axis: int, exclusive: int = 0, reverse: int = 0) -> np.ndarray:
        a = normalize_axis(axis, x.ndim, name)
        acc = accum_dtype(x.dtype.name)
        v = np.flip(x, a) if reverse else x
        out = np_scan(v, axis=a, dtype=acc)
        if exclusive and x.shape[a]:          # shift by one: out[0] = identity, out[i] = scan of v[:i]
            head = np.full_like(np.take(out, [0], axis=a), identity)
            out = np.concatenate([head, np.take(out, np.arange(x.shape[a] - 1), axis=a)], axis=a)
        out = np.flip(out, a) if reverse else out
        return out.astype(x.dtype)

    return OpDef(name, REDUCTION, infer, reference, compute,
                 attr_defaults={"exclusive": 0, "reverse": 0}, schedule={"cpu": "scan.cpu"})


SCAN_OPS: dict[str, OpDef] = {name: register(_make(name)) for name in _SCANS}
