"""Test helpers for arith: a reference evaluator with exact Python integer semantics, and
hypothesis strategies for random integer index expressions over a few bound variables."""
from __future__ import annotations

from hypothesis import strategies as st

from tensorforge.ir import expr as E

_OPS = {
    E.Add: lambda a, b: a + b,
    E.Sub: lambda a, b: a - b,
    E.Mul: lambda a, b: a * b,
    E.FloorDiv: lambda a, b: a // b,
    E.FloorMod: lambda a, b: a % b,
    E.Min: min,
    E.Max: max,
    E.EQ: lambda a, b: int(a == b),
    E.NE: lambda a, b: int(a != b),
    E.LT: lambda a, b: int(a < b),
    E.LE: lambda a, b: int(a <= b),
    E.GT: lambda a, b: int(a > b),
    E.GE: lambda a, b: int(a >= b),
    E.And: lambda a, b: int(bool(a) and bool(b)),
    E.Or: lambda a, b: int(bool(a) or bool(b)),
}


def evaluate(e: E.Expr, env: dict):
    """The value of `e` (an int, or a list of ints for a vector) with the Vars of `env`.

    Integers are unbounded (no wrap-around): index arithmetic is assumed not to overflow."""
    if isinstance(e, E.Var):
        return env[e]
    if isinstance(e, (E.IntImm, E.FloatImm)):
        return e.value
    if isinstance(e, E.Ramp):
        base, stride = evaluate(e.base, env), evaluate(e.stride, env)
        return [base + i * stride for i in range(e.lanes)]
    if isinstance(e, E.Broadcast):
        return [evaluate(e.value, env)] * e.lanes
    if isinstance(e, E.Not):
        return _lanewise(lambda a: int(not a), evaluate(e.a, env))
    if isinstance(e, E.Select):
        cond = evaluate(e.condition, env)
        if isinstance(cond, list):
            t, f = evaluate(e.true_value, env), evaluate(e.false_value, env)
            return [x if c else y for c, x, y in zip(cond, t, f)]
        return evaluate(e.true_value if cond else e.false_value, env)
    if isinstance(e, E.Cast):
        return evaluate(e.value, env)
    if isinstance(e, E.Let):
        inner = dict(env)
        inner[e.var] = evaluate(e.value, env)
        return evaluate(e.body, inner)
    op = _OPS.get(type(e))
    if op is None:
        raise NotImplementedError(f"evaluate: {type(e).__name__}")
    a, b = evaluate(e.a, env), evaluate(e.b, env)
    if isinstance(a, list) or isinstance(b, list):
        n = len(a) if isinstance(a, list) else len(b)
        a = a if isinstance(a, list) else [a] * n
        b = b if isinstance(b, list) else [b] * n
        return [op(x, y) for x, y in zip(a, b)]
    return op(a, b)


def _lanewise(fn, x):
    return [fn(v) for v in x] if isinstance(x, list) else fn(x)


# ------------------------------------------------------------------------------------------------
# Random expressions

I, J, K, N = E.Var("i"), E.Var("j"), E.Var("k"), E.Var("n")
RANGES = {I: (0, 15), J: (0, 7), K: (-8, 8), N: (1, 20)}  # inclusive


def envs(ranges: dict = RANGES):
    """A strategy for one point inside `ranges`."""
    return st.fixed_dictionaries({v: st.integers(lo, hi) for v, (lo, hi) in ranges.items()})


def _c(v: int) -> E.Expr:
    return E.const(v, "int32")


_leaves = st.one_of(st.sampled_from([I, J, K, N]), st.integers(-12, 12).map(_c))


def _extend(children):
    pair = st.tuples(children, children)
    pos = st.integers(1, 9)
    return st.one_of(
        pair.map(lambda p: E.Add(*p)),
        pair.map(lambda p: E.Sub(*p)),
        st.tuples(children, st.integers(-6, 6)).map(lambda p: E.Mul(p[0], _c(p[1]))),
        st.tuples(st.integers(-6, 6), children).map(lambda p: E.Mul(_c(p[0]), p[1])),
        pair.map(lambda p: E.Mul(*p)),
        st.tuples(children, pos).map(lambda p: E.FloorDiv(p[0], _c(p[1]))),
        st.tuples(children, pos).map(lambda p: E.FloorMod(p[0], _c(p[1]))),
        st.tuples(children, st.integers(-4, -1)).map(lambda p: E.FloorDiv(p[0], _c(p[1]))),
        st.tuples(children, st.integers(-4, -1)).map(lambda p: E.FloorMod(p[0], _c(p[1]))),
        children.map(lambda x: E.FloorDiv(x, N)),
        children.map(lambda x: E.FloorMod(x, N)),
        st.tuples(children, pos).map(lambda p: E.FloorDiv(p[0], E.Add(N, _c(p[1])))),
        pair.map(lambda p: E.Min(*p)),
        pair.map(lambda p: E.Max(*p)),
        st.tuples(st.sampled_from([E.LT, E.LE, E.GT, E.GE, E.EQ, E.NE]), children, children,
                  children, children).map(lambda p: E.Select(p[0](p[1], p[2]), p[3], p[4])),
    )


int_exprs = st.recursive(_leaves, _extend, max_leaves=14)


def bool_exprs(children=int_exprs):
    """Comparisons of random integer expressions combined with And/Or/Not."""
    cmp = st.tuples(st.sampled_from([E.LT, E.LE, E.GT, E.GE, E.EQ, E.NE]), children,
                    children).map(lambda p: p[0](p[1], p[2]))
    return st.recursive(cmp, lambda c: st.one_of(
        st.tuples(c, c).map(lambda p: E.And(*p)),
        st.tuples(c, c).map(lambda p: E.Or(*p)),
        c.map(E.Not)), max_leaves=4)
