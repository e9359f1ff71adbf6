"""Unrolling: a loop marked `unrolled` with a constant extent becomes copies of its body.

Loops whose extent is not a constant, or larger than `max_extent`, stay loops of kind `unrolled`
and the code generator asks the C compiler to unroll them.
"""
from __future__ import annotations

from ...arith.fold import fold_binary
from ...ir import expr as E
from ...ir.expr import IntImm, const
from ...ir.functor import Mutator
from .. import nodes as N

MAX_UNROLL = 128


class _Substitute(Mutator):
    """The loop variable replaced by a constant; a select whose condition becomes a constant
    comparison keeps only its chosen side.  (Templates pick per-position expressions with
    select chains on a loop index they unroll, e.g. the Winograd transforms: copying every side
    into every copy and leaving the choice to `simplify` cost most of their lowering time.)"""

    def __init__(self, var, value):
        self.var, self.value = var, value

    def visit_Var(self, node):
        return self.value if node is self.var else node

    def visit_Select(self, node: E.Select):
        cond = self.visit(node.condition)
        if isinstance(cond, E.BinaryOp) and isinstance(cond.a, IntImm) and isinstance(cond.b, IntImm):
            folded = fold_binary(type(cond), cond.a, cond.b, cond.dtype)
            if isinstance(folded, IntImm):
                return self.visit(node.true_value if folded.value else node.false_value)
        t, f = self.visit(node.true_value), self.visit(node.false_value)
        if cond is node.condition and t is node.true_value and f is node.false_value:
            return node
        return E.Select(cond, t, f)


class _Unroll(Mutator):
    def __init__(self, max_extent: int):
        self.max_extent = max_extent

    def visit_For(self, node: N.For):
        node = self.generic_visit(node)
        if node.kind != N.UNROLLED or not isinstance(node.extent, IntImm) or not isinstance(node.min, IntImm):
            return node
        if node.extent.value > self.max_extent:
            return node
        start = node.min.value
        return N.seq(*[_Substitute(node.loop_var, const(start + k, node.loop_var.dtype)).visit(node.body)
                       for k in range(node.extent.value)]) if node.extent.value > 0 else N.NOP


def unroll_loops(func: N.PrimFunc, max_extent: int = MAX_UNROLL) -> N.PrimFunc:
    return func.with_body(_Unroll(max_extent).visit(func.body))
