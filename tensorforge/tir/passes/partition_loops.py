"""Loop partitioning: peel the tail iterations that need a guard, so the main body has none.

A split that does not divide leaves `if (xo * 16 + xi < 56)` inside the loops; the guard blocks
vectorization and costs a branch per iteration.  For each loop `o` with a constant extent and a
guard (an `if` without `else`) inside it that depends on `o`, binary search finds the largest k
such that the guard provably holds for every o in [min, min + k) (with the loops between `o` and
the guard at their ranges).  The loop becomes `for o in [min, min+k): body-without-guard` then
`for o in [min+k, end): body`; the head is partitioned again by the guards it still holds (two
non-dividing splits of one loop nest, say), so the first part of the loop has no guard at all.
Meaning is unchanged: a guard is only dropped where it is proven true.
"""
from __future__ import annotations

from typing import cast

from ...arith import Analyzer
from ...ir.expr import IntImm, Range, const
from ...ir.functor import Mutator, uses_var
from .. import nodes as N

MAX_GUARDS_PER_LOOP = 4


def _guards(body: N.Stmt, var, path: list, out: list) -> None:
    """(guard, enclosing inner loops) for every `if` under `body` whose condition uses `var`."""
    if isinstance(body, N.IfThenElse):
        if body.else_case is None and uses_var(body.condition, var):
            out.append((body, list(path)))
        _guards(body.then_case, var, path, out)
        if body.else_case is not None:
            _guards(body.else_case, var, path, out)
    elif isinstance(body, N.For):
        _guards(body.body, var, path + [body], out)
    elif isinstance(body, N.SeqStmt):
        for s in body.seq:
            _guards(s, var, path, out)
    elif isinstance(body, (N.Allocate, N.LetStmt, N.AttrStmt)):
        _guards(body.body, var, path, out)


class _DropGuard(Mutator):
    def __init__(self, guard: N.IfThenElse):
        self.guard = guard

    def visit_IfThenElse(self, node):
        if node is self.guard:
            return self.visit(node.then_case)
        return self.generic_visit(node)


class _Partition(Mutator):
    def __init__(self):
        self.outer: list[N.For] = []

    def visit_For(self, node: N.For):
        # outer loops first: peeling the outer loop leaves the inner loops of the main part guard-free
        parts = self._split(node)
        out = []
        for part in parts:
            self.outer.append(part)
            body = self.visit(part.body)
            self.outer.pop()
            if body is not part.body:
                part = N.For(part.loop_var, part.min, part.extent, part.kind, body, part.thread_tag,
                             part.annotations)
            out.append(part)
        return N.seq(*out)

    def _split(self, node: N.For) -> list:
        if not isinstance(node.extent, IntImm) or not isinstance(node.min, IntImm) or node.extent.value < 2:
            return [node]
        if node.kind in (N.THREAD_BINDING, N.PARALLEL):
            return [node]
        found: list = []
        _guards(node.body, node.loop_var, [], found)
        for guard, path in found[:MAX_GUARDS_PER_LOOP]:
            k = self._proven_prefix(node, guard, path)
            if 0 < k < node.extent.value:
                lo = node.min.value
                head = N.For(node.loop_var, const(lo), const(k), node.kind, _DropGuard(guard).visit(node.body),
                             node.thread_tag, node.annotations)
                tail = N.For(node.loop_var, const(lo + k), const(node.extent.value - k), node.kind, node.body,
                             node.thread_tag, node.annotations)
                # the head may still hold guards that fail in its last iterations (a second split
                # that does not divide): peel those too, so that the main part has none
                return self._split(head) + [tail]
        return [node]

    def _proven_prefix(self, loop: N.For, guard: N.IfThenElse, path: list) -> int:
        """Largest k with the guard proven for loop_var in [min, min + k)."""
        def holds(k: int) -> bool:
            an = Analyzer()
            for f in self.outer:
                an.bind(f.loop_var, Range(f.min, f.extent))
            an.bind(loop.loop_var, Range(loop.min, const(k)))
            for f in path:
                an.bind(f.loop_var, Range(f.min, f.extent))
            return an.can_prove(guard.condition)

        lo, hi = 0, cast(IntImm, loop.extent).value  # _split checked that the extent is a constant
        if holds(hi):
            return hi
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if holds(mid):
                lo = mid
            else:
                hi = mid - 1
        return lo


def partition_loops(func: N.PrimFunc) -> N.PrimFunc:
    return func.with_body(_Partition().visit(func.body))
