"""Symbolic interval arithmetic: the range of an expression while some variables range over
intervals.

`Analyzer.eval_interval(expr, dom)` runs an `IntervalEval`.  Variables in `dom` are relaxed to
their intervals (whose ends may mention other variables); all other variables stay what they
are, so a subexpression that mentions no relaxed variable is a point.  This is how bound
inference finds the region of a tensor a loop nest reads: relax the inner loop variables of an
index expression and keep the outer ones.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable, Optional

from ..ir import dtype as dt
from ..ir import expr as E
from .interval import Interval

if TYPE_CHECKING:
    from .analyzer import Analyzer

Ends = Optional[tuple]  # (lo, hi) expressions, or None when unbounded


def _bin(cls: type, a: E.Expr, b: E.Expr) -> E.Expr:
    if a.dtype != b.dtype:
        target = dt.promote(a.dtype, b.dtype)
        a, b = E.cast(a, target), E.cast(b, target)
    return cls(a, b)


def _min(a, b): return _bin(E.Min, a, b)
def _max(a, b): return _bin(E.Max, a, b)


class IntervalEval:
    """Evaluates the interval of an expression over a domain of relaxed variables.

    Algorithm: one rule per node type, bottom-up, each returning (lo, hi) such that every value
    of the node lies in [lo, hi] when its children lie in their intervals (the invariant), or
    None when it cannot bound the node.  Monotone operations map ends to ends; signs needed by
    multiplication and division come from the analyzer's constant bounds, and where a sign is
    unknown the rule takes the min/max over the corner cases.  Ends are left unsimplified; the
    analyzer simplifies the two results.
    """

    def __init__(self, analyzer: "Analyzer", dom: dict):
        self.an = analyzer
        self.dom: dict[E.Var, Interval] = {
            v: iv if isinstance(iv, Interval) else Interval.from_range(iv) for v, iv in dom.items()}
        self.memo: dict[int, tuple[E.Expr, Ends]] = {}
        self.dep: dict[int, tuple[object, bool]] = {}  # id -> (node kept alive, mentions a relaxed var)

    def depends(self, e) -> bool:
        """Whether `e` mentions a relaxed variable."""
        # Plain loops rather than any(generator): a generator frame per level would put the
        # recursion on the C stack.
        memo = self.dep.get(id(e))
        if memo is None:
            hit = False
            if isinstance(e, E.Var):
                hit = e in self.dom
            elif isinstance(e, tuple):
                for x in e:
                    if self.depends(x):
                        hit = True
                        break
            elif isinstance(e, E.Expr) and dataclasses.is_dataclass(e):
                for f in dataclasses.fields(e):
                    child = getattr(e, f.name)
                    if isinstance(child, (E.Expr, tuple)) and self.depends(child):
                        hit = True
                        break
            self.dep[id(e)] = (e, hit)
            return hit
        return memo[1]

    def eval(self, e: E.Expr) -> Ends:
        if not self.depends(e):
            return (e, e)
        hit = self.memo.get(id(e))
        if hit is not None:
            return hit[1]
        rule = _RULES.get(type(e))
        ends = rule(self, e) if rule is not None else None
        self.memo[id(e)] = (e, ends)
        return ends

    # -- signs from constant bounds ----------------------------------------------------------------
    def nonneg(self, x: E.Expr) -> bool:
        return self.an._bounds(x)[0] >= 0

    def nonpos(self, x: E.Expr) -> bool:
        return self.an._bounds(x)[1] <= 0

    def positive(self, x: E.Expr) -> bool:
        return self.an._bounds(x)[0] >= 1

    def negative(self, x: E.Expr) -> bool:
        return self.an._bounds(x)[1] <= -1

    # -- rules ---------------------------------------------------------------------------------
    def _var(self, e: E.Var) -> Ends:
        iv = self.dom[e]
        return (iv.min, iv.max)

    def _add(self, e: E.Add) -> Ends:
        a, b = self.eval(e.a), self.eval(e.b)
        if a is None or b is None:
            return None
        return (_bin(E.Add, a[0], b[0]), _bin(E.Add, a[1], b[1]))

    def _sub(self, e: E.Sub) -> Ends:
        a, b = self.eval(e.a), self.eval(e.b)
        if a is None or b is None:
            return None
        return (_bin(E.Sub, a[0], b[1]), _bin(E.Sub, a[1], b[0]))

    def _mul(self, e: E.Mul) -> Ends:
        a, b = self.eval(e.a), self.eval(e.b)
        if a is None or b is None:
            return None
        if a[0] is a[1]:
            a, b = b, a
        mul = lambda x, y: _bin(E.Mul, x, y)  # noqa: E731
        if b[0] is b[1]:  # interval times a point p: the sign of p decides the order
            p = b[0]
            if self.nonneg(p):
                return (mul(a[0], p), mul(a[1], p))
            if self.nonpos(p):
                return (mul(a[1], p), mul(a[0], p))
        elif self.nonneg(a[0]) and self.nonneg(b[0]):
            return (mul(a[0], b[0]), mul(a[1], b[1]))
        elif self.nonpos(a[1]) and self.nonpos(b[1]):
            return (mul(a[1], b[1]), mul(a[0], b[0]))
        elif self.nonneg(a[0]) and self.nonpos(b[1]):
            return (mul(a[1], b[0]), mul(a[0], b[1]))
        elif self.nonpos(a[1]) and self.nonneg(b[0]):
            return (mul(a[0], b[1]), mul(a[1], b[0]))
        corners = [mul(x, y) for x in (a[0], a[1]) for y in (b[0], b[1])]
        return (_min(_min(corners[0], corners[1]), _min(corners[2], corners[3])),
                _max(_max(corners[0], corners[1]), _max(corners[2], corners[3])))

    def _floordiv(self, e: E.FloorDiv) -> Ends:
        a, b = self.eval(e.a), self.eval(e.b)
        if a is None or b is None:
            return None
        if self.negative(b[1]):  # floor(a / b) == floor(-a / -b)
            zero = E.IntImm(e.dtype, 0)
            a = (_bin(E.Sub, zero, a[1]), _bin(E.Sub, zero, a[0]))
            b = (_bin(E.Sub, zero, b[1]), _bin(E.Sub, zero, b[0]))
        elif not self.positive(b[0]):
            return None
        div = lambda x, y: _bin(E.FloorDiv, x, y)  # noqa: E731
        if b[0] is b[1]:  # floor(x / p) is non-decreasing in x for p > 0
            return (div(a[0], b[0]), div(a[1], b[0]))
        lo = (div(a[0], b[1]) if self.nonneg(a[0]) else div(a[0], b[0]) if self.negative(a[0])
              else _min(div(a[0], b[0]), div(a[0], b[1])))
        hi = (div(a[1], b[0]) if self.nonneg(a[1]) else div(a[1], b[1]) if self.negative(a[1])
              else _max(div(a[1], b[0]), div(a[1], b[1])))
        return (lo, hi)

    def _floormod(self, e: E.FloorMod) -> Ends:
        a, b = self.eval(e.a), self.eval(e.b)
        if a is None or b is None or not self.positive(b[0]):
            return None
        one = E.IntImm(e.dtype, 1)
        if a[0] is a[1] and b[0] is b[1]:
            point = _bin(E.FloorMod, a[0], b[0])
            return (point, point)
        if isinstance(b[0], E.IntImm) and b[0] is b[1]:
            c = b[0]
            k_lo = self.an.simplify(_bin(E.FloorDiv, a[0], c))
            k_hi = self.an.simplify(_bin(E.FloorDiv, a[1], c))
            if self.an.can_prove_equal(k_lo, k_hi):  # one period: x % c == x - k*c
                shift = _bin(E.Mul, k_lo, c)
                return (_bin(E.Sub, a[0], shift), _bin(E.Sub, a[1], shift))
        hi = _bin(E.Sub, b[1], one)
        if self.nonneg(a[0]):
            hi = _min(hi, a[1])
        return (E.IntImm(e.dtype, 0), hi)

    def _min(self, e: E.Min) -> Ends:
        a, b = self.eval(e.a), self.eval(e.b)
        if a is None or b is None:
            return None
        return (_min(a[0], b[0]), _min(a[1], b[1]))

    def _max(self, e: E.Max) -> Ends:
        a, b = self.eval(e.a), self.eval(e.b)
        if a is None or b is None:
            return None
        return (_max(a[0], b[0]), _max(a[1], b[1]))

    def _select(self, e: E.Select) -> Ends:
        t, f = self.eval(e.true_value), self.eval(e.false_value)
        if t is None or f is None:
            return None
        return (_min(t[0], f[0]), _max(t[1], f[1]))

    def _cast(self, e: E.Cast) -> Ends:
        src, dst = e.value.dtype, e.dtype
        a = self.eval(e.value)
        if a is None or dt.is_bool(dst) or dt.is_bool(src):
            return None
        if dt.is_integer(dst) and not dt.is_float(src):
            lo, hi = self.an._bounds(a[0])[0], self.an._bounds(a[1])[1]
            from .fold import int_range
            dlo, dhi = int_range(dst)
            if not (dlo <= lo and hi <= dhi):
                return None  # the cast could wrap
        elif dt.is_integer(dst):
            return None
        return (E.Cast(dst, a[0]), E.Cast(dst, a[1]))

    def _let(self, e: E.Let) -> Ends:
        value = self.eval(e.value)
        if value is None:
            return None
        dom = dict(self.dom)
        dom[e.var] = Interval(value[0], value[1])
        return IntervalEval(self.an, dom).eval(e.body)

    def _ramp(self, e: E.Ramp) -> Ends:
        base, stride = self.eval(e.base), self.eval(e.stride)
        if base is None or stride is None:
            return None
        steps = E.IntImm(e.stride.dtype, e.lanes - 1)
        zero = E.IntImm(e.stride.dtype, 0)
        span = (_bin(E.Mul, stride[0], steps), _bin(E.Mul, stride[1], steps))
        return (_bin(E.Add, base[0], _min(zero, span[0])),
                _bin(E.Add, base[1], _max(zero, span[1])))

    def _broadcast(self, e: E.Broadcast) -> Ends:
        return self.eval(e.value)


_RULES: dict[type, Callable] = {
    E.Var: IntervalEval._var, E.Add: IntervalEval._add, E.Sub: IntervalEval._sub,
    E.Mul: IntervalEval._mul, E.FloorDiv: IntervalEval._floordiv,
    E.FloorMod: IntervalEval._floormod, E.Min: IntervalEval._min, E.Max: IntervalEval._max,
    E.Select: IntervalEval._select, E.Cast: IntervalEval._cast, E.Let: IntervalEval._let,
    E.Ramp: IntervalEval._ramp, E.Broadcast: IntervalEval._broadcast,
}
