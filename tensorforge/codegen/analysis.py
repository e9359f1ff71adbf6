"""Small structural facts the C-family printers need about expressions and functions.

These are deliberately simple syntactic checks, not an arithmetic prover (that is `arith/`):
they must be *sound* (a "yes" is always true) and cheap; a "no" only costs a slower but
still correct piece of code (a floor-division helper instead of `/`, an unaligned instead of
an aligned vector load).
"""
from __future__ import annotations

from typing import Container

from ..ir import dtype as dt
from ..ir import expr as E
from ..ir.functor import Visitor, post_order_visit
from ..runtime.module import KernelSignature, ParamSpec
from ..tir import nodes as N


def is_nonneg(e: E.Expr, nonneg_vars: Container) -> bool:
    """Whether `e` is provably >= 0.

    Sound rules only: constants >= 0, unsigned values, variables the caller knows are >= 0
    (loop variables of loops starting at >= 0, shape variables, lets bound to such values),
    and sums, products, quotients, min/max, selects and widening casts built from those; a
    floor remainder by a value >= 0.  Anything else answers False.
    """
    if dt.is_uint(e.dtype) or dt.is_bool(e.dtype):
        return True
    if isinstance(e, E.IntImm):
        return e.value >= 0
    if isinstance(e, E.FloatImm):
        return False  # only integer division is printed differently
    if isinstance(e, E.Var):
        return e in nonneg_vars
    if isinstance(e, E.FloorMod):   # takes the divisor's sign (and x % 0 is 0)
        return is_nonneg(e.b, nonneg_vars)
    if isinstance(e, (E.Add, E.Mul, E.FloorDiv, E.Div, E.Min)):
        return is_nonneg(e.a, nonneg_vars) and is_nonneg(e.b, nonneg_vars)
    if isinstance(e, E.Max):
        return is_nonneg(e.a, nonneg_vars) or is_nonneg(e.b, nonneg_vars)
    if isinstance(e, E.Select):
        return is_nonneg(e.true_value, nonneg_vars) and is_nonneg(e.false_value, nonneg_vars)
    if isinstance(e, E.Cast):
        # A cast that keeps every value: to a wider integer type, or signed to the same width.
        if not (dt.is_integer(e.dtype) and dt.is_integer(e.value.dtype)):
            return False
        keeps = dt.bits(e.dtype) > dt.bits(e.value.dtype) or (
            dt.bits(e.dtype) == dt.bits(e.value.dtype) and dt.is_int(e.value.dtype))
        return keeps and is_nonneg(e.value, nonneg_vars)
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


def widenable(e: E.Expr, lane_vars: Container, loads_ok: bool) -> bool:
    """Whether the scalar integer or boolean expression `e` may be computed in a wider integer
    type than the IR's (see "Integer width" in c_like.py): the `lane_vars` occur in it only
    through sums, differences, products with a factor free of them, widening integer casts,
    comparisons and logical operators (`e` is affine in them), and, unless `loads_ok`, it reads
    no buffer."""
    return _widenable(e, lane_vars, loads_ok)[1]


def _widenable(e: E.Expr, lane_vars: Container, loads_ok: bool) -> tuple[bool, bool]:
    """(whether `e` mentions `lane_vars`, whether it is widenable)."""
    if isinstance(e, E.Var):
        return e in lane_vars, True
    if isinstance(e, (E.IntImm, E.FloatImm, E.StringImm)):
        return False, True
    if isinstance(e, (E.Add, E.Sub, E.Mul, E.CmpOp, E.Not)):
        operands = (e.a,) if isinstance(e, E.Not) else (e.a, e.b)
        parts = [_widenable(x, lane_vars, loads_ok) for x in operands]
        product_of_two = isinstance(e, E.Mul) and all(m for m, _ in parts)
        return any(m for m, _ in parts), all(ok for _, ok in parts) and not product_of_two
    if isinstance(e, E.Cast) and dt.is_integer(e.dtype) and dt.is_integer(e.value.dtype) \
            and dt.bits(e.dtype) >= dt.bits(e.value.dtype):
        return _widenable(e.value, lane_vars, loads_ok)
    mentions, loads = [False], [False]

    def scan(node):
        if isinstance(node, E.Var) and node in lane_vars:
            mentions[0] = True
        elif isinstance(node, N.BufferLoad):
            loads[0] = True
    post_order_visit(e, scan)
    return mentions[0], not mentions[0] and (loads_ok or not loads[0])


def plain_division_ok(a: E.Expr, b: E.Expr, nonneg_vars: Container) -> bool:
    """Whether integer floor division/modulo `a // b`, `a % b` may print as C's `/`, `%`: both
    operands are >= 0 (then truncation is floor) and the divisor is index arithmetic, not loaded
    data, so it cannot be a zero the caller passed in (the floor helpers map x / 0 to 0)."""
    return is_nonneg(a, nonneg_vars) and is_nonneg(b, nonneg_vars) and not _has_load(b)


def _has_load(e: E.Expr) -> bool:
    found = []
    post_order_visit(e, lambda n: found.append(n) if isinstance(n, N.BufferLoad) else None)
    return bool(found)


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


def kernel_signature(func: N.PrimFunc) -> KernelSignature:
    """What the runtime needs to check and call `func`'s compiled kernel."""
    params = tuple(ParamSpec(b.name, b.dtype, tuple(b.shape), written)
                   for b, written in zip(func.params, stored_params(func)))
    return KernelSignature(func.name, params, tuple(func.shape_vars))
