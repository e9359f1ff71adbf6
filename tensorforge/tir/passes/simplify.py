"""Loop-IR pass: simplify every expression of a PrimFunc and remove the statements that became
trivial (PrimFunc -> PrimFunc).

Walking down the statements, each For binds its loop variable to [min, min + extent) and each
LetStmt binds its variable to its value, so the expressions below are simplified with what the
loop nest guarantees (`i // 16 -> 0` inside `for i in range(16)`).  On the way back up:

* an IfThenElse whose condition is provably true or false becomes the branch that runs;
* a For of extent 1 becomes its body with the loop variable replaced by min (thread-bound loops
  stay: they define the launch shape);
* a For of extent <= 0, or whose body does nothing, disappears;
* nested SeqStmts are flattened and empty statements dropped; an Allocate, AttrStmt or LetStmt
  around nothing (or a LetStmt whose variable is unused) disappears, as does Evaluate(constant).

Loop kinds, thread tags and annotations of the loops that remain are kept; buffers are not
touched (other nodes refer to them by identity).
"""
from __future__ import annotations

import dataclasses

from ...arith import Analyzer, Interval
from ...ir import expr as E
from ...ir.expr import Range
from ...ir.functor import Mutator, post_order_visit, substitute, uses_var
from .. import nodes as N


def simplify(func: N.PrimFunc) -> N.PrimFunc:
    """`func` with simplified expressions and trivial statements removed."""
    analyzer = Analyzer()
    for v in func.shape_vars:  # symbolic dimensions are sizes
        analyzer.bind(v, (0, None))
    body = _StmtSimplifier(analyzer).visit(func.body)
    return func if body is func.body else func.with_body(body)


def _is_nop(s: N.Stmt) -> bool:
    return isinstance(s, N.SeqStmt) and not s.seq


class _StmtSimplifier(Mutator):
    """Statements are rebuilt here; every expression goes through the analyzer's simplifier."""

    def __init__(self, analyzer: Analyzer):
        self.an = analyzer

    def visit(self, node):
        if isinstance(node, E.Expr):
            return self.an.simplify(node)
        return super().visit(node)

    def visit_For(self, s: N.For) -> N.Stmt:
        lo, extent = self.an.simplify(s.min), self.an.simplify(s.extent)
        if self.an.can_prove(extent <= 0):
            return N.NOP
        if _is_one(extent) and s.kind != N.THREAD_BINDING:
            return self.visit(substitute(s.body, {s.loop_var: lo}))
        with self.an.bound_scope({s.loop_var: Range(lo, extent)}):
            body = self.visit(s.body)
        if _is_nop(body):
            return N.NOP
        if lo is s.min and extent is s.extent and body is s.body:
            return s
        return dataclasses.replace(s, min=lo, extent=extent, body=body)

    def visit_LetStmt(self, s: N.LetStmt) -> N.Stmt:
        value = self.an.simplify(s.value)
        scope: dict[E.Var, Interval | tuple[int | None, int | None]] = {}
        if E.is_const_int(value) or (_is_integer_scalar(value) and _is_pure_index(value)):
            scope[s.var] = Interval.point(value)
        elif _is_integer_scalar(value):
            lo, hi = self.an.const_int_bound(value)
            if lo is not None or hi is not None:
                scope[s.var] = (lo, hi)
        with self.an.bound_scope(scope):
            body = self.visit(s.body)
        if _is_nop(body) or not uses_var(body, s.var):
            return body
        if value is s.value and body is s.body:
            return s
        return N.LetStmt(s.var, value, body)

    def visit_IfThenElse(self, s: N.IfThenElse) -> N.Stmt:
        cond = self.an.simplify(s.condition)
        if isinstance(cond, E.IntImm):
            if cond.value:
                return self.visit(s.then_case)
            return N.NOP if s.else_case is None else self.visit(s.else_case)
        then = self.visit(s.then_case)
        other = None if s.else_case is None else self.visit(s.else_case)
        if other is not None and _is_nop(other):
            other = None
        if _is_nop(then):
            if other is None:
                return N.NOP
            return N.IfThenElse(self.an.simplify(E.Not(cond)), other)
        if cond is s.condition and then is s.then_case and other is s.else_case:
            return s
        return N.IfThenElse(cond, then, other)

    def visit_SeqStmt(self, s: N.SeqStmt) -> N.Stmt:
        parts = [self.visit(x) for x in s.seq]
        if all(p is x for p, x in zip(parts, s.seq)) and not any(
                isinstance(p, N.SeqStmt) for p in parts):
            return s
        kept = [p for p in parts if not _is_nop(p)]
        return N.seq(*kept) if kept else N.NOP

    def visit_Allocate(self, s: N.Allocate) -> N.Stmt:
        body = self.visit(s.body)
        if _is_nop(body):
            return N.NOP
        return s if body is s.body else N.Allocate(s.buffer, body)

    def visit_AttrStmt(self, s: N.AttrStmt) -> N.Stmt:
        value = self.an.simplify(s.value) if isinstance(s.value, E.Expr) else s.value
        body = self.visit(s.body)
        if _is_nop(body):
            return N.NOP
        if value is s.value and body is s.body:
            return s
        return N.AttrStmt(s.key, value, body)

    def visit_Evaluate(self, s: N.Evaluate) -> N.Stmt:
        value = self.an.simplify(s.value)
        if isinstance(value, (E.IntImm, E.FloatImm)):
            return N.NOP
        return s if value is s.value else N.Evaluate(value)


def _is_one(e: E.Expr) -> bool:
    return isinstance(e, E.IntImm) and e.value == 1


def _is_integer_scalar(e: E.Expr) -> bool:
    from ...ir import dtype as dt
    return dt.is_integer(e.dtype) and dt.lanes(e.dtype) == 1


def _is_pure_index(e: E.Expr) -> bool:
    # No loads or calls: the value cannot change between the let and its uses, so the variable
    # may stand for the expression in bounds.
    found = []

    def check(n):
        if isinstance(n, (N.BufferLoad, E.TensorLoad, E.Call, E.Reduce)):
            found.append(n)
    post_order_visit(e, check)
    return not found
