"""Randomized checks of arith against the reference evaluator: simplification keeps values,
bounds and intervals contain every sampled value, proofs are never wrong."""
from __future__ import annotations

from arith_helpers import RANGES, I, J, K, N, bool_exprs, envs, evaluate, int_exprs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tensorforge.arith import Analyzer, Interval, structural_equal
from tensorforge.ir import expr as E

SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def bound_analyzer() -> Analyzer:
    an = Analyzer()
    for v, r in RANGES.items():
        an.bind(v, r)
    return an


@SETTINGS
@given(int_exprs, st.lists(envs(), min_size=1, max_size=8))
def test_simplify_keeps_value_with_bindings(e, points):
    s = bound_analyzer().simplify(e)
    assert s.dtype == e.dtype
    for env in points:
        assert evaluate(s, env) == evaluate(e, env), (e, s, env)


WIDE = {I: (-40, 40), J: (-40, 40), K: (-40, 40), N: (1, 40)}


@SETTINGS
@given(int_exprs, st.lists(envs(WIDE), min_size=1, max_size=8))
def test_simplify_keeps_value_without_bindings(e, points):
    an = Analyzer()
    an.bind(N, (1, None))  # only what keeps the divisions defined
    s = an.simplify(e)
    for env in points:
        assert evaluate(s, env) == evaluate(e, env), (e, s, env)


@SETTINGS
@given(int_exprs)
def test_simplify_is_idempotent(e):
    an = bound_analyzer()
    once = an.simplify(e)
    twice = an.simplify(once)
    assert structural_equal(once, twice), (e, once, twice)


@SETTINGS
@given(int_exprs, st.lists(envs(), min_size=1, max_size=8))
def test_const_int_bound_contains_values(e, points):
    lo, hi = bound_analyzer().const_int_bound(e)
    for env in points:
        v = evaluate(e, env)
        assert (lo is None or lo <= v) and (hi is None or v <= hi), (e, lo, hi, env)


@SETTINGS
@given(bool_exprs(), st.lists(envs(), min_size=1, max_size=8))
def test_can_prove_is_sound(cond, points):
    an = bound_analyzer()
    proved, refuted = an.can_prove(cond), an.can_prove(E.Not(cond))
    assert not (proved and refuted)
    for env in points:
        v = evaluate(cond, env)
        assert not (proved and not v) and not (refuted and v), (cond, env)
        assert evaluate(an.simplify(cond), env) == v


@SETTINGS
@given(int_exprs, st.lists(envs(), min_size=1, max_size=8))
def test_eval_interval_contains_values(e, points):
    # j and k are relaxed to their ranges, i and n stay symbolic.
    an = Analyzer()
    an.bind(N, RANGES[N])
    iv = an.eval_interval(e, {J: Interval(0, 7), K: Interval(-8, 8)})
    if iv is None:
        return
    for env in points:
        v = evaluate(e, env)
        assert evaluate(iv.min, env) <= v <= evaluate(iv.max, env), (e, iv, env)


@SETTINGS
@given(int_exprs, st.lists(envs(), min_size=1, max_size=8))
def test_eval_interval_with_symbolic_bounds(e, points):
    # j ranges over [0, i] and k over [i - 8, i + n]: interval ends mention the unrelaxed i, n.
    an = bound_analyzer()
    iv = an.eval_interval(e, {J: Interval(0, I), K: Interval(I - 8, I + N)})
    if iv is None:
        return
    for env in points:
        env = dict(env)
        env[J] = min(env[J], env[I])
        env[K] = env[I] - 8 + abs(env[K]) % (env[N] + 9)
        v = evaluate(e, env)
        assert evaluate(iv.min, env) <= v <= evaluate(iv.max, env), (e, iv, env)


def _ramp_exprs():
    lanes = 4
    base = int_exprs
    vec = st.one_of(
        st.tuples(base, st.integers(-3, 3)).map(lambda p: E.Ramp(p[0], E.const(p[1]), lanes)),
        base.map(lambda x: E.Broadcast(x, lanes)))
    return st.recursive(vec, lambda c: st.one_of(
        st.tuples(c, c).map(lambda p: E.Add(*p)),
        st.tuples(c, c).map(lambda p: E.Sub(*p)),
        st.tuples(c, st.integers(-3, 3)).map(
            lambda p: E.Mul(p[0], E.Broadcast(E.const(p[1]), lanes))),
        st.tuples(c, st.integers(1, 8)).map(
            lambda p: E.FloorDiv(p[0], E.Broadcast(E.const(p[1]), lanes))),
        st.tuples(c, st.integers(1, 8)).map(
            lambda p: E.FloorMod(p[0], E.Broadcast(E.const(p[1]), lanes))),
        st.tuples(c, c).map(lambda p: E.Select(E.LT(p[0], p[1]), p[0], p[1]))), max_leaves=5)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_ramp_exprs(), st.lists(envs(), min_size=1, max_size=5))
def test_vector_simplify_keeps_lanes(e, points):
    s = bound_analyzer().simplify(e)
    assert s.dtype == e.dtype
    for env in points:
        assert evaluate(s, env) == evaluate(e, env), (e, s, env)


@SETTINGS
@given(st.integers(1, 12), st.integers(1, 12), st.integers(1, 5), st.integers(-3, 3),
       st.lists(envs(WIDE), min_size=1, max_size=8), st.booleans())
def test_reshape_digits_merge(c1, c2, c3, k, points, with_top):
    """x//c1%c2*c1*k + x%c1*k (+ x//(c1*c2)*(c1*c2)*k) -- the flat index of a reshape rebuilt
    digit by digit -- keeps its value for every x, and for a plain variable merges into
    x%(c1*c2)*k (into x*k)."""
    def digits(x):
        e = x // c1 % c2 * (c1 * k) + x % c1 * k
        return e + x // (c1 * c2) * (c1 * c2 * k) if with_top else e

    e = digits(I * c3 + J)
    s = Analyzer().simplify(e)
    for env in points:
        assert evaluate(s, env) == evaluate(e, env), (e, s, env)
    merged = Analyzer().simplify(digits(I))
    divmods = [t for t in _nodes(merged) if isinstance(t, (E.FloorMod, E.FloorDiv))]
    assert len(divmods) <= (0 if with_top or k == 0 else 1), merged


def _nodes(e: E.Expr) -> list:
    from tensorforge.ir.functor import post_order_visit
    found: list = []
    post_order_visit(e, found.append)
    return found
