"""Floor division and floor modulo of integer index expressions.

The rules, for a dividend in linear form `a = c*Q + R` (Q collects the parts of each coefficient
that are multiples of the constant divisor c > 0, and the constant's floor quotient):

    a // c  ->  Q + R // c          a % c  ->  R % c              (exact for every integer Q)
    R // c  ->  k,  R % c -> R - k*c    when R provably stays in one period [k*c, (k+1)*c)
    (g*R') // (g*c')  ->  R' // c'        (g*R') % (g*c')  ->  (R' % c') * g
    (x // a) // c  ->  x // (a*c)         (x % (c*m)) // c  ->  (x // c) % m
    (x % (c*m)) % c  ->  x % c
    (g*B + S) // (g*C)  ->  B // C      (g*B + S) % (g*C)  ->  (B % C)*g + S     when 0 <= S < g
        (a vector lane's index: (v*16 + lane) // 64 -> v // 4 for 0 <= lane < 16)

A symbolic divisor n gets the same treatment for terms that are multiples of n ((x*n + y) // n
-> x + y // n) and the one-period test (0 <= y < n gives y // n -> 0, y % n -> y).  Coefficients
keep their sign when split (5 -> 4 + 1, -5 -> -4 - 1) so that bounds on R stay tight; constants
are normalized into [0, c), which makes `x // c` and `x % c` use the same R and lets
`x//c*c + x%c -> x` (in `Simplifier.build`) find its pairs.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..ir import expr as E
from .fold import fold_binary
from .linear import LinearForm

if TYPE_CHECKING:
    from .simplifier import Simplifier


def visit(s: "Simplifier", e: E.BinaryOp) -> E.Expr:
    """Simplify a FloorDiv or FloorMod node."""
    from .simplifier import is_index
    a, b = s.visit(e.a), s.visit(e.b)
    folded = s.fold(type(e), a, b, e.dtype)
    if folded is not None:
        return folded
    if not (is_index(e) and a.dtype == b.dtype == e.dtype):
        return s.rebuild(e, a, b)
    result = floordiv(s, a, b) if type(e) is E.FloorDiv else floormod(s, a, b)
    if isinstance(result, E.BinaryOp) and type(result) is type(e) and result.a is e.a and result.b is e.b:
        return e
    return result


def floordiv(s: "Simplifier", a: E.Expr, b: E.Expr) -> E.Expr:
    """a // b for simplified integer operands of one dtype."""
    folded = fold_binary(E.FloorDiv, a, b, a.dtype)
    if folded is not None:
        return folded
    if isinstance(b, E.IntImm):
        c = b.value
        if c == 1:
            return a
        if c <= 0:
            return _by_bounds(s, E.FloorDiv, a, b)
        q, r = _split(s.parse(a), c)
        return s.build(q.add(_div_rest(s, r, c)))
    return _symbolic(s, E.FloorDiv, a, b)


def floormod(s: "Simplifier", a: E.Expr, b: E.Expr) -> E.Expr:
    """a % b for simplified integer operands of one dtype."""
    folded = fold_binary(E.FloorMod, a, b, a.dtype)
    if folded is not None:
        return folded
    if isinstance(b, E.IntImm):
        c = b.value
        if c == 1:
            return E.IntImm(a.dtype, 0)
        if c <= 0:
            return _by_bounds(s, E.FloorMod, a, b)
        _, r = _split(s.parse(a), c)
        return s.build(_mod_rest(s, r, c))
    return _symbolic(s, E.FloorMod, a, b)


def _trunc_div(k: int, c: int) -> int:
    q = abs(k) // c
    return q if k >= 0 else -q


def _split(form: LinearForm, c: int) -> tuple[LinearForm, LinearForm]:
    # form == c*q + r with each coefficient of r strictly inside (-c, c) and its constant in [0, c).
    q_terms, r_terms = {}, {}
    for key, (t, k) in form.terms.items():
        kq = _trunc_div(k, c)
        if kq:
            q_terms[key] = (t, kq)
        if k - kq * c:
            r_terms[key] = (t, k - kq * c)
    return (LinearForm(form.dtype, q_terms, form.const // c),
            LinearForm(form.dtype, r_terms, form.const % c))


def _one_period(s: "Simplifier", r: LinearForm, c: int) -> int | None:
    # k when k*c <= r < (k+1)*c for every value r can take, else None.
    lo, hi = s.bounds(s.build(r))
    if math.isinf(lo) or math.isinf(hi):
        return None
    k = lo // c
    return k if hi // c == k else None


def _div_rest(s: "Simplifier", r: LinearForm, c: int) -> LinearForm:
    # The linear form of r // c, where r has been reduced by _split.
    if r.is_const:
        return LinearForm.constant(r.const // c, r.dtype)
    k = _one_period(s, r, c)
    if k is not None:
        return LinearForm.constant(k, r.dtype)
    g = math.gcd(r.coeff_gcd(), c)
    if g > 1:
        reduced = LinearForm(r.dtype, {key: (t, k2 // g) for key, (t, k2) in r.terms.items()},
                             r.const // g)
        return s.parse(floordiv(s, s.build(reduced), E.IntImm(r.dtype, c // g)))
    parts = _small_rest(s, r, c)
    if parts is not None:
        g, big, _ = parts
        return s.parse(floordiv(s, s.build(big), E.IntImm(r.dtype, c // g)))
    single = r.single_term()
    if single is not None and single[1] == 1:
        t = single[0]
        if isinstance(t, E.FloorDiv) and isinstance(t.b, E.IntImm) and t.b.value > 0:
            return s.parse(floordiv(s, t.a, E.IntImm(r.dtype, t.b.value * c)))
        if (isinstance(t, E.FloorMod) and isinstance(t.b, E.IntImm) and t.b.value > 0
                and t.b.value % c == 0):
            inner = floordiv(s, t.a, E.IntImm(r.dtype, c))
            return s.parse(floormod(s, inner, E.IntImm(r.dtype, t.b.value // c)))
    return _atom(s, E.FloorDiv(s.build(r), E.IntImm(r.dtype, c)))


def _mod_rest(s: "Simplifier", r: LinearForm, c: int) -> LinearForm:
    # The linear form of r % c, where r has been reduced by _split.
    if r.is_const:
        return LinearForm.constant(r.const % c, r.dtype)
    k = _one_period(s, r, c)
    if k is not None:
        return r.add(LinearForm.constant(-k * c, r.dtype))
    g = math.gcd(r.coeff_gcd(), c)
    if g > 1:
        reduced = LinearForm(r.dtype, {key: (t, k2 // g) for key, (t, k2) in r.terms.items()},
                             r.const // g)
        inner = floormod(s, s.build(reduced), E.IntImm(r.dtype, c // g))
        return s.parse(inner).scale(g)
    parts = _small_rest(s, r, c)
    if parts is not None:
        g, big, small = parts
        return s.parse(floormod(s, s.build(big), E.IntImm(r.dtype, c // g))).scale(g).add(small)
    single = r.single_term()
    if single is not None and single[1] == 1:
        t = single[0]
        if isinstance(t, E.FloorMod) and isinstance(t.b, E.IntImm) and t.b.value % c == 0:
            return s.parse(floormod(s, t.a, E.IntImm(r.dtype, c)))
    return _atom(s, E.FloorMod(s.build(r), E.IntImm(r.dtype, c)))


def _small_rest(s: "Simplifier", r: LinearForm, c: int) -> tuple[int, LinearForm, LinearForm] | None:
    # (g, B, S) with r == g*B + S, g > 1 dividing c and 0 <= S < g provably, for the largest such
    # g among the common factors of c and r's coefficients; else None.
    candidates = sorted({math.gcd(abs(k), c) for _, k in r.terms.values()} - {1}, reverse=True)
    for g in candidates:
        big = {key: (t, k // g) for key, (t, k) in r.terms.items() if k % g == 0}
        if not big or len(big) == len(r.terms):
            continue
        small = LinearForm(r.dtype, {key: tk for key, tk in r.terms.items() if key not in big}, r.const % g)
        lo, hi = s.bounds(s.build(small))
        if 0 <= lo and hi < g:
            return g, LinearForm(r.dtype, big, r.const // g), small
    return None


def _atom(s: "Simplifier", t: E.Expr) -> LinearForm:
    return LinearForm.atom(t, s.key(t))


def _by_bounds(s: "Simplifier", cls: type, a: E.Expr, b: E.IntImm) -> E.Expr:
    # Division by a negative constant: only the one-period case is simplified.
    if b.value < 0:
        lo, hi = s.bounds(a)
        if not (math.isinf(lo) or math.isinf(hi)) and lo // b.value == hi // b.value:
            q = lo // b.value
            if cls is E.FloorDiv:
                return E.IntImm(a.dtype, q)
            return s.build(s.parse(a).add(LinearForm.constant(-q * b.value, a.dtype)))
    return cls(a, b)


def _symbolic(s: "Simplifier", cls: type, a: E.Expr, b: E.Expr) -> E.Expr:
    # Non-constant divisor b: terms of a that are multiples of b leave the division (exact for
    # any b != 0), and 0 <= rest < b provably removes it.
    dtype = a.dtype
    if isinstance(a, E.IntImm) and a.value == 0:
        return a
    kb = s.key(b)
    if s.key(a) == kb:
        return E.IntImm(dtype, 1 if cls is E.FloorDiv else 0)
    form = s.parse(a)
    quotient = LinearForm.constant(0, dtype)
    multiples = []
    for key, (t, k) in form.terms.items():
        if key == kb:
            quotient = quotient.add(LinearForm.constant(k, dtype))
            multiples.append(key)
        elif isinstance(t, E.Mul) and kb in (s.key(t.a), s.key(t.b)):
            other = t.b if s.key(t.a) == kb else t.a
            quotient = quotient.add(s.parse(other), k)
            multiples.append(key)
    rest = form.without(multiples)
    rest_expr = s.build(rest)
    if rest.is_const and rest.const == 0:
        zero = LinearForm.constant(0, dtype)
        return s.build(quotient if cls is E.FloorDiv else zero)
    if _within_divisor(s, rest_expr, b):
        return s.build(quotient) if cls is E.FloorDiv else rest_expr
    if cls is E.FloorMod:
        return E.FloorMod(rest_expr, b)
    return s.build(quotient.add(_atom(s, E.FloorDiv(rest_expr, b))))


def _within_divisor(s: "Simplifier", r: E.Expr, b: E.Expr) -> bool:
    # Whether r // b == 0 (equivalently r % b == r): r = y % b lies between 0 and b whatever the
    # sign of b; otherwise try to prove 0 <= r < b.
    if isinstance(r, E.FloorMod) and s.key(r.b) == s.key(b):
        return True
    return s.bounds(r)[0] >= 0 and s.diff_bounds(b, r)[0] >= 1
