"""Rewrite a PrimFunc into the subset of the loop IR that the C-family printers print directly.

Two rewrites, both meaning-preserving:

* float16 arithmetic is done in float32: `a + b` on float16 becomes
  `float16(float32(a) + float32(b))`, comparisons and intrinsics likewise.  C compilers either
  lack half-precision arithmetic or do it with excess precision anyway; doing it explicitly makes
  the rounding (once per IR operation, like NumPy) independent of the compiler.
* Scalar operands of vector operations are broadcast (`v * 2` -> `v * broadcast(2, lanes)`),
  so the printers only ever see operations between values of equal lane counts.

The result never contains float16 arithmetic, only float16 loads, stores, casts, selects and
broadcasts.  bfloat16 is treated the same way, and further: its constants become float32
constants cast to bfloat16, and its casts from or to types other than float32 go through
float32, so printers convert only between bfloat16 and float32 (codegen/c_bfloat16.py).
"""
from __future__ import annotations

import numpy as np

from ..ir import dtype as dt
from ..ir import expr as E
from ..ir.functor import Mutator
from ..tir import nodes as N


def legalize(func: N.PrimFunc) -> N.PrimFunc:
    """`func` with float16 arithmetic promoted to float32 and scalar operands broadcast."""
    body = _Legalizer().visit(func.body)
    return func if body is func.body else func.with_body(body)


def _broadcast_to(e: E.Expr, lanes: int) -> E.Expr:
    return E.Broadcast(e, lanes) if lanes > 1 and dt.lanes(e.dtype) == 1 else e


HALF = ("float16", "bfloat16")


def _half_value(value: float, dtype: str) -> float:
    """`value` rounded to the half type `dtype` (exact in float32, which holds every such value)."""
    with np.errstate(over="ignore"):
        return float(np.asarray(value, np.float32).astype(dt.to_numpy(dtype)).astype(np.float32))


def _to_float32(e: E.Expr) -> E.Expr:
    if dt.element_of(e.dtype) not in HALF:
        return e
    if isinstance(e, E.FloatImm):
        return E.FloatImm("float32", _half_value(e.value, e.dtype))
    return E.Cast(dt.with_lanes("float32", dt.lanes(e.dtype)), e)


def _is_half(e: E.Expr) -> bool:
    return dt.element_of(e.dtype) in HALF


def _bf16_cast(node: E.Cast) -> E.Expr:
    """A cast between bfloat16 and a type other than float32, through float32."""
    src, dst = dt.element_of(node.value.dtype), dt.element_of(node.dtype)
    if "bfloat16" not in (src, dst) or "float32" in (src, dst) or src == dst:
        return node
    mid = dt.with_lanes("float32", dt.lanes(node.dtype))
    return E.Cast(node.dtype, E.Cast(mid, node.value))


class _Legalizer(Mutator):
    def visit(self, node):
        node = super().visit(node)  # children first
        if isinstance(node, E.FloatImm) and node.dtype == "bfloat16":
            return E.Cast("bfloat16", E.FloatImm("float32", _half_value(node.value, "bfloat16")))
        if isinstance(node, E.Cast):
            return _bf16_cast(node)
        if isinstance(node, E.BinaryOp):
            return self._binary(node)
        if isinstance(node, E.Call):
            return self._call(node)
        if isinstance(node, E.Select):
            lanes = dt.lanes(node.dtype)
            lanes = max(lanes, dt.lanes(node.condition.dtype), dt.lanes(node.false_value.dtype))
            t, f = _broadcast_to(node.true_value, lanes), _broadcast_to(node.false_value, lanes)
            if t is not node.true_value or f is not node.false_value:
                return E.Select(node.condition, t, f)
            return node
        if isinstance(node, N.BufferStore):
            lanes = max([dt.lanes(i.dtype) for i in node.indices] + [1])
            value = _broadcast_to(node.value, lanes)
            return node if value is node.value else N.BufferStore(node.buffer, value, node.indices)
        return node

    def _binary(self, node: E.BinaryOp) -> E.Expr:
        a, b = node.a, node.b
        lanes = max(dt.lanes(a.dtype), dt.lanes(b.dtype))
        a, b = _broadcast_to(a, lanes), _broadcast_to(b, lanes)
        if isinstance(node, (E.And, E.Or)) or not (_is_half(a) or _is_half(b)):
            return node if (a is node.a and b is node.b) else type(node)(a, b)
        # float16 arithmetic or comparison: compute in float32.
        result = type(node)(_to_float32(a), _to_float32(b))
        if isinstance(node, E.CmpOp):
            return result
        return E.Cast(node.dtype, result)

    def _call(self, node: E.Call) -> E.Expr:
        lanes = max(dt.lanes(a.dtype) for a in node.args) if node.args else 1
        args = tuple(_broadcast_to(a, lanes) for a in node.args)
        if not any(_is_half(a) for a in args):
            return node if all(x is y for x, y in zip(args, node.args)) else E.Call(node.dtype, node.op, args)
        args = tuple(_to_float32(a) for a in args)
        if dt.is_bool(node.dtype):  # isnan / isinf
            return E.Call(node.dtype, node.op, args)
        return E.Cast(node.dtype, E.Call(dt.with_lanes("float32", dt.lanes(node.dtype)), node.op, args))
