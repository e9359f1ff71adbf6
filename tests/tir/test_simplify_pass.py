"""The loop-IR simplify pass: hand-written input and expected PrimFuncs, compared structurally."""
from __future__ import annotations

import functools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tensorforge.arith import structural_equal
from tensorforge.ir import expr as E
from tensorforge.ir.expr import Var, const
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
    want = N.For(tx, const(0), const(1), N.THREAD_BINDING, store(tx), thread_tag="threadIdx.x")
    check(bound, want)


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


# -- randomized: the simplified program performs the same stores in the same order ---------------


_VARS = [Var(f"v{d}") for d in range(3)]
_BIN = {E.Add: lambda a, b: a + b, E.Sub: lambda a, b: a - b, E.Mul: lambda a, b: a * b,
        E.FloorDiv: lambda a, b: a // b, E.FloorMod: lambda a, b: a % b, E.Min: min, E.Max: max,
        E.LT: lambda a, b: int(a < b), E.LE: lambda a, b: int(a <= b),
        E.EQ: lambda a, b: int(a == b), E.NE: lambda a, b: int(a != b),
        E.GT: lambda a, b: int(a > b), E.GE: lambda a, b: int(a >= b),
        E.And: lambda a, b: int(bool(a and b)), E.Or: lambda a, b: int(bool(a or b))}


def _value(e, env):
    if isinstance(e, Var):
        return env[e]
    if isinstance(e, E.IntImm):
        return e.value
    if isinstance(e, E.Not):
        return int(not _value(e.a, env))
    if isinstance(e, E.Select):
        return _value(e.true_value if _value(e.condition, env) else e.false_value, env)
    return _BIN[type(e)](_value(e.a, env), _value(e.b, env))


def _run(s, env, trace):
    # Executes a statement over int "buffers", recording (buffer, index, value) of each store.
    if isinstance(s, N.SeqStmt):
        for x in s.seq:
            _run(x, env, trace)
    elif isinstance(s, N.For):
        lo = _value(s.min, env)
        for v in range(lo, lo + _value(s.extent, env)):
            _run(s.body, {**env, s.loop_var: v}, trace)
    elif isinstance(s, N.IfThenElse):
        if _value(s.condition, env):
            _run(s.then_case, env, trace)
        elif s.else_case is not None:
            _run(s.else_case, env, trace)
    elif isinstance(s, N.LetStmt):
        _run(s.body, {**env, s.var: _value(s.value, env)}, trace)
    elif isinstance(s, N.BufferStore):
        index = tuple(_value(i, env) for i in s.indices)
        trace.append((s.buffer.name, index, _value(s.value, env)))
    else:
        raise NotImplementedError(type(s).__name__)


@functools.lru_cache(maxsize=None)
def _exprs(depth: int):
    leaves = st.one_of(st.sampled_from(_VARS[:depth] or [const(0)]), st.integers(-6, 6).map(const))
    return st.recursive(leaves, lambda c: st.one_of(
        st.tuples(st.sampled_from([E.Add, E.Sub, E.Min, E.Max]), c, c).map(
            lambda p: p[0](p[1], p[2])),
        st.tuples(c, st.integers(-3, 4)).map(lambda p: E.Mul(p[0], const(p[1]))),
        st.tuples(st.sampled_from([E.FloorDiv, E.FloorMod]), c, st.integers(1, 5)).map(
            lambda p: p[0](p[1], const(p[2])))), max_leaves=6)


@functools.lru_cache(maxsize=None)
def _conds(depth: int):
    ex = _exprs(depth)
    cmp = st.tuples(st.sampled_from([E.LT, E.LE, E.GT, E.GE, E.EQ, E.NE]), ex, ex).map(
        lambda p: p[0](p[1], p[2]))
    return st.recursive(cmp, lambda c: st.one_of(
        st.tuples(st.sampled_from([E.And, E.Or]), c, c).map(lambda p: p[0](p[1], p[2])),
        c.map(E.Not)), max_leaves=3)


@st.composite
def _stmts(draw, depth: int = 0):
    loops = ["for"] * 3 if depth < 3 else []
    kind = draw(st.sampled_from(["store", "store", "if", "seq", "let"] + loops))
    if kind == "store":
        return N.BufferStore(A, draw(_exprs(depth)), (draw(_exprs(depth)),))
    if kind == "if":
        other = draw(st.one_of(st.none(), _stmts(depth)))
        return N.IfThenElse(draw(_conds(depth)), draw(_stmts(depth)), other)
    if kind == "seq":
        return N.SeqStmt(tuple(draw(st.lists(_stmts(depth), min_size=0, max_size=3))))
    if kind == "let":
        return N.LetStmt(x, draw(_exprs(depth)), draw(_stmts(depth)))
    lo, ext = draw(st.integers(-2, 2)), draw(st.integers(-1, 4))
    return N.For(_VARS[depth], const(lo), const(ext), N.SERIAL, draw(_stmts(depth + 1)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_stmts())
def test_simplified_programs_store_the_same_values(body):
    f = func(body)
    before, after = [], []
    _run(f.body, {}, before)
    _run(simplify(f).body, {}, after)
    assert before == after, f"{f}\n--- simplified:\n{simplify(f)}"
