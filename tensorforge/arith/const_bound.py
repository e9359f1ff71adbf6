"""Constant integer bounds: for an integer expression, numbers lo and hi with lo <= value <= hi.

This is the cheap half of the prover: it needs no simplification and no symbolic algebra, only
the constant ranges of the variables (from `Analyzer.bind`).  Infinite ends are the floats
`-INF`/`INF` here; `Analyzer.const_int_bound` shows them as None.  Index arithmetic in int32 and
int64 is assumed not to overflow (as TVM does); in narrower and unsigned types a result that
could wrap is widened to the whole range of its dtype.
"""
from __future__ import annotations

import functools
import math
from typing import Callable

from ..ir import dtype as dt
from ..ir import expr as E
from .fold import int_range

INF = math.inf
_is_float = functools.lru_cache(maxsize=None)(dt.is_float)
Bound = tuple  # (lo, hi): ints, or -INF / INF


def dtype_bound(dtype: str) -> Bound:
    """What the dtype alone says about a value (int32 and int64 are treated as unbounded)."""
    if dt.is_float(dtype):
        return (-INF, INF)
    if dt.is_bool(dtype) or dt.is_uint(dtype) or dt.bits(dtype) < 32:
        return int_range(dtype)
    return (-INF, INF)


def _fit(b: Bound, dtype: str) -> Bound:
    # A result outside a narrow dtype may have wrapped: then only the dtype's range is known.
    if dt.is_float(dtype):
        return (-INF, INF)
    if dt.is_bool(dtype) or dt.is_uint(dtype) or dt.bits(dtype) < 32:
        lo, hi = int_range(dtype)
        if b[0] < lo or b[1] > hi:
            return (lo, hi)
    return b


def _mul(x, y):
    if x == 0 or y == 0:
        return 0
    return x * y


def _floordiv(x, c: int):
    # x // c for c > 0 with infinite x allowed.
    return x if math.isinf(x) else x // c


def _div_pos(a: Bound, b: Bound) -> Bound:
    # floor(a / b) for every b in [b.lo, b.hi] with b.lo >= 1.
    blo, bhi = b
    lo = (0 if math.isinf(bhi) else a[0] // bhi) if a[0] >= 0 else _floordiv(a[0], blo)
    hi = _floordiv(a[1], blo) if a[1] >= 0 else (-1 if math.isinf(bhi) else a[1] // bhi)
    return (lo, hi)


class ConstBoundEval:
    """Computes constant bounds bottom-up.

    Algorithm: interval arithmetic over the expression tree with one rule per node type; each
    rule returns a bound that contains every value the node can take when its children lie in
    their bounds (the invariant), so the root's bound is sound.  Results are cached per node.
    """

    def __init__(self, var_bound: Callable[[E.Var], Bound], cache: dict | None = None):
        self.var_bound = var_bound
        self.cache: dict = {} if cache is None else cache

    def bound(self, e: E.Expr) -> Bound:
        hit = self.cache.get(id(e))
        if hit is not None:
            return hit[1]
        if _is_float(e.dtype):
            b: Bound = (-INF, INF)
        else:
            rule = _RULES.get(type(e))
            b = rule(self, e) if rule is not None else dtype_bound(e.dtype)
        self.cache[id(e)] = (e, b)
        return b

    # -- rules --------------------------------------------------------------------------------
    def _var(self, e: E.Var) -> Bound:
        return self.var_bound(e)

    def _int(self, e: E.IntImm) -> Bound:
        return (e.value, e.value)

    def _add(self, e: E.Add) -> Bound:
        a, b = self.bound(e.a), self.bound(e.b)
        return _fit((a[0] + b[0], a[1] + b[1]), e.dtype)

    def _sub(self, e: E.Sub) -> Bound:
        a, b = self.bound(e.a), self.bound(e.b)
        return _fit((a[0] - b[1], a[1] - b[0]), e.dtype)

    def _mul(self, e: E.Mul) -> Bound:
        a, b = self.bound(e.a), self.bound(e.b)
        corners = [_mul(x, y) for x in a for y in b]
        return _fit((min(corners), max(corners)), e.dtype)

    def _floordiv(self, e: E.FloorDiv) -> Bound:
        a, b = self.bound(e.a), self.bound(e.b)
        if b[0] >= 1:
            return _fit(_div_pos(a, b), e.dtype)
        if b[1] <= -1:  # floor(a / b) == floor(-a / -b)
            return _fit(_div_pos((-a[1], -a[0]), (-b[1], -b[0])), e.dtype)
        return dtype_bound(e.dtype)

    def _floormod(self, e: E.FloorMod) -> Bound:
        a, b = self.bound(e.a), self.bound(e.b)
        if b[0] >= 1:
            if b[0] == b[1] and not math.isinf(a[0]) and not math.isinf(a[1]):
                c = b[0]
                if a[0] // c == a[1] // c:  # one period: the modulo is a shift
                    k = a[0] // c
                    return (a[0] - k * c, a[1] - k * c)
            hi = b[1] - 1
            if a[0] >= 0:
                hi = min(hi, a[1])
            return (0, hi)
        if b[1] <= -1:
            lo = b[0] + 1
            if a[1] <= 0:
                lo = max(lo, a[0])
            return (lo, 0)
        return dtype_bound(e.dtype)

    def _div(self, e: E.Div) -> Bound:  # C division of integers
        a, b = self.bound(e.a), self.bound(e.b)
        if b[0] == b[1] and b[0] >= 1 and not math.isinf(b[0]):
            c = b[0]

            def tdiv(x):
                return x if math.isinf(x) else (abs(x) // c) * (1 if x >= 0 else -1)
            return (tdiv(a[0]), tdiv(a[1]))
        return dtype_bound(e.dtype)

    def _min(self, e: E.Min) -> Bound:
        a, b = self.bound(e.a), self.bound(e.b)
        return (min(a[0], b[0]), min(a[1], b[1]))

    def _max(self, e: E.Max) -> Bound:
        a, b = self.bound(e.a), self.bound(e.b)
        return (max(a[0], b[0]), max(a[1], b[1]))

    def _select(self, e: E.Select) -> Bound:
        a, b = self.bound(e.true_value), self.bound(e.false_value)
        return (min(a[0], b[0]), max(a[1], b[1]))

    def _cast(self, e: E.Cast) -> Bound:
        if dt.is_float(e.value.dtype) or dt.is_bool(e.dtype):
            return dtype_bound(e.dtype)
        inner = self.bound(e.value)
        if not dt.is_uint(e.dtype) and dt.bits(e.dtype) >= 32 and not (
                math.isinf(inner[0]) and math.isinf(inner[1])):
            lo, hi = int_range(e.dtype)
            return inner if lo <= inner[0] and inner[1] <= hi else dtype_bound(e.dtype)
        return _fit(inner, e.dtype)

    def _bool(self, e: E.Expr) -> Bound:
        return (0, 1)

    def _let(self, e: E.Let) -> Bound:
        value = self.bound(e.value)
        outer = self.var_bound

        def var_bound(v: E.Var) -> Bound:
            return value if v is e.var else outer(v)
        return ConstBoundEval(var_bound).bound(e.body)

    def _ramp(self, e: E.Ramp) -> Bound:
        base, stride = self.bound(e.base), self.bound(e.stride)
        n = e.lanes - 1
        return _fit((base[0] + min(0, _mul(stride[0], n)), base[1] + max(0, _mul(stride[1], n))),
                    e.dtype)

    def _broadcast(self, e: E.Broadcast) -> Bound:
        return self.bound(e.value)


_RULES: dict[type, Callable] = {
    E.Var: ConstBoundEval._var, E.IntImm: ConstBoundEval._int,
    E.Add: ConstBoundEval._add, E.Sub: ConstBoundEval._sub, E.Mul: ConstBoundEval._mul,
    E.FloorDiv: ConstBoundEval._floordiv, E.FloorMod: ConstBoundEval._floormod,
    E.Div: ConstBoundEval._div, E.Min: ConstBoundEval._min, E.Max: ConstBoundEval._max,
    E.Select: ConstBoundEval._select, E.Cast: ConstBoundEval._cast, E.Let: ConstBoundEval._let,
    E.Ramp: ConstBoundEval._ramp, E.Broadcast: ConstBoundEval._broadcast,
    **{cls: ConstBoundEval._bool
       for cls in (E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE, E.And, E.Or, E.Not)},
}
