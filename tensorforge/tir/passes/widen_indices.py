"""Index widening: index arithmetic that may not fit in int32 is done in int64.

Loop variables, shapes and index constants are int32 by default, which is fast and right for
every buffer of fewer than 2^31 elements.  A larger buffer (an int8 tensor of 65537 x 32768), a
constant offset of 2^31 or a symbolic extent can take an int32 index past 2^31 - 1, where C
wraps it to a negative offset and the kernel reads and writes out of bounds.

Algorithm: walk the program keeping the range of every loop and let variable (interval
arithmetic on Python integers, so the ranges themselves never wrap).  For each index
expression, comparison and loop bound, compute the range of every int32 sub-expression; if one
may leave [-2^31, 2^31 - 1] (or cannot be bounded, e.g. it multiplies two symbolic sizes), the
whole expression is rebuilt in int64: int32 variables and loads are cast, constants widened.  A
loop whose range does not fit in int32 gets an int64 loop variable.  Invariant: every int32
operation left in an index is proved not to overflow, so kernels of ordinary models are
unchanged; everything else is computed in int64.  The pass runs first (before simplification
folds a guard such as `x * 3 + y < 2^31` with wrapped int32 constants) and again after storage
flattening (which makes the row-major offsets).
"""
from __future__ import annotations

import dataclasses
import math

from ...ir import dtype as dt
from ...ir import expr as E
from ...ir.functor import Mutator
from .. import nodes as N

INT32 = (-(2 ** 31), 2 ** 31 - 1)
INF = math.inf


def _range_of(dtype: str) -> tuple:
    if dt.is_bool(dtype):
        return (0, 1)
    if dt.is_integer(dtype) or dt.is_uint(dtype):
        bits = dt.bits(dtype)
        return (0, 2 ** bits - 1) if dt.is_uint(dtype) else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return (-INF, INF)


def _fits(b: tuple) -> bool:
    return INT32[0] <= b[0] and b[1] <= INT32[1]


def _corners(f, a: tuple, b: tuple) -> tuple:
    vals = []
    for x in a:
        for y in b:
            try:
                vals.append(f(x, y))
            except (ValueError, ZeroDivisionError, OverflowError):
                return (-INF, INF)
    vals = [0 if isinstance(v, float) and math.isnan(v) else v for v in vals]
    return (min(vals), max(vals))


def _mul(x, y):
    return 0 if x == 0 or y == 0 else x * y


def _floordiv(x, y):
    if math.isinf(x) or math.isinf(y):
        return x / y if not math.isinf(y) else 0
    return x // y


class _Bounds:
    """Ranges of integer expressions given the ranges of variables; notes int32 overflow."""

    def __init__(self, env: dict):
        self.env = env
        self.overflow = False

    def __call__(self, e: E.Expr) -> tuple:
        b = self._bound(e)
        if e.dtype == "int32" and not _fits(b):
            self.overflow = True
        return b

    def _bound(self, e: E.Expr) -> tuple:
        if isinstance(e, E.IntImm):
            return (e.value, e.value)
        if isinstance(e, E.Var):
            return self.env.get(e, _range_of(e.dtype))
        if isinstance(e, E.Cast):
            inner = self(e.value)
            if dt.is_float(e.value.dtype) or dt.is_float(e.dtype):
                return _range_of(e.dtype)
            want = _range_of(e.dtype)
            return inner if want[0] <= inner[0] and inner[1] <= want[1] else want if e.dtype != "int32" else inner
        if isinstance(e, (E.Add, E.Sub, E.Mul, E.Min, E.Max, E.FloorDiv, E.FloorMod, E.Div)):
            a, b = self(e.a), self(e.b)
            if isinstance(e, E.Add):
                return (a[0] + b[0], a[1] + b[1])
            if isinstance(e, E.Sub):
                return (a[0] - b[1], a[1] - b[0])
            if isinstance(e, E.Mul):
                return _corners(_mul, a, b)
            if isinstance(e, E.Min):
                return (min(a[0], b[0]), min(a[1], b[1]))
            if isinstance(e, E.Max):
                return (max(a[0], b[0]), max(a[1], b[1]))
            if b[0] >= 1:                                  # division by a positive divisor
                if isinstance(e, E.FloorMod):
                    return (0, b[1] - 1) if not math.isinf(b[1]) else (0, max(abs(a[0]), abs(a[1])))
                lo, hi = _corners(_floordiv, a, b)
                return (lo, hi + 1) if isinstance(e, E.Div) else (lo, hi)
            return (-INF, INF) if dt.is_integer(e.dtype) else _range_of(e.dtype)
        if isinstance(e, E.Select):
            self(e.condition)
            t, f = self(e.true_value), self(e.false_value)
            return (min(t[0], f[0]), max(t[1], f[1]))
        if isinstance(e, E.CmpOp):
            self(e.a)
            self(e.b)
            return (0, 1)
        return _range_of(e.dtype)          # a load, a call, a let: any value of its dtype


class _ToInt64(Mutator):
    """Rebuilds an integer expression in int64 (its conditions and load indices untouched)."""

    def __init__(self, replaced: dict):
        self.replaced = replaced

    def visit_Var(self, v: E.Var):
        if v in self.replaced:
            return self.replaced[v]
        return E.Cast("int64", v) if v.dtype == "int32" else v

    def visit_IntImm(self, c: E.IntImm):
        return E.IntImm("int64", c.value) if c.dtype == "int32" else c

    def visit_Cast(self, c: E.Cast):
        if c.dtype == "int64" and c.value.dtype == "int32":
            return self.visit(c.value)          # widen the operations under the cast too
        if c.dtype == "int32" and dt.is_integer(c.value.dtype):
            return self.visit(c.value) if c.value.dtype in ("int32", "int64") else E.Cast("int64", c.value)
        return E.Cast("int64", c) if c.dtype == "int32" else c

    def visit_Select(self, s: E.Select):
        return E.Select(s.condition, self.visit(s.true_value), self.visit(s.false_value))

    def _opaque(self, e):
        return E.Cast("int64", e) if e.dtype == "int32" else e

    visit_BufferLoad = visit_Call = visit_Let = _opaque

    def generic_visit(self, node):
        if isinstance(node, E.CmpOp):
            return node
        return super().generic_visit(node)


class _Widen(Mutator):
    def __init__(self):
        self.env: dict = {}
        self.replaced: dict = {}        # int32 loop var -> its int64 replacement

    def _bounds(self, e: E.Expr) -> tuple[tuple, bool]:
        b = _Bounds(self.env)
        r = b(e)
        return r, b.overflow

    def _root(self, e: E.Expr) -> E.Expr:
        """`e` processed, and in int64 when one of its int32 parts may overflow."""
        e = self.visit(e)
        if dt.is_integer(e.dtype) and dt.lanes(e.dtype) == 1 and self._bounds(e)[1]:
            return _ToInt64(self.replaced).visit(e)
        return e

    def visit_Var(self, v: E.Var):
        new = self.replaced.get(v)
        return v if new is None else E.Cast("int32", new)      # outside an index: a value

    def visit_BufferLoad(self, node: N.BufferLoad):
        return N.BufferLoad(node.buffer, tuple(self._root(i) for i in node.indices)) \
            if node.indices else node

    def visit_BufferStore(self, node: N.BufferStore):
        return N.BufferStore(node.buffer, self.visit(node.value), tuple(self._root(i) for i in node.indices))

    def _compare(self, node: E.CmpOp):
        a, b = self.visit(node.a), self.visit(node.b)
        if any(dt.is_integer(x.dtype) and dt.lanes(x.dtype) == 1 and self._bounds(x)[1] for x in (a, b)):
            w = _ToInt64(self.replaced)
            return type(node)(w.visit(a), w.visit(b))
        return node if a is node.a and b is node.b else type(node)(a, b)

    visit_EQ = visit_NE = visit_LT = visit_LE = visit_GT = visit_GE = _compare

    def visit_For(self, node: N.For):
        lo, ext = self._bounds(node.min)[0], self._bounds(node.extent)[0]
        var = node.loop_var
        rng = (lo[0], lo[1] + ext[1] - 1)
        if var.dtype == "int32" and not _fits(rng):
            new = E.Var(var.name, "int64")
            self.replaced[var] = new
            self.env[new] = rng
        self.env[var] = rng
        body = self.visit(node.body)
        new_var = self.replaced.get(var, var)
        if new_var is not var:
            w = _ToInt64(self.replaced)
            return dataclasses.replace(node, loop_var=new_var, min=w.visit(self.visit(node.min)),
                                       extent=w.visit(self.visit(node.extent)), body=body)
        mn, extent = self._root(node.min), self._root(node.extent)
        if mn is node.min and extent is node.extent and body is node.body:
            return node
        return dataclasses.replace(node, min=mn, extent=extent, body=body)

    def visit_LetStmt(self, node: N.LetStmt):
        value = self.visit(node.value)
        if dt.is_integer(value.dtype) and dt.lanes(value.dtype) == 1:
            self.env[node.var] = self._bounds(value)[0]
        body = self.visit(node.body)
        if value is node.value and body is node.body:
            return node
        return dataclasses.replace(node, value=value, body=body)


def widen_indices(func: N.PrimFunc) -> N.PrimFunc:
    return func.with_body(_Widen().visit(func.body))
