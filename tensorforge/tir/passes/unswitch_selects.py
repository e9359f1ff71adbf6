"""Loop unswitching: a loop whose body chooses between values by a condition that does not change
inside the loop becomes an `if` over one copy of the loop per choice.

A concat chooses its source by the index along the concat axis: `c < 128 ? a[..] : c < 160 ?
b[..] : ...`.  Where the rows are the outer loop, the choice is the same for the whole row, but
inside the row's vector loop the C compiler if-converts the chain and loads every source for
every vector, then blends: a 12-way concat read twelve vectors to write one (DenseNet's
concatenations with their batch norm and ReLU took 8 ms of its 28, ONNX Runtime's concats 0.9).
Unswitched, each copy of the row loop reads its one source with contiguous vectors.

For each loop that is or holds a vectorized loop, top down, a select under it whose condition
reads only variables bound outside the loop (no loads: a loaded value could change inside it)
is hoisted: the loop becomes `if (cond) loop[select -> true side] else loop[select -> false
side]`, and each copy is searched again, so a chain of k choices gives k copies.  A loop whose
copies would exceed MAX_COPIES is left as it is.  Only the chosen side of a select was evaluated
before, and only its copy runs after: meaning is unchanged.
"""
from __future__ import annotations

from ...arith import structural_equal
from ...ir import expr as E
from ...ir.functor import Mutator, Visitor, post_order_visit, uses_var
from .. import nodes as N

MAX_COPIES = 64


def unswitch_selects(func: N.PrimFunc) -> N.PrimFunc:
    body = _Unswitch().visit(func.body)
    return func if body is func.body else func.with_body(body)


def _bound_inside(stmt) -> set:
    """Variables a statement binds (loop variables, lets) anywhere within it."""
    out: set = set()

    def fn(n) -> None:
        if isinstance(n, N.For):
            out.add(n.loop_var)
        elif isinstance(n, (N.LetStmt, E.Let)):
            out.add(n.var)
    post_order_visit(stmt, fn)
    return out


def _invariant(cond, inside: set) -> bool:
    """A condition of variables bound outside and constants only."""
    loads: list = []
    post_order_visit(cond, lambda n: loads.append(n) if isinstance(
        n, (E.TensorLoad, E.Call, N.BufferLoad, N.CallExtern)) else None)
    return not loads and not uses_var(cond, lambda v: v in inside)


class _FirstSelect(Visitor):
    """The first select in pre-order (outer choices before the ones they contain) whose condition
    `_invariant` allows."""

    def __init__(self, inside: set):
        self.inside = inside
        self.found: E.Expr | None = None

    def visit(self, node) -> None:
        if self.found is not None:
            return
        if isinstance(node, E.Select) and node.condition.dtype == "bool" and _invariant(node.condition, self.inside):
            self.found = node.condition
            return
        Visitor.visit(self, node)


def _first_select(stmt, inside: set):
    """The condition of the outermost select under `stmt` that `_invariant` allows, or None."""
    finder = _FirstSelect(inside)
    finder.visit(stmt)
    return finder.found


class _Decide(Mutator):
    """Each select on `cond` (or a structurally equal condition) replaced by the side `value`
    picks."""

    def __init__(self, cond, value: bool):
        self.cond, self.value = cond, value

    def visit_Select(self, node: E.Select):
        if node.condition is self.cond or structural_equal(node.condition, self.cond):
            return self.visit(node.true_value if self.value else node.false_value)
        return self.generic_visit(node)


def _vector_loop_within(loop: N.For) -> bool:
    found: list = []
    post_order_visit(loop, lambda n: found.append(n) if isinstance(n, N.For) and n.kind == N.VECTORIZED else None)
    return bool(found)


class _Unswitch(Mutator):
    def visit_For(self, node: N.For):
        if node.kind == N.THREAD_BINDING or not _vector_loop_within(node):
            return self.generic_visit(node)
        tree = _choices(node, _bound_inside(node), [0])
        return self.generic_visit(node) if tree is None or isinstance(tree, N.For) else self._build(tree)

    def _build(self, tree):
        """The `if` over the copies of a tree from `_choices`, each copy's inner loops visited."""
        if isinstance(tree, N.For):
            return self.generic_visit(tree)
        cond, then, other = tree
        return N.IfThenElse(cond, self._build(then), self._build(other))


def _choices(loop: N.For, inside: set, copies: list):
    """`loop` if no invariant select is left in it, else (cond, tree if cond, tree if not), or
    None once the copies (counted in `copies`) exceed MAX_COPIES."""
    cond = _first_select(loop.body, inside)
    if cond is None:
        copies[0] += 1
        return None if copies[0] > MAX_COPIES else loop
    then = _choices(_Decide(cond, True).visit(loop), inside, copies)
    other = None if then is None else _choices(_Decide(cond, False).visit(loop), inside, copies)
    return None if other is None else (cond, then, other)
