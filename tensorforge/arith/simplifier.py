"""The expression simplifier: one bottom-up rewrite of an expression into canonical form.

`Analyzer.simplify` runs a `Simplifier`.  Integer index arithmetic (Add, Sub, Mul) is collected
into a `LinearForm` and rebuilt canonically; floor division and modulo have their own rules in
`divmod_rules.py`; Ramp and Broadcast in `vector_rules.py`; this file holds the dispatch and the
rules for the remaining nodes (constants, Min/Max, comparisons, logic, Select, Cast, Let).

Invariants every rule keeps: the result has the dtype of the input; it has the same value as the
input for every assignment of the variables that respects the analyzer's bindings (index
arithmetic in int32/int64 is assumed not to overflow); floating-point expressions are never
reassociated (only folded, and `x*1.0`, `x - 0.0`, `x/1.0` dropped, which are exact).
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import TYPE_CHECKING

from ..ir import dtype as dt
from ..ir import expr as E
from ..ir.functor import Mutator, dispatch, substitute, uses_var
from . import divmod_rules, vector_rules
from .fold import fold_binary, fold_cast, fold_not, int_range
from .linear import LinearForm, parse, to_expr
from .structural import Interner

if TYPE_CHECKING:
    from .analyzer import Analyzer

_INVERSE = {E.LT: E.GE, E.GE: E.LT, E.LE: E.GT, E.GT: E.LE, E.EQ: E.NE, E.NE: E.EQ}


def is_index(e: E.Expr) -> bool:
    """A scalar integer (signed or unsigned, not bool): the domain of the linear algebra."""
    return _index_dtype(e.dtype)


@functools.lru_cache(maxsize=None)
def _index_dtype(d: str) -> bool:
    return dt.is_integer(d) and dt.lanes(d) == 1


def _same_dtype(e: E.BinaryOp) -> bool:
    return e.a.dtype == e.dtype and e.b.dtype == e.dtype


class Simplifier(Mutator):
    """Simplifies one expression tree; create one per call (it memoizes by node identity)."""

    def __init__(self, analyzer: "Analyzer"):
        self.an = analyzer
        self.interner = Interner()
        self.memo: dict[int, tuple[E.Expr, E.Expr]] = {}
        self.collected: dict[int, tuple[E.Expr, LinearForm]] = {}
        self.parsed: dict[int, tuple[E.Expr, LinearForm]] = {}

    def visit(self, node):
        hit = self.memo.get(id(node))
        if hit is not None:
            return hit[1]
        method = dispatch(self, type(node))
        result = method(self, node) if method is not None else self.generic_visit(node)
        self.memo[id(node)] = (node, result)
        return result

    # -- helpers shared with the rule modules ---------------------------------------------------
    def key(self, e: E.Expr) -> int:
        return self.interner.key(e)

    def parse(self, e: E.Expr) -> LinearForm:
        return parse(e, self.interner, self.parsed)

    def build(self, form: LinearForm) -> E.Expr:
        """The canonical expression of a linear form (after merging x//c*c + x%c into x)."""
        form = self._merge_divmod(form)
        result = to_expr(form, self.interner)
        self.parsed.setdefault(id(result), (result, form.reduced()))
        return result

    def bounds(self, e: E.Expr) -> tuple:
        """Constant bounds of `e` (ints or +-inf), symbolic bindings included."""
        return self.an._bounds(e)

    def diff_bounds(self, a: E.Expr, b: E.Expr) -> tuple:
        """Bounds of a - b for integer scalars of one dtype (exact for a constant difference)."""
        form = self.parse(a).add(self.parse(b), -1)
        if form.is_const:
            return form.const, form.const
        if dt.is_uint(a.dtype):
            # a - b wraps around in an unsigned type (its bounds are never negative); bound the
            # true difference from the operands' own bounds instead.
            (alo, ahi), (blo, bhi) = self.bounds(a), self.bounds(b)
            return alo - bhi, ahi - blo
        return self.bounds(self.build(form))

    def rebuild(self, e: E.BinaryOp, a: E.Expr, b: E.Expr) -> E.Expr:
        if a is e.a and b is e.b:
            return e
        return type(e)(a, b, e.dtype)

    def fold(self, cls: type, a: E.Expr, b: E.Expr, dtype: str) -> E.Expr | None:
        """Constant folding, then the vector rules; None when neither applies."""
        folded = fold_binary(cls, a, b, dtype)
        if folded is None:
            folded = vector_rules.binary(self, cls, a, b, dtype)
        return folded

    def binary(self, cls: type, a: E.Expr, b: E.Expr) -> E.Expr:
        """Simplify cls(a, b) for already simplified operands."""
        return self.visit(cls(a, b))

    # -- linear integer arithmetic ----------------------------------------------------------------
    def collect(self, e: E.Expr) -> LinearForm:
        # Linear form of an unsimplified expression: looks through Add/Sub/Mul-by-constant and
        # simplifies whatever it finds below them as terms.  Memoized, so shared subtrees cost once.
        hit = self.collected.get(id(e))
        if hit is not None:
            return hit[1]
        cls = type(e)
        if isinstance(e, (E.Add, E.Sub)) and is_index(e) and _same_dtype(e):
            form = self.collect(e.a).add(self.collect(e.b), 1 if cls is E.Add else -1)
        elif isinstance(e, E.Mul) and is_index(e) and _same_dtype(e):
            fa, fb = self.collect(e.a), self.collect(e.b)
            if fa.is_const:
                form = fb.scale(fa.const)
            elif fb.is_const:
                form = fa.scale(fb.const)
            else:
                form = self._product(fa, fb)
        elif isinstance(e, E.IntImm):
            form = LinearForm.constant(e.value, e.dtype)
        else:
            form = self.parse(self.visit(e))
        self.collected[id(e)] = (e, form)
        return form

    def _product(self, fa: LinearForm, fb: LinearForm) -> LinearForm:
        # A product of two non-constant forms is a term; constant factors of single-term forms
        # move to the coefficient ((i*2)*(j*3) -> (i*j)*6); operands are ordered canonically.
        sa, sb = fa.single_term(), fb.single_term()
        coeff = 1
        if sa is not None and sb is not None:
            (x, ca), (y, cb) = sa, sb
            coeff = ca * cb
        else:
            x, y = self.build(fa), self.build(fb)
        if self.interner.sort_key(y) < self.interner.sort_key(x):
            x, y = y, x
        term = E.Mul(x, y, fa.dtype)
        return LinearForm.atom(term, self.key(term), coeff)

    def _merge_divmod(self, form: LinearForm) -> LinearForm:
        # x//c*c*k + x%c*k -> x*k, and the same with a symbolic divisor: (x//n)*n*k + x%n*k;
        # x//c1%c2*c1*k + x%c1*k -> x%(c1*c2)*k (the index of a reshape, digit by digit).
        # Each step replaces two terms by at most one, so this terminates.
        changed = True
        while changed:
            changed = False
            for k, (t, c) in form.terms.items():
                if not isinstance(t, E.FloorMod):
                    continue
                partner = self._div_partner(t, c, form)
                if partner is not None:
                    form = form.without([k, partner]).add(self.parse(t.a), c)
                    changed = True
                    break
                digit = self._digit_partner(t, c, form)
                if digit is not None:
                    key, modulus = digit
                    wider = self.visit(E.FloorMod(t.a, E.const(modulus, t.dtype), t.dtype))
                    form = form.without([k, key]).add(self.parse(wider), c)
                    changed = True
                    break
        return form

    def _digit_partner(self, mod: E.FloorMod, c: int, form: LinearForm) -> tuple[int, int] | None:
        """(key, c1 * c2) for a term (x // c1) % c2 with coefficient c * c1 beside `mod` = x % c1
        (both divisors positive constants), or None."""
        if not isinstance(mod.b, E.IntImm) or mod.b.value <= 0:
            return None
        c1, kx = mod.b.value, self.key(mod.a)
        for key, (t, coeff) in form.terms.items():
            if (coeff == c * c1 and isinstance(t, E.FloorMod) and isinstance(t.b, E.IntImm) and t.b.value > 0
                    and isinstance(t.a, E.FloorDiv) and isinstance(t.a.b, E.IntImm) and t.a.b.value == c1
                    and t.dtype == mod.dtype and self.key(t.a.a) == kx):
                return key, c1 * t.b.value
        return None

    def _div_partner(self, mod: E.FloorMod, c: int, form: LinearForm) -> int | None:
        intern = self.interner
        div = intern.lookup(intern.binary_shape(E.FloorDiv, mod.dtype, mod.a, mod.b))
        if div is None:
            return None
        if isinstance(mod.b, E.IntImm):
            hit = form.terms.get(div)
            return div if hit is not None and hit[1] == c * mod.b.value else None
        kb = self.key(mod.b)
        for shape in ((E.Mul, mod.dtype, div, kb), (E.Mul, mod.dtype, kb, div)):
            k = intern.lookup(shape)
            if k is not None and k in form.terms and form.terms[k][1] == c:
                return k
        return None

    def _linear(self, e: E.BinaryOp) -> E.Expr:
        if is_index(e) and _same_dtype(e):
            return self.build(self.collect(e))
        return self._generic_binary(e)

    visit_Add = visit_Sub = visit_Mul = _linear

    def _generic_binary(self, e: E.BinaryOp) -> E.Expr:
        a, b = self.visit(e.a), self.visit(e.b)
        folded = self.fold(type(e), a, b, e.dtype)
        if folded is not None:
            return folded
        if a.dtype == e.dtype and isinstance(b, (E.IntImm, E.FloatImm)):
            if type(e) in (E.Mul, E.Div) and b.value == 1:
                return a
            if type(e) is E.Sub and b.value == 0 and not math.copysign(1.0, b.value) < 0:
                return a
            if type(e) is E.Add and dt.is_integer(e.dtype) and b.value == 0:
                return a
        return self.rebuild(e, a, b)

    visit_Div = _generic_binary

    def visit_FloorDiv(self, e: E.FloorDiv) -> E.Expr:
        return divmod_rules.visit(self, e)

    visit_FloorMod = visit_FloorDiv

    # -- Min / Max ------------------------------------------------------------------------------
    def _minmax(self, e: E.BinaryOp) -> E.Expr:
        a, b = self.visit(e.a), self.visit(e.b)
        folded = self.fold(type(e), a, b, e.dtype)
        if folded is not None:
            return folded
        if self.key(a) == self.key(b):
            return a
        if not (is_index(e) and a.dtype == b.dtype == e.dtype):
            return self.rebuild(e, a, b)
        is_min = type(e) is E.Min
        lo, hi = self.diff_bounds(a, b)
        if hi <= 0:
            return a if is_min else b
        if lo >= 0:
            return b if is_min else a
        if isinstance(a, E.IntImm) or (not isinstance(b, E.IntImm) and
                                       self.interner.sort_key(b) < self.interner.sort_key(a)):
            a, b = b, a  # canonical operand order: constant last
        if isinstance(b, E.IntImm) and type(a) is type(e) and isinstance(a.b, E.IntImm):
            inner = min(a.b.value, b.value) if is_min else max(a.b.value, b.value)
            return self.binary(type(e), a.a, E.IntImm(e.dtype, inner))
        return self.rebuild(e, a, b)

    visit_Min = visit_Max = _minmax

    # -- comparisons ------------------------------------------------------------------------------
    def _compare(self, e: E.BinaryOp) -> E.Expr:
        result = self.compare(type(e), self.visit(e.a), self.visit(e.b), e.dtype)
        if isinstance(result, E.BinaryOp) and type(result) is type(e) and result.a is e.a and result.b is e.b:
            return e
        return result

    visit_EQ = visit_NE = visit_LT = visit_LE = visit_GT = visit_GE = _compare

    def compare(self, cls: type, a: E.Expr, b: E.Expr, dtype: str) -> E.Expr:
        """Simplify the comparison cls(a, b) of simplified operands; `dtype` is its bool dtype."""
        folded = self.fold(cls, a, b, dtype)
        if folded is not None:
            return folded
        if not (is_index(a) and a.dtype == b.dtype):
            return cls(a, b, dtype)
        if cls in (E.GT, E.GE):  # a > b is b < a: one canonical direction
            cls, a, b = (E.LT if cls is E.GT else E.LE), b, a
        lo, hi = self.diff_bounds(a, b)
        verdict = _decide(cls, lo, hi)
        if verdict is not None:
            return E.IntImm(dtype, int(verdict))
        if not dt.is_int(a.dtype):
            return cls(a, b, dtype)
        return self._canonical_compare(cls, self.parse(a).add(self.parse(b), -1), dtype)

    def _canonical_compare(self, cls: type, d: LinearForm, dtype: str) -> E.Expr:
        # d op 0 written as P op N - k (P: positive terms, N: negated negative terms, k: constant);
        # a side with no terms takes the constant.  EQ/NE fix the sign of the first term.
        d = d.reduced()
        g = 0
        for _, c in d.terms.values():
            g = math.gcd(g, c)
        if g > 1:  # g*t + k op 0 with integer t: divide through, rounding k the exact way
            k = d.const
            if cls in (E.EQ, E.NE) and k % g:
                return E.IntImm(dtype, int(cls is E.NE))
            new_k = k // g if cls in (E.LT, E.EQ, E.NE) else -(-k // g)
            d = LinearForm(d.dtype, {key: (t, c // g) for key, (t, c) in d.terms.items()}, new_k)
        if cls in (E.EQ, E.NE):
            first = min(d.terms.values(), key=lambda tc: self.interner.sort_key(tc[0]))
            if first[1] < 0:
                d = d.scale(-1)
        pos = LinearForm(d.dtype, {k: v for k, v in d.terms.items() if v[1] > 0})
        neg = LinearForm(d.dtype, {k: (t, -c) for k, (t, c) in d.terms.items() if c < 0})
        if pos.is_const:
            lhs, rhs = LinearForm.constant(d.const, d.dtype), neg
        elif neg.is_const:
            lhs, rhs = pos, LinearForm.constant(-d.const, d.dtype)
        else:
            lhs, rhs = pos, neg.add(LinearForm.constant(d.const, d.dtype), -1)
        return cls(self.build(lhs), self.build(rhs), dtype)

    # -- logic ------------------------------------------------------------------------------------
    def _logic(self, e: E.BinaryOp) -> E.Expr:
        a, b = self.visit(e.a), self.visit(e.b)
        folded = self.fold(type(e), a, b, e.dtype)
        if folded is not None:
            return folded
        absorbing = 0 if type(e) is E.And else 1
        for x, y in ((a, b), (b, a)):
            if isinstance(x, E.IntImm) and x.dtype == e.dtype and y.dtype == e.dtype:
                return x if bool(x.value) == bool(absorbing) else y
        if self.key(a) == self.key(b) and a.dtype == e.dtype:
            return a
        return self.rebuild(e, a, b)

    visit_And = visit_Or = _logic

    def visit_Not(self, e: E.Not) -> E.Expr:
        a = self.visit(e.a)
        folded = fold_not(a)
        if folded is not None:
            return folded
        if isinstance(a, E.Not):
            return a.a
        if isinstance(a, E.Broadcast):
            return E.Broadcast(self.visit(E.Not(a.value)), a.lanes)
        inverse = _INVERSE.get(type(a))
        if inverse is not None and (dt.is_integer(a.a.dtype) or inverse in (E.EQ, E.NE)):
            return self.compare(inverse, a.a, a.b, a.dtype)
        return e if a is e.a else E.Not(a)

    # -- other nodes ------------------------------------------------------------------------------
    def visit_Select(self, e: E.Select) -> E.Expr:
        cond = self.visit(e.condition)
        if isinstance(cond, E.Broadcast) and isinstance(cond.value, E.IntImm):
            cond = cond.value
        if isinstance(cond, E.IntImm):
            return self.visit(e.true_value if cond.value else e.false_value)
        t, f = self.visit(e.true_value), self.visit(e.false_value)
        if self.key(t) == self.key(f):
            return t
        if cond is e.condition and t is e.true_value and f is e.false_value:
            return e
        return E.Select(cond, t, f)

    def visit_Cast(self, e: E.Cast) -> E.Expr:
        v = self.visit(e.value)
        if v.dtype == e.dtype:
            return v
        folded = fold_cast(e.dtype, v)
        if folded is not None:
            return folded
        if isinstance(v, E.Broadcast) and dt.lanes(e.dtype) == v.lanes:
            return E.Broadcast(self.visit(E.Cast(dt.element_of(e.dtype), v.value)), v.lanes)
        if (isinstance(v, E.Cast) and v.value.dtype == e.dtype and dt.is_integer(e.dtype)
                and dt.is_integer(v.dtype) and _holds(v.dtype, e.dtype)):
            return v.value  # widening then narrowing back is a no-op
        return e if v is e.value else E.Cast(e.dtype, v)

    def visit_Let(self, e: E.Let) -> E.Expr:
        value = self.visit(e.value)
        if isinstance(value, (E.IntImm, E.FloatImm, E.Var)):
            return self.visit(substitute(e.body, {e.var: value}))
        body = self.visit(e.body)
        if not uses_var(body, e.var):
            return body
        if value is e.value and body is e.body:
            return e
        return E.Let(e.var, value, body)

    def visit_Ramp(self, e: E.Ramp) -> E.Expr:
        return vector_rules.ramp(self, e)

    def visit_Broadcast(self, e: E.Broadcast) -> E.Expr:
        return vector_rules.broadcast(self, e)

    def visit_Reduce(self, e: E.Reduce) -> E.Expr:
        # The reduction axes are bound to their domains inside the reduction only, so a fresh
        # Simplifier (fresh memo) sees them.
        from .interval import Interval
        scope = {iv.var: Interval.from_range(iv.dom) for iv in e.axis if iv.dom is not None}
        with self.an.bound_scope(scope):
            inner = Simplifier(self.an)
            source = tuple(inner.visit(s) for s in e.source)
            cond = inner.visit(e.condition)
        if cond is e.condition and all(x is y for x, y in zip(source, e.source)):
            return e
        return dataclasses.replace(e, source=source, condition=cond)


def _decide(cls: type, lo, hi) -> bool | None:
    # The truth of (a - b) cls 0 given lo <= a - b <= hi, or None when it depends.
    if cls is E.LT:
        return True if hi < 0 else False if lo >= 0 else None
    if cls is E.LE:
        return True if hi <= 0 else False if lo > 0 else None
    if cls is E.EQ:
        return True if lo == hi == 0 else False if lo > 0 or hi < 0 else None
    if cls is E.NE:
        return False if lo == hi == 0 else True if lo > 0 or hi < 0 else None
    return None


def _holds(wide: str, narrow: str) -> bool:
    wlo, whi = int_range(wide)
    nlo, nhi = int_range(narrow)
    return wlo <= nlo and nhi <= whi
