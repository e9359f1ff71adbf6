"""Rules for the vector forms the vectorizer produces: Ramp(base, stride, lanes) and Broadcast.

    Broadcast(a) op Broadcast(b)          -> Broadcast(a op b)          (every op and dtype)
    Ramp(b, 0, n)                         -> Broadcast(b, n)
    Ramp(b, s, n) +- Broadcast(a)         -> Ramp(b +- a, s, n)         (integers)
    Ramp(b1, s1, n) +- Ramp(b2, s2, n)    -> Ramp(b1 +- b2, s1 +- s2, n)
    Ramp(b, s, n) * Broadcast(c)          -> Ramp(b*c, s*c, n)
    Ramp(b, s, n) // Broadcast(c)         -> Broadcast(b // c, n)   when all lanes share a quotient
    Ramp(b, s, n) % Broadcast(c)          -> Ramp(b % c, s, n)      under the same condition
    Ramp(b, s, n) < Broadcast(x)          -> Broadcast(True/False)  when both end lanes agree

Only integer ramps are rewritten: for floats, moving the broadcast operand into the base would
reassociate floating-point additions.  Lane i of a ramp is linear in i, so a monotone fact
(comparison, floor quotient) that holds at lanes 0 and n-1 holds at every lane.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir import dtype as dt
from ..ir import expr as E

if TYPE_CHECKING:
    from .simplifier import Simplifier

_ORDER = (E.LT, E.LE, E.GT, E.GE)


def ramp(s: "Simplifier", e: E.Ramp) -> E.Expr:
    base, stride = s.visit(e.base), s.visit(e.stride)
    if base is e.base and stride is e.stride and not _is_zero(stride):
        return e
    return _make_ramp(base, stride, e.lanes)


def broadcast(s: "Simplifier", e: E.Broadcast) -> E.Expr:
    value = s.visit(e.value)
    if e.lanes == 1:
        return value
    return e if value is e.value else E.Broadcast(value, e.lanes)


def _is_zero(x: E.Expr) -> bool:
    return isinstance(x, E.IntImm) and x.value == 0


def _make_ramp(base: E.Expr, stride: E.Expr, lanes: int) -> E.Expr:
    return E.Broadcast(base, lanes) if _is_zero(stride) else E.Ramp(base, stride, lanes)


def binary(s: "Simplifier", cls: type, a: E.Expr, b: E.Expr, dtype: str) -> E.Expr | None:
    """cls(a, b) rewritten by the rules above, or None when none applies."""
    if isinstance(a, E.Broadcast) and isinstance(b, E.Broadcast) and a.lanes == b.lanes:
        return E.Broadcast(s.binary(cls, a.value, b.value), a.lanes)
    if not (isinstance(a, E.Ramp) or isinstance(b, E.Ramp)):
        return None
    if a.dtype != b.dtype or not dt.is_integer(a.dtype):
        return None
    if cls in (E.Add, E.Sub):
        return _add_sub(s, cls, a, b)
    if cls is E.Mul:
        if isinstance(b, E.Ramp) and isinstance(a, E.Broadcast):
            a, b = b, a
        if isinstance(a, E.Ramp) and isinstance(b, E.Broadcast):
            return _make_ramp(s.binary(E.Mul, a.base, b.value), s.binary(E.Mul, a.stride, b.value),
                              a.lanes)
        return None
    if cls in (E.FloorDiv, E.FloorMod):
        return _divmod(s, cls, a, b)
    if cls in _ORDER:
        return _compare(s, cls, a, b, dtype)
    return None


def _parts(x: E.Expr) -> tuple[E.Expr, E.Expr] | None:
    # (base, stride) of a Ramp or of a Broadcast (stride 0).
    if isinstance(x, E.Ramp):
        return x.base, x.stride
    if isinstance(x, E.Broadcast):
        return x.value, E.IntImm(x.value.dtype, 0)
    return None


def _add_sub(s: "Simplifier", cls: type, a: E.Expr, b: E.Expr) -> E.Expr | None:
    pa, pb = _parts(a), _parts(b)
    if pa is None or pb is None:
        return None
    lanes = dt.lanes(a.dtype)
    return _make_ramp(s.binary(cls, pa[0], pb[0]), s.binary(cls, pa[1], pb[1]), lanes)


def _last_lane(s: "Simplifier", r: E.Ramp) -> E.Expr:
    steps = E.IntImm(r.stride.dtype, r.lanes - 1)
    return s.binary(E.Add, r.base, s.binary(E.Mul, r.stride, steps))


def _divmod(s: "Simplifier", cls: type, a: E.Expr, b: E.Expr) -> E.Expr | None:
    if not (isinstance(a, E.Ramp) and isinstance(b, E.Broadcast)):
        return None
    c = b.value
    if not (isinstance(c, E.IntImm) and c.value > 0 and isinstance(a.stride, E.IntImm)):
        return None
    first = s.binary(E.FloorDiv, a.base, c)
    last = s.binary(E.FloorDiv, _last_lane(s, a), c)
    if s.key(first) != s.key(last):
        return None
    if cls is E.FloorDiv:
        return E.Broadcast(first, a.lanes)
    return _make_ramp(s.binary(E.FloorMod, a.base, c), a.stride, a.lanes)


def _compare(s: "Simplifier", cls: type, a: E.Expr, b: E.Expr, dtype: str) -> E.Expr | None:
    ends = []
    for x in (a, b):
        if isinstance(x, E.Ramp):
            if not isinstance(x.stride, E.IntImm):
                return None
            ends.append((x.base, _last_lane(s, x)))
        elif isinstance(x, E.Broadcast):
            ends.append((x.value, x.value))
        else:
            return None
    scalar = dt.element_of(dtype)
    first = s.compare(cls, ends[0][0], ends[1][0], scalar)
    last = s.compare(cls, ends[0][1], ends[1][1], scalar)
    if isinstance(first, E.IntImm) and isinstance(last, E.IntImm) and first.value == last.value:
        return E.Broadcast(first, dt.lanes(dtype))
    return None
