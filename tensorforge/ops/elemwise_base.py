"""Shared machinery of the elementwise family (ops -> TE): dtype classes, input checks, and the
factories that turn one scalar TE function plus one NumPy function into a registered @op record.

Every elementwise op is injective: output element `i` reads input element `i` (after NumPy
broadcasting) and nothing else.  The factories keep three things in one place so each op file
only states its math:

* `infer` checks the input dtypes against the op's allowed set, validates attribute names,
  broadcasts the shapes and names the result dtype;
* `compute` builds one `te.compute` over the broadcast shape, tagged with the op name;
* `reference` runs the NumPy function with floating-point warnings silenced and casts the
  result to exactly the inferred dtype.

Scalar TE functions receive loaded `Expr`s plus the attributes; they build the result from the
same operations, in the same order and dtype, as the NumPy function (so float16, which both
round after every operation, agrees bit for bit wherever the math library does).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from .. import te
from .common import broadcast_load, broadcast_shape, shape_of
from .registry import INJECTIVE, OpDef, OpError, TensorType, register

FLOATS = ("float16", "bfloat16", "float32", "float64")
SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
INTEGERS = SIGNED + UNSIGNED
NUMERIC = INTEGERS + FLOATS
BOOL = ("bool",)
ALL = NUMERIC + BOOL


# -- checks ---------------------------------------------------------------------------------------

def check_dtype(op: str, what: str, dtype: str, allowed: Sequence[str]) -> None:
    """OpError unless `dtype` is one of `allowed`."""
    if dtype not in allowed:
        raise OpError(f"{op}: {what} has dtype {dtype}; expected one of {', '.join(allowed)}")


def check_attrs(op: str, attrs: dict, known: Sequence[str]) -> None:
    """OpError naming the first attribute `op` does not take."""
    unknown = sorted(set(attrs) - set(known))
    if unknown:
        raise OpError(f"{op}: unknown attribute(s) {', '.join(unknown)}; "
                      f"it takes {', '.join(known) if known else 'none'}")


def check_number_attrs(op: str, **values) -> None:
    """OpError naming the first attribute that is not a (non-bool) number."""
    for key, v in values.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise OpError(f"{op}: attribute {key} must be a number, got {v!r}")


def broadcasts_to(shape: Sequence[int], target: Sequence[int]) -> bool:
    """Whether `shape` broadcasts (one way) to `target`."""
    try:
        return np.broadcast_shapes(tuple(shape), tuple(target)) == tuple(target)
    except ValueError:
        return False


def common_dtype(op: str, types: Sequence[TensorType], allowed: Sequence[str]) -> str:
    """The one dtype all inputs share (OpError when they differ or it is not allowed)."""
    present = [t for t in types if t is not None]
    if not present:
        raise OpError(f"{op}: needs at least one input")
    first = present[0].dtype
    for k, t in enumerate(present):
        if t.dtype != first:
            raise OpError(f"{op}: input {k} has dtype {t.dtype} but input 0 has {first}; "
                          "the inputs must share one dtype (insert a cast)")
    check_dtype(op, "input", first, allowed)
    return first


# -- scalar helpers for compute functions ---------------------------------------------------------

def lit(value: float | int | bool, dtype: str) -> te.Expr:
    """A constant of `dtype` (the value rounded to it once, as NumPy does)."""
    return te.const(value, dtype)


def np_lit(value: float | int | bool, dtype: str | np.dtype):
    """The NumPy scalar of `dtype` holding `value`; mirrors `lit` in references."""
    return np.dtype(dtype).type(value)


def is_float(dtype: str) -> bool:
    return dtype in FLOATS


def nan_max(a: te.Expr, b: te.Expr) -> te.Expr:
    """max(a, b) that propagates NaN from either side, like np.maximum."""
    if not is_float(a.dtype):
        return te.max(a, b)
    return _bound_once(a, lambda v: te.if_then_else(te.any(v > b, te.isnan(v)), v, b))


def nan_min(a: te.Expr, b: te.Expr) -> te.Expr:
    """min(a, b) that propagates NaN from either side, like np.minimum."""
    if not is_float(a.dtype):
        return te.min(a, b)
    return _bound_once(a, lambda v: te.if_then_else(te.any(v < b, te.isnan(v)), v, b))


def _bound_once(a: te.Expr, body: Callable) -> te.Expr:
    """body(a), with `a` bound to a variable first when it is itself a NaN-propagating maximum or
    minimum (or a binding of one): the body reads its operand three times, so the chain of an
    n-input Max grew as 3^n and took 22 s to compile at n = 8.  A lone maximum keeps its operand as
    it is (the kernels it was tuned in).  Separate Max nodes inlined into one kernel are bound by
    the inliner (tir/build.py's _InlineExpander), where the operand is a load of the one before."""
    from ..ir.expr import Let, Select, Var
    if not isinstance(a, (Select, Let)):
        return body(a)
    v = Var("m", a.dtype)
    return Let(v, a, body(v))


# -- compute construction -------------------------------------------------------------------------

def const_shape(t: te.Tensor) -> tuple:
    return tuple(int(d.value) for d in t.shape)


def broadcast_compute(name: str, tensors: Sequence[te.Tensor | None], fn: Callable,
                      shape: Sequence[int] | None = None) -> te.Tensor:
    """`fn(*loads)` at every index of the broadcast of `tensors` (None entries stay None)."""
    present = [t for t in tensors if t is not None]
    out_shape = tuple(shape) if shape is not None else broadcast_shape(*[shape_of(t) for t in present], op=name)

    def body(*idx):
        loads = [broadcast_load(t, idx, out_shape) if t is not None else None for t in tensors]
        return fn(*loads)

    return te.compute(out_shape, body, name=name, tag=name)


def fresh(values: np.ndarray, shape: Sequence[int], dtype: str) -> np.ndarray:
    """A new writable array of `shape` and `dtype` holding `values` broadcast (never a view of
    an input, so a reference result cannot alias its arguments)."""
    out = np.empty(tuple(shape), dtype)
    with np.errstate(all="ignore"):
        out[...] = values
    return out


# -- factories ------------------------------------------------------------------------------------

def elementwise_op(name: str, arity: int, te_fn: Callable, np_fn: Callable, dtypes: Sequence[str],
                   out_dtype: str | Callable | None = None, attr_defaults: dict | None = None,
                   validate: Callable | None = None) -> OpDef:
    """Register an elementwise op of `arity` same-dtype inputs (broadcast together).

    `te_fn(*exprs, **attrs)` and `np_fn(*arrays, **attrs)` compute one result; `out_dtype` is a
    fixed dtype, a function of the input dtype, or None (same as the input).  `validate(dtype,
    **attrs)` may raise OpError for bad attribute values."""
    defaults = dict(attr_defaults or {})

    def result_dtype(dtype: str) -> str:
        if out_dtype is None:
            return dtype
        return out_dtype(dtype) if callable(out_dtype) else out_dtype

    def infer(*types: TensorType, **attrs) -> TensorType:
        if len(types) != arity or any(t is None for t in types):
            raise OpError(f"{name}: takes {arity} input(s), got {len([t for t in types if t is not None])}")
        check_attrs(name, attrs, tuple(defaults))
        dtype = common_dtype(name, types, dtypes)
        if validate is not None:
            validate(dtype, **attrs)
        shape = broadcast_shape(*[t.shape for t in types], op=name)
        return TensorType(shape, result_dtype(dtype))

    def compute(*tensors: te.Tensor, **attrs) -> te.Tensor:
        return broadcast_compute(name, tensors, lambda *xs: te_fn(*xs, **attrs))

    def reference(*arrays: np.ndarray, **attrs) -> np.ndarray:
        arrays = [np.asarray(a) for a in arrays]
        shape = np.broadcast_shapes(*[a.shape for a in arrays])
        with np.errstate(all="ignore"):
            out = np.asarray(np_fn(*arrays, **attrs))
        return fresh(out, shape, result_dtype(arrays[0].dtype.name))

    return register(OpDef(name, INJECTIVE, infer, reference, compute, attr_defaults=defaults))


def unary_op(name: str, te_fn: Callable, np_fn: Callable, dtypes: Sequence[str], **kwargs) -> OpDef:
    """Register a one-input elementwise op; see `elementwise_op`."""
    return elementwise_op(name, 1, te_fn, np_fn, dtypes, **kwargs)


def binary_op(name: str, te_fn: Callable, np_fn: Callable, dtypes: Sequence[str], **kwargs) -> OpDef:
    """Register a two-input broadcasting elementwise op; see `elementwise_op`."""
    return elementwise_op(name, 2, te_fn, np_fn, dtypes, **kwargs)
