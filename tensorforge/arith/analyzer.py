"""The Analyzer: variable bindings plus the questions other passes ask about index expressions.

    an = Analyzer()
    an.bind(i, Range(0, 16))            # i in [0, 16)
    an.simplify((i * 4 + j) // 4)       # canonical form, using what is known about i and j
    an.const_int_bound(i * 2 + 1)       # (1, 31)
    an.can_prove(i < 16)                # True
    an.eval_interval(i * 4 + j, {j: Interval(0, 3)})   # Interval[i*4, i*4 + 3]

It owns the bindings (constant and symbolic intervals of variables) and the caches that depend on
them; the algorithms live in `simplifier.py`, `const_bound.py` and `int_set.py`.  The symbolic
prover: when constant bounds cannot decide, variables whose bound mentions other variables
(i in [0, n - 1]) are relaxed to those bounds and the result is bounded again, which proves
`n - i >= 1` without knowing n.
"""
from __future__ import annotations

import contextlib
import math
from typing import Any, Iterator

from ..ir import dtype as dt
from ..ir import expr as E
from ..ir.functor import free_vars
from .const_bound import INF, Bound, ConstBoundEval, dtype_bound
from .interval import Interval
from .recursion import deep_recursion

_RELAX_ROUNDS = 4


class Analyzer:
    """Bindings of variables to ranges, and simplification and proofs that use them."""

    def __init__(self) -> None:
        self._intervals: dict[E.Var, Interval] = {}
        self._consts: dict[E.Var, Bound] = {}
        self._symbolic: set[E.Var] = set()  # vars whose interval ends are not constants
        self._bound_cache: dict = {}
        self._var_cache: dict[E.Var, Bound] = {}
        self._in_progress: set[E.Var] = set()
        self._relaxing = 0

    # -- bindings ------------------------------------------------------------------------------
    def bind(self, var: E.Var, value: Any) -> None:
        """Declare the range of `var`: a Range [min, min+extent), an Interval [min, max], or a
        pair (lo, hi) of ints, inclusive, where None leaves a side unbounded.  Replaces an earlier
        binding of the same variable."""
        if not isinstance(var, E.Var):
            raise TypeError(f"Analyzer.bind expects a Var, got {type(var).__name__} {var!r}")
        self._forget(var)
        if isinstance(value, tuple) and len(value) == 2 and not isinstance(value[0], E.Expr):
            lo, hi = value
            self._consts[var] = (-INF if lo is None else int(lo), INF if hi is None else int(hi))
            if lo is not None and hi is not None:
                self._intervals[var] = Interval(E.const(int(lo), var.dtype),
                                                E.const(int(hi), var.dtype))
        else:
            if isinstance(value, E.Range):
                iv = Interval(self.simplify(value.min), self.simplify(value.min + value.extent - 1))
            elif isinstance(value, Interval):
                iv = Interval(self.simplify(value.min), self.simplify(value.max))
            elif isinstance(value, tuple) and len(value) == 2:
                iv = Interval(self.simplify(value[0]), self.simplify(value[1]))
            else:
                raise TypeError(f"cannot bind {var.name} to {value!r}: expected a Range, an "
                                "Interval or a (lo, hi) pair")
            self._intervals[var] = iv
            if not (isinstance(iv.min, E.IntImm) and isinstance(iv.max, E.IntImm)):
                self._symbolic.add(var)
        self._invalidate()

    def unbind(self, var: E.Var) -> None:
        """Forget what was declared about `var`."""
        self._forget(var)
        self._invalidate()

    @contextlib.contextmanager
    def bound_scope(self, bindings: dict) -> Iterator[None]:
        """Bind each var to its range for the duration of the block, then restore."""
        saved = [(v, self._intervals.get(v), self._consts.get(v), v in self._symbolic)
                 for v in bindings]
        for v, value in bindings.items():
            self.bind(v, value)
        try:
            yield
        finally:
            for v, iv, cb, sym in saved:
                self._forget(v)
                if iv is not None:
                    self._intervals[v] = iv
                if cb is not None:
                    self._consts[v] = cb
                if sym:
                    self._symbolic.add(v)
            self._invalidate()

    def _forget(self, var: E.Var) -> None:
        self._intervals.pop(var, None)
        self._consts.pop(var, None)
        self._symbolic.discard(var)

    def _invalidate(self) -> None:
        self._bound_cache = {}
        self._var_cache = {}

    # -- the questions -------------------------------------------------------------------------
    def simplify(self, expr: Any) -> E.Expr:
        """`expr` in canonical simplified form (same dtype, same value under the bindings)."""
        from .simplifier import Simplifier
        expr = E.convert(expr)
        with deep_recursion():
            return Simplifier(self).visit(expr)

    def const_int_bound(self, expr: Any) -> tuple[int | None, int | None]:
        """Inclusive constant bounds of an integer expression; None for an unbounded side."""
        lo, hi = self._bounds(E.convert(expr))
        return (None if math.isinf(lo) else int(lo), None if math.isinf(hi) else int(hi))

    def can_prove(self, cond: Any) -> bool:
        """True only when `cond` holds for every value the bound variables can take."""
        result = self.simplify(cond)
        if isinstance(result, E.Broadcast):
            result = result.value
        return isinstance(result, E.IntImm) and bool(result.value)

    def can_prove_equal(self, a: Any, b: Any) -> bool:
        """Whether `a` and `b` provably have the same value."""
        a, b = E.convert(a), E.convert(b)
        if dt.is_integer(a.dtype) and dt.is_integer(b.dtype):
            diff = self.simplify(a - b)
            return isinstance(diff, E.IntImm) and diff.value == 0
        from .structural import structural_equal
        return structural_equal(self.simplify(a), self.simplify(b))

    def eval_interval(self, expr: Any, dom: dict) -> Interval | None:
        """The interval of `expr` when each var in `dom` ranges over its Interval; other vars stay
        as they are.  None when the expression cannot be bounded (loads, calls...)."""
        from .int_set import IntervalEval
        expr = E.convert(expr)
        with deep_recursion():
            ends = IntervalEval(self, dom).eval(expr)
            if ends is None:
                return None
            return Interval(self.simplify(ends[0]), self.simplify(ends[1]))

    # -- bounds used by the simplifier ---------------------------------------------------------
    def _const_eval(self) -> ConstBoundEval:
        return ConstBoundEval(self._var_bound, self._bound_cache)

    def _var_bound(self, v: E.Var) -> Bound:
        hit = self._var_cache.get(v)
        if hit is not None:
            return hit
        lo, hi = dtype_bound(v.dtype)
        if v in self._consts:
            clo, chi = self._consts[v]
            lo, hi = max(lo, clo), min(hi, chi)
        iv = self._intervals.get(v)
        if iv is not None and v not in self._in_progress:
            self._in_progress.add(v)
            try:
                ev = self._const_eval()
                lo, hi = max(lo, ev.bound(iv.min)[0]), min(hi, ev.bound(iv.max)[1])
            finally:
                self._in_progress.discard(v)
        self._var_cache[v] = (lo, hi)
        return (lo, hi)

    def _bounds(self, expr: E.Expr) -> Bound:
        """Constant bounds (ints or +-INF); tightened by symbolic relaxation when needed."""
        with deep_recursion():
            lo, hi = self._const_eval().bound(expr)
        if not self._symbolic or self._relaxing or not (math.isinf(lo) or math.isinf(hi)):
            return lo, hi
        if not any(v in self._symbolic for v in free_vars(expr)):
            return lo, hi
        self._relaxing += 1
        try:
            with deep_recursion():
                if math.isinf(lo):
                    lo = max(lo, self._relaxed(expr, 0))
                if math.isinf(hi):
                    hi = min(hi, self._relaxed(expr, 1))
        finally:
            self._relaxing -= 1
        return lo, hi

    def _relaxed(self, expr: E.Expr, side: int):
        # Relax the symbolically bound vars of expr (repeatedly, as their bounds may mention more
        # of them), then take the constant bound of the resulting end.
        from .int_set import IntervalEval
        for _ in range(_RELAX_ROUNDS):
            dom = {v: self._intervals[v] for v in free_vars(expr) if v in self._symbolic}
            if not dom:
                break
            ends = IntervalEval(self, dom).eval(expr)
            if ends is None:
                return -INF if side == 0 else INF
            expr = self.simplify(ends[side])
        return self._const_eval().bound(expr)[side]


def simplify(expr: Any, analyzer: Analyzer | None = None) -> E.Expr:
    """Simplify `expr` with `analyzer`'s bindings (a fresh Analyzer knows nothing)."""
    return (analyzer if analyzer is not None else Analyzer()).simplify(expr)
