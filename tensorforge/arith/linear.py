"""Linear forms: an integer expression as `c1*t1 + c2*t2 + ... + k`, the simplifier's canonical
form.

The terms `t` are expressions the linear algebra does not look into (variables, products of two
non-constant expressions, floor divisions, loads...), numbered by an `Interner` so that like
terms collect.  Integer addition, subtraction and multiplication wrap modulo 2**bits, which is a
ring, so rewriting a sum into this form is exact in every integer dtype; coefficients are kept as
unbounded Python ints and reduced to the dtype when the form is turned back into an expression.

`to_expr` fixes the canonical printed order: terms with positive coefficients first, then the
negative ones, then the constant (`i*16 + j*4 + k - m - 3`); within each group larger magnitudes
first, plain variables before compound terms (`i + j // 4`), then by `Interner.sort_key`.
"""
from __future__ import annotations

from typing import Iterable

from ..ir import dtype as dt
from ..ir import expr as E
from .fold import int_range, signed_rep
from .structural import Interner


class LinearForm:
    """`sum(coeff * term) + const` in one integer dtype.  Treated as immutable once built."""

    __slots__ = ("dtype", "terms", "const")

    def __init__(self, dtype: str, terms: dict | None = None, const: int = 0):
        self.dtype = dtype
        self.terms: dict[int, tuple[E.Expr, int]] = terms if terms is not None else {}
        self.const = const

    @staticmethod
    def constant(value: int, dtype: str) -> "LinearForm":
        return LinearForm(dtype, {}, value)

    @staticmethod
    def atom(term: E.Expr, key: int, coeff: int = 1) -> "LinearForm":
        return LinearForm(term.dtype, {key: (term, coeff)} if coeff else {}, 0)

    @property
    def is_const(self) -> bool:
        return not self.terms

    def add(self, other: "LinearForm", scale: int = 1) -> "LinearForm":
        """self + scale * other."""
        terms = dict(self.terms)
        for k, (t, c) in other.terms.items():
            old = terms.get(k)
            c2 = (old[1] if old else 0) + scale * c
            if c2:
                terms[k] = (t, c2)
            elif old:
                del terms[k]
        return LinearForm(self.dtype, terms, self.const + scale * other.const)

    def scale(self, factor: int) -> "LinearForm":
        if factor == 0:
            return LinearForm(self.dtype, {}, 0)
        return LinearForm(self.dtype, {k: (t, c * factor) for k, (t, c) in self.terms.items()},
                          self.const * factor)

    def without(self, keys: Iterable[int]) -> "LinearForm":
        drop = set(keys)
        return LinearForm(self.dtype, {k: v for k, v in self.terms.items() if k not in drop},
                          self.const)

    def reduced(self) -> "LinearForm":
        """Coefficients and constant taken modulo 2**bits (as signed representatives)."""
        terms = {}
        for k, (t, c) in self.terms.items():
            c = signed_rep(c, self.dtype)
            if c:
                terms[k] = (t, c)
        return LinearForm(self.dtype, terms, signed_rep(self.const, self.dtype))

    def coeff_gcd(self) -> int:
        """gcd of all coefficients and the constant (0 for the zero form)."""
        from math import gcd
        g = abs(self.const)
        for _, c in self.terms.values():
            g = gcd(g, c)
        return g

    def single_term(self) -> tuple[E.Expr, int] | None:
        """(term, coeff) when the form is exactly `coeff * term`."""
        if self.const == 0 and len(self.terms) == 1:
            return next(iter(self.terms.values()))
        return None


def to_expr(form: LinearForm, interner: Interner) -> E.Expr:
    """The canonical expression of `form` (see the module docstring for the order)."""
    form = form.reduced()
    dtype = form.dtype
    items = [(t, c) for t, c in form.terms.values()]
    pos = _ordered([x for x in items if x[1] > 0], interner)
    neg = _ordered([x for x in items if x[1] < 0], interner)
    k = form.const
    result: E.Expr | None = None
    for t, c in pos:
        term = _scaled(t, c, dtype)
        result = term if result is None else E.Add(result, term)
    if result is None and neg and k > 0:
        result, k = _imm(k, dtype), 0
    for t, c in neg:
        if result is None:
            result = _leading_negative(t, c, dtype)
        else:
            result = _subtract(result, t, -c, dtype)
    if result is None:
        return _imm(k, dtype)
    if k > 0:
        result = E.Add(result, _imm(k, dtype))
    elif k < 0:
        result = _subtract(result, None, -k, dtype)
    return result


def _ordered(items: list, interner: Interner) -> list:
    # Larger magnitudes first, then plain variables, then by sort key.
    if len(items) < 2:
        return items
    return sorted(items, key=lambda x: (-abs(x[1]),) + _rank(x[0], interner))


def _rank(t: E.Expr, interner: Interner) -> tuple:
    # Plain variables before compound terms of the same coefficient: i + j // 4, not j // 4 + i.
    return (0 if isinstance(t, E.Var) else 1, interner.sort_key(t))


def _imm(value: int, dtype: str) -> E.IntImm:
    lo, hi = int_range(dtype)
    if not lo <= value <= hi:  # e.g. a negative constant in an unsigned type
        value &= (1 << dt.bits(dtype)) - 1
    return E.IntImm(dtype, value)


def _fits(value: int, dtype: str) -> bool:
    lo, hi = int_range(dtype)
    return lo <= value <= hi


def _scaled(t: E.Expr, c: int, dtype: str) -> E.Expr:
    return t if c == 1 else E.Mul(t, _imm(c, dtype))


def _subtract(result: E.Expr, t: E.Expr | None, magnitude: int, dtype: str) -> E.Expr:
    # result - magnitude*t (or - magnitude when t is None); magnitude > 0.  The magnitude of the
    # most negative coefficient does not fit the dtype: add the coefficient instead.
    if not _fits(magnitude, dtype):
        term = _imm(-magnitude, dtype) if t is None else _scaled(t, -magnitude, dtype)
        return E.Add(result, term)
    term = _imm(magnitude, dtype) if t is None else _scaled(t, magnitude, dtype)
    return E.Sub(result, term)


def _leading_negative(t: E.Expr, c: int, dtype: str) -> E.Expr:
    if dt.is_uint(dtype):
        return _subtract(_imm(0, dtype), t, -c, dtype)
    return E.Mul(t, _imm(c, dtype))


def parse(e: E.Expr, interner: Interner, memo: dict) -> LinearForm:
    """The linear form of an already simplified integer expression (no further simplification).

    Add, Sub and multiplication by a constant are looked through; everything else is a term.
    """
    hit = memo.get(id(e))
    if hit is not None:
        return hit[1]
    if isinstance(e, E.IntImm):
        form = LinearForm.constant(e.value, e.dtype)
    elif isinstance(e, (E.Add, E.Sub)) and e.a.dtype == e.dtype and e.b.dtype == e.dtype:
        form = parse(e.a, interner, memo).add(parse(e.b, interner, memo),
                                               1 if isinstance(e, E.Add) else -1)
    elif isinstance(e, E.Mul) and isinstance(e.b, E.IntImm) and e.a.dtype == e.dtype == e.b.dtype:
        form = parse(e.a, interner, memo).scale(e.b.value)
    elif isinstance(e, E.Mul) and isinstance(e.a, E.IntImm) and e.b.dtype == e.dtype == e.a.dtype:
        form = parse(e.b, interner, memo).scale(e.a.value)
    else:
        form = LinearForm.atom(e, interner.key(e))
    memo[id(e)] = (e, form)
    return form
