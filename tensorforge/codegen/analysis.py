"""Small structural facts the C-family printers need about expressions and functions.

These are deliberately simple syntactic checks, not an arithmetic prover (that is `arith/`):
they must be *sound* (a "yes" is always true) and cheap; a "no" only costs a slower but
still correct piece of code (a floor-division helper instead of `/`, an unaligned instead of
an aligned vector load).
"""
from __future__ import annotations

from typing import Container

from ..te import dtype as dt
from ..te import expr as E
from ..tir import nodes as N
from ..tir.functor import Visitor


def is_nonneg(e: E.Expr, nonneg_vars: Container) -> bool:
    """Whether `e` is provably >= 0.

    Sound rules only: constants >= 0, unsigned values, variables the caller knows are >= 0
    (loop variables of loops starting at >= 0, shape variables, lets bound to such values),
    and sums, products, quotients, remainders, min/max, selects and widening casts built from
    those.  Anything else answers False.
    """
    if dt.is_uint(e.dtype) or dt.is_bool(e.dtype):
        return True
    if isinstance(e, E.IntImm):
        return e.value >= 0
    if isinstance(e, E.FloatImm):
        return False  # only integer division is printed differently
    if isinstance(e, E.Var):
        return e in nonneg_vars
    if isinstance(e, (E.Add, E.Mul, E.FloorDiv, E.FloorMod, E.Div, E.Min)):
        return is_nonneg(e.a, nonneg_vars) and is_nonneg(e.b, nonneg_vars)
    if isinstance(e, E.Max):
        return is_nonneg(e.a, nonneg_vars) or is_nonneg(e.b, nonneg_vars)
    if isinstance(e, E.Select):
        return is_nonneg(e.true_value, nonneg_vars) and is_nonneg(e.false_value, nonneg_vars)
    if isinstance(e, E.Cast):
        # A cast to an integer type at least as wide keeps the value.
        return (dt.is_integer(e.dtype) and dt.is_integer(e.value.dtype)
                and dt.bits(e.dtype) >= dt.bits(e.value.dtype) and is_nonneg(e.value, nonneg_vars))
    if isinstance(e, E.Ramp):
        return is_nonneg(e.base, nonneg_vars) and is_nonneg(e.stride, nonneg_vars)
    if isinstance(e, E.Broadcast):
        return is_nonneg(e.value, nonneg_vars)
    if isinstance(e, E.Let):
        return is_nonneg(e.body, _With(nonneg_vars, e.var, is_nonneg(e.value, nonneg_vars)))
    return False


class _With:
    """`nonneg_vars` plus (or minus) one let-bound variable, without copying the set."""

    def __init__(self, inner: Container, var: E.Var, nonneg: bool):
        self.inner, self.var, self.nonneg = inner, var, nonneg

    def __contains__(self, v) -> bool:
        if v is self.var:
            return self.nonneg
        return v in self.inner


def is_multiple_of(e: E.Expr, k: int) -> bool:
    """Whether the integer expression `e` is provably a multiple of the positive integer `k`."""
    if k == 1:
        return True
    if isinstance(e, E.IntImm):
        return e.value % k == 0
    if isinstance(e, (E.Add, E.Sub)):
        return is_multiple_of(e.a, k) and is_multiple_of(e.b, k)
    if isinstance(e, E.Mul):
        return is_multiple_of(e.a, k) or is_multiple_of(e.b, k)
    if isinstance(e, E.Cast) and dt.is_integer(e.dtype) and dt.is_integer(e.value.dtype):
        return dt.bits(e.dtype) >= dt.bits(e.value.dtype) and is_multiple_of(e.value, k)
    return False


def const_int(e: E.Expr) -> int | None:
    return e.value if isinstance(e, E.IntImm) else None


class _StoreCollector(Visitor):
    def __init__(self):
        self.vars: set = set()    # data Vars of stored buffers
        self.names: set = set()   # and their names, for Buffer objects rebuilt by a pass

    def visit_BufferStore(self, node: N.BufferStore) -> None:
        self.vars.add(node.buffer.data)
        self.names.add(node.buffer.name)
        self.generic_visit(node)


def stored_params(func: N.PrimFunc) -> tuple[bool, ...]:
    """For each parameter buffer of `func`, whether the body writes to it."""
    collector = _StoreCollector()
    collector.visit(func.body)
    return tuple(b.data in collector.vars or b.name in collector.names for b in func.params)
