"""Loop partitioning: peel the tail iterations that need a guard, so the main body has none.

A split that does not divide leaves `if (xo * 16 + xi < 56)` inside the loops; the guard blocks
vectorization and costs a branch per iteration.  For each loop `o` with a constant extent and a
guard (an `if` without `else`) inside it that depends on `o`, binary search finds the largest k
such that the guard provably holds for every o in [min, min + k) (with the loops between `o` and
the guard at their ranges).  The loop becomes `for o in [min, min+k): body-without-guard` then
`for o in [min+k, end): body`; the head is partitioned again by the guards it still holds (two
non-dividing splits of one loop nest, say), so the first part of the loop has no guard at all.
A loop over a shape variable (a kernel for any size, shape_generic.py) is split at E // c when
its body holds a split's tail guard `o * c + r < E` with 0 <= r < c: the iterations below hold it
(`_symbolic_head`), so the vector loops of the head have no guard.
A parallel loop keeps its iterations in one parallel region, spread over the threads as before:
its body becomes `if (o < min + k) body-without-guard else body`, a branch per iteration outside
the loops inside.  (The column panels of a product whose right operand comes at run time are the
parallel loop: their tail guard inside the register tile ran a 100x160x196 product at a fortieth
of the speed of the split one.)

Clamps get the same treatment in serial loops: an integer `max(a, b)` or `min(a, b)` that depends
on the loop variable (an edge pad's `clamp(x - 1, 0, 111)` per lane) is one of its operands on a
middle range of the loop's iterations.  The loop is split into head, middle and tail, and the
middle's clamps are replaced by the operand they are there, so its indices are affine again and a
vectorized inner loop reads contiguous vectors instead of gathering (an edge pad of 64 x 112 x 112
with rows of 14 vectors: 3.3x ONNX Runtime's time gathering, 1.2x after).
Meaning is unchanged: a guard is only dropped where it is proven true, a clamp only replaced by the
operand it is proven to equal.
"""
from __future__ import annotations

from typing import cast

from ...arith import Analyzer
from ...arith.structural import structural_equal
from ...ir import dtype as dt
from ...ir.expr import LT, Expr, FloorDiv, IntImm, Max, Min, Range, const
from ...ir.functor import Mutator, Visitor, post_order_visit, substitute, uses_var
from .. import nodes as N

MAX_GUARDS_PER_LOOP = 4
MAX_CLAMPS_PER_LOOP = 8


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


class _Clamps(Visitor):
    """(min/max node, enclosing inner loops) for every integer Min/Max that uses `var`."""

    def __init__(self, var):
        self.var, self.path, self.found = var, [], []

    def visit_For(self, node: N.For) -> None:
        self.path.append(node)
        self.visit(node.body)
        self.path.pop()

    def _clamp(self, node) -> None:
        if dt.is_integer(node.dtype) and uses_var(node, self.var):
            self.found.append((node, list(self.path)))
        self.generic_visit(node)

    visit_Min = visit_Max = _clamp


def _loops(body, out: list) -> None:
    """Every For under `body`."""
    post_order_visit(body, lambda n: out.append(n) if isinstance(n, N.For) else None)


def _longest(n: int, ok) -> int:
    """The largest m in [0, n] with ok(m), for ok true up to some m and false after."""
    if ok(n):
        return n
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


class _Replace(Mutator):
    """Replace the given nodes (by identity) with their chosen operands."""

    def __init__(self, chosen: dict):
        self.chosen = chosen

    def visit(self, node):
        got = self.chosen.get(id(node))
        if got is not None:
            return self.visit(got)
        return super().visit(node)


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
        if node.kind == N.PARALLEL:
            return self._split_parallel(node)
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

    def _split_parallel(self, node: N.For):
        """A parallel loop with its body branched on the first guard that a prefix of its
        iterations provably passes (module docstring); its loops inside partitioned as usual."""
        head_body, end, last = None, 0, 0
        if isinstance(node.extent, IntImm) and isinstance(node.min, IntImm) and node.extent.value >= 2:
            last = node.min.value + node.extent.value
            found: list = []
            _guards(node.body, node.loop_var, [], found)
            found = found[:MAX_GUARDS_PER_LOOP]
            for guard, path in found:
                k = self._proven_prefix(node, guard, path)
                if 0 < k < node.extent.value:
                    # every guard the head's iterations pass goes (a panel's copy and its tile)
                    head_body, end = node.body, node.min.value + k
                    for other, other_path in found:
                        if other is guard or self._holds(node, other, other_path, k):
                            head_body = _DropGuard(other).visit(head_body)
                    break
        elif not isinstance(node.extent, IntImm) and isinstance(node.min, IntImm) and node.min.value == 0:
            head_body, end = self._symbolic_head(node)
        if head_body is None:
            self.outer.append(node)
            body = self.visit(node.body)
            self.outer.pop()
        elif not isinstance(end, int):
            # a loop over a shape variable (shape_generic.py): the head's vector loops inside
            # have no guard; the tail keeps it
            body = N.IfThenElse(node.loop_var < end, self.visit(head_body), self.visit(node.body))
        else:
            # the head's loops inside are partitioned knowing the loop variable is below `end`
            self.outer.append(N.For(node.loop_var, node.min, const(k), node.kind, head_body))
            head = self.visit(head_body)
            tail_body = node.body
            if last - end == 1:     # one tail iteration: its guards become constants (simplify drops them)
                tail_body = substitute(tail_body, {node.loop_var: const(end)})
            self.outer[-1] = N.For(node.loop_var, const(end), const(last - end), node.kind, tail_body)
            tail = self.visit(tail_body)
            self.outer.pop()
            body = N.IfThenElse(node.loop_var < end, head, tail)
        if body is node.body:
            return node
        return N.For(node.loop_var, node.min, node.extent, node.kind, body, node.thread_tag, node.annotations)

    def _symbolic_head(self, node: N.For) -> tuple:
        """(body without the guard, end) for a loop of symbolic extent from 0 whose body holds
        the tail guard of a split, `o * c + r < E` with 0 <= r < c over the loops inside and
        E not using o: the guard holds for o < E // c (o * c + r <= (E // c) * c - 1 < E).
        (None, 0) when there is no such guard."""
        found: list = []
        _guards(node.body, node.loop_var, [], found)
        o = node.loop_var
        for guard, path in found[:MAX_GUARDS_PER_LOOP]:
            cond = guard.condition
            if not isinstance(cond, LT) or uses_var(cond.b, o):
                continue
            an = Analyzer()
            step = an.simplify(substitute(cond.a, {o: o + 1}) - cond.a)
            if not isinstance(step, IntImm) or step.value < 1:
                continue
            rest = an.simplify(cond.a - o * step)
            if uses_var(rest, o):
                continue
            for f in path:
                an.bind(f.loop_var, Range(f.min, f.extent))
            lo, hi = an.const_int_bound(rest)
            if lo is None or hi is None or lo < 0 or hi >= step.value:
                continue
            # kept within the loop's own iterations, whatever the guard's bound (a split's loop
            # runs to ceil(E / c), never below E // c)
            end: Expr = FloorDiv(cond.b, step)
            if not structural_equal(an.simplify(node.extent), an.simplify((cond.b + (step.value - 1)) // step)):
                end = Min(end, node.extent)
            end = Max(end, const(0, node.extent.dtype))
            return _DropGuard(guard).visit(node.body), an.simplify(end)
        return None, 0

    def _split(self, node: N.For) -> list:
        if node.kind == N.THREAD_BINDING:
            return [node]
        if not isinstance(node.extent, IntImm):
            head_body, end = (None, 0) if not (isinstance(node.min, IntImm) and node.min.value == 0) \
                else self._symbolic_head(node)
            if head_body is None:
                return [node]
            head = N.For(node.loop_var, node.min, end, node.kind, head_body, node.thread_tag, node.annotations)
            tail = N.For(node.loop_var, end, node.extent - end, node.kind, node.body, node.thread_tag,
                         node.annotations)
            return [head, tail]
        if not isinstance(node.min, IntImm) or node.extent.value < 2:
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
        if node.kind == N.SERIAL and not found:
            return self._split_clamps(node)
        return [node]

    def _split_clamps(self, node: N.For) -> list:
        """Head, middle and tail of a serial loop whose middle iterations have each integer
        clamp equal to one operand (module docstring); [node] when there is no such middle."""
        # only a loop around vector (or unrolled) loops: each split copies its body, and nested
        # splits would multiply the copies
        inner: list = []
        _loops(node.body, inner)
        if any(f.kind not in (N.VECTORIZED, N.UNROLLED) for f in inner):
            return [node]
        clamps = _Clamps(node.loop_var)
        clamps.visit(node.body)
        found = clamps.found
        if not found or len(found) > MAX_CLAMPS_PER_LOOP:
            return [node]
        lo, n = cast(IntImm, node.min).value, cast(IntImm, node.extent).value
        start, end, chosen = lo, lo + n, {}
        for clamp, path in found:
            best = None
            for operand, other in ((clamp.a, clamp.b), (clamp.b, clamp.a)):
                cond = operand >= other if isinstance(clamp, Max) else operand <= other
                s_, e_ = self._proven_interval(node, cond, path)
                if e_ > s_ and (best is None or e_ - s_ > best[1] - best[0]):
                    best = (s_, e_, operand)
            if best is None:
                return [node]
            start, end = max(start, best[0]), min(end, best[1])
            chosen[id(clamp)] = best[2]
        if end - start < 2 or (start, end) == (lo, lo + n):
            return [node]
        middle = N.For(node.loop_var, const(start), const(end - start), node.kind, _Replace(chosen).visit(node.body),
                       node.thread_tag, node.annotations)
        parts = []
        if start > lo:
            parts.append(N.For(node.loop_var, const(lo), const(start - lo), node.kind, node.body, node.thread_tag,
                               node.annotations))
        parts.append(middle)
        if end < lo + n:
            parts.append(N.For(node.loop_var, const(end), const(lo + n - end), node.kind, node.body, node.thread_tag,
                               node.annotations))
        return parts

    def _proven_interval(self, loop: N.For, cond, path: list) -> tuple[int, int]:
        """The longest [s, e) within the loop's range, a prefix or a suffix of it, on which `cond`
        is proven (an affine comparison holds on one side of a point); (0, 0) if none."""
        lo, n = cast(IntImm, loop.min).value, cast(IntImm, loop.extent).value
        prefix = _longest(n, lambda m: self._proves(loop, cond, path, lo, lo + m))
        if prefix == n:
            return lo, lo + n
        suffix = _longest(n, lambda m: self._proves(loop, cond, path, lo + n - m, lo + n))
        if max(prefix, suffix) == 0:
            return 0, 0
        return (lo, lo + prefix) if prefix >= suffix else (lo + n - suffix, lo + n)

    def _holds(self, loop: N.For, guard: N.IfThenElse, path: list, k: int) -> bool:
        """Whether the guard is proven for loop_var in [min, min + k)."""
        lo = cast(IntImm, loop.min).value
        return self._proves(loop, guard.condition, path, lo, lo + k)

    def _proves(self, loop: N.For, cond, path: list, a: int, b: int) -> bool:
        """Whether `cond` is proven for loop_var in [a, b), the loops around it and the inner
        loops of `path` at their ranges."""
        an = Analyzer()
        for f in self.outer:
            an.bind(f.loop_var, Range(f.min, f.extent))
        an.bind(loop.loop_var, Range(const(a), const(b - a)))
        for f in path:
            an.bind(f.loop_var, Range(f.min, f.extent))
        return an.can_prove(cond)

    def _proven_prefix(self, loop: N.For, guard: N.IfThenElse, path: list) -> int:
        """Largest k with the guard proven for loop_var in [min, min + k)."""
        return _longest(cast(IntImm, loop.extent).value, lambda k: self._holds(loop, guard, path, k))


def partition_loops(func: N.PrimFunc) -> N.PrimFunc:
    return func.with_body(_Partition().visit(func.body))
