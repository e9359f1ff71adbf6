"""Pick the form of each cross-thread reduction for the device: within warps, or a shared-memory
tree.

tir/allreduce.py writes every reduction over n threads as a shared-memory tree, annotated
(`WARP_ATTR`) with the same reduction written for each warp width that divides n.  A backend
whose device reduces within a warp runs this pass with a `WarpLowering`: where the annotation
has a form for the device's width and the lowering can combine the reduction's values, that
form replaces the tree and its three placeholder calls become the device's code (shuffles,
sub-group built-ins); otherwise the tree stays.  Without a lowering every annotation is dropped
and the tree stays.  Either way the reduction computes the same value.

Runs first of the backend's passes (phase "after_lowering"), so every later pass sees only the
chosen form.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ...ir.expr import CommReducer, Expr, Var
from ...ir.functor import Mutator
from .. import nodes as N
from ..allreduce import WARP_ATTR, WARP_INDEX, WARP_LANE, WARP_REDUCE, WarpForms


@dataclass(frozen=True)
class WarpLowering:
    """How a device reduces within a warp of `width` threads.

    reduce(combiner, dtype, var, value, body) -> the statement binding `var` to the warp's
        combination of `value` (every lane gets it) around `body`, or None when the device cannot
        combine this reducer or dtype;
    lane(t), index(t): thread t's lane in its warp and its warp's index, as expressions.
    """

    width: int
    reduce: Callable[[CommReducer, str, Var, Expr, N.Stmt], N.Stmt | None]
    lane: Callable[[Expr], Expr]
    index: Callable[[Expr], Expr]


def select_allreduce(func: N.PrimFunc, warp: WarpLowering | None = None) -> N.PrimFunc:
    body = _Select(warp).visit(func.body)
    return func if body is func.body else N.PrimFunc(func.name, func.params, body, func.shape_vars)


class _Select(Mutator):
    def __init__(self, warp: WarpLowering | None):
        self.warp = warp

    def visit_AttrStmt(self, s: N.AttrStmt) -> N.Stmt:
        if s.key != WARP_ATTR:
            return self.generic_visit(s)
        forms: WarpForms = s.value
        form = forms.form(self.warp.width) if self.warp is not None else None
        if form is not None and self.warp is not None:
            lower = _Lower(self.warp, forms)
            lowered = lower.visit(form)
            if not lower.failed:
                return lowered
        return self.visit(s.body)


class _Lower(Mutator):
    """The placeholders of one warp form -> the device's code (`failed` when it cannot reduce)."""

    def __init__(self, warp: WarpLowering, forms: WarpForms):
        self.warp, self.forms = warp, forms
        self.failed = False

    def visit_LetStmt(self, s: N.LetStmt) -> N.Stmt:
        v = s.value
        if isinstance(v, N.CallExtern) and v.name == WARP_REDUCE:
            body = self.generic_visit(s.body)
            lowered = self.warp.reduce(self.forms.combiner, self.forms.dtype, s.var, v.args[0], body)
            if lowered is None:
                self.failed = True
                return s
            return lowered
        return self.generic_visit(s)

    def visit_CallExtern(self, e: N.CallExtern) -> Expr:
        if e.name == WARP_LANE:
            return self.warp.lane(e.args[0])
        if e.name == WARP_INDEX:
            return self.warp.index(e.args[0])
        return self.generic_visit(e)
