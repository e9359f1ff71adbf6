"""The loop-IR simplify pass: hand-written input and expected PrimFuncs, compared structurally."""
from __future__ import annotations

from tensorforge.arith import structural_equal
from tensorforge.te import expr as E
from tensorforge.te.expr import Var, const
from tensorforge.tir import nodes as N
from tensorforge.tir.passes.simplify import simplify

i, j, x, n = Var("i"), Var("j"), Var("x"), Var("n")
A = N.Buffer("A", (64,), "float32")
B = N.Buffer("B", (64,), "float32")


def func(body: N.Stmt, shape_vars: tuple = ()) -> N.PrimFunc:
    return N.PrimFunc("f", (A, B), body, shape_vars)


def store(index, value=None) -> N.Stmt:
    return N.BufferStore(A, N.BufferLoad(B, (index,)) if value is None else value, (index,))


def loop(var, extent, body, kind=N.SERIAL, **kw) -> N.For:
    return N.For(var, const(0), E.convert(extent), kind, body, **kw)


def check(before: N.Stmt, after: N.Stmt, shape_vars: tuple = ()):
    got = simplify(func(before, shape_vars))
    want = func(after, shape_vars)
    assert structural_equal(got, want), f"got:\n{got}\nexpected:\n{want}"


def test_indices_use_loop_ranges():
    before = loop(i, 16, loop(j, 4, store((i * 4 + j) // 4 * 4 + (i * 4 + j) % 4)))
    after = loop(i, 16, loop(j, 4, store(i * 4 + j)))
    check(before, after)


def test_provable_conditions_keep_the_branch_that_runs():
    then, other = store(i), store(i + 16)
    check(loop(i, 16, N.IfThenElse(i < 16, then, other)), loop(i, 16, then))
    check(loop(i, 16, N.IfThenElse(i >= 16, then, other)), loop(i, 16, other))
    check(loop(i, 16, N.IfThenElse(i >= 16, then)), N.NOP)
    undecided = N.IfThenElse(i < 8, then, other)
    check(loop(i, 16, undecided), loop(i, 16, undecided))


def test_empty_then_branch_negates_the_condition():
    other = store(i)
    before = loop(i, 16, N.IfThenElse(i < 8, N.NOP, other))
    after = loop(i, 16, N.IfThenElse(E.LE(const(8), i), other))
    check(before, after)


def test_unit_loops_are_replaced_by_their_body():
    check(loop(i, 1, loop(j, 8, store(i * 8 + j))), loop(j, 8, store(j)))
    shifted = N.For(i, const(3), const(1), N.SERIAL, store(i + 1))
    check(shifted, store(const(4)))


def test_empty_loops_disappear():
    check(N.seq(loop(i, 0, store(i)), store(const(1))), store(const(1)))
    check(loop(i, n - n, store(i)), N.NOP)
    check(loop(i, 16, N.NOP), N.NOP)


def test_sequences_are_flattened_and_noops_dropped():
    s1, s2, s3 = store(const(1)), store(const(2)), store(const(3))
    before = N.SeqStmt((s1, N.SeqStmt((N.NOP, s2, N.Evaluate(const(0)))), N.SeqStmt((s3,))))
    check(before, N.SeqStmt((s1, s2, s3)))


def test_loop_kind_annotations_and_thread_tags_are_kept():
    body = store(i * 2 - i)
    before = N.For(i, const(0), const(8), N.PARALLEL, body, annotations=(("pragma_x", 1),))
    after = N.For(i, const(0), const(8), N.PARALLEL, store(i), annotations=(("pragma_x", 1),))
    check(before, after)
    tx = Var("threadIdx.x")
    bound = N.For(tx, const(0), const(1), N.THREAD_BINDING, store(tx + 0), thread_tag="threadIdx.x")
    check(bound, N.For(tx, const(0), const(1), N.THREAD_BINDING, store(tx), thread_tag="threadIdx.x"))


def test_let_bounds_are_used():
    body = N.IfThenElse(x < 5, store(x))
    before = loop(j, 4, N.LetStmt(x, j + 1, body))
    after = loop(j, 4, N.LetStmt(x, j + 1, store(x)))
    check(before, after)
    check(loop(j, 4, N.LetStmt(x, j + 1, store(j))), loop(j, 4, store(j)))  # unused let


def test_symbolic_extents():
    before = loop(i, n, N.IfThenElse(i < n, store(i), store(const(0))))
    check(before, loop(i, n, store(i)), shape_vars=(n,))
    check(N.IfThenElse(n >= 0, store(const(0))), store(const(0)), shape_vars=(n,))


def test_allocate_and_attr_around_nothing_disappear():
    tmp = N.Buffer("tmp", (4,), "float32", scope=N.LOCAL)
    check(N.Allocate(tmp, loop(i, 0, store(i))), N.NOP)
    check(N.AttrStmt("pragma", 1, N.NOP), N.NOP)
    kept = N.AttrStmt("pragma", 1, store(const(1)))
    check(kept, kept)


def test_unchanged_function_is_returned_as_is():
    f = func(loop(i, 16, store(i)))
    assert simplify(f) is f
