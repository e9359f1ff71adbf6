"""Inlining binds a producer its reader loads several times at the same indices, counted through
the whole expansion (tir/build.py's _InlineExpander): separate Max nodes fused into one kernel,
chains of activations that read their input twice, and diamonds (SiLU as x * sigmoid(x), two
nodes) grew as 3^n and 2^n (eight chained Max nodes printed 600 KB of C; twelve HardSwish nodes
compiled for minutes).  The values stay NumPy's, and a load that only a branch of a Select
evaluates is not moved out of it."""
from __future__ import annotations

import numpy as np
import pytest

import tensorforge
from tensorforge import te
from tensorforge.graph.builder import GraphBuilder
from tensorforge.testing import check_schedule


def _chain(op: str, n: int, arrays: list) -> tensorforge.Module:
    b = GraphBuilder("chain")
    xs = [b.input(f"x{k}", a.shape, "float32") for k, a in enumerate(arrays)]
    y = xs[0]
    for k in range(n):
        y = b.add1(op, [y, xs[k + 1]] if len(xs) > 1 else [y])
    return tensorforge.compile(b.finish([y]), target="c")


@pytest.mark.parametrize("op, ref", [("maximum", np.maximum), ("minimum", np.minimum)])
def test_separate_max_and_min_nodes_chained(op, ref):
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal((5, 24)).astype(np.float32) for _ in range(13)]
    arrays[2][1, 1] = np.nan
    arrays[12][3, 7] = np.nan
    sizes = {}
    for n in (4, 12):
        model = _chain(op, n, arrays[:n + 1])
        want = arrays[0]
        for a in arrays[1:n + 1]:
            want = ref(want, a)
        (got,) = model(*arrays[:n + 1])
        np.testing.assert_array_equal(got, want)
        sizes[n] = len(model.source)
    assert sizes[12] < 4 * sizes[4]          # linear in n (it was 3^8 times larger)


def _hard_swish(x):
    return x * np.clip(x + 3, 0, 6) / 6


def _gelu(x):
    from scipy.special import erf
    return 0.5 * x * (1 + erf(x / np.sqrt(2)))


def _check_linear_growth(build, x: np.ndarray, step) -> None:
    """build(n) for n = 4 and 12 computes `step` applied n times to x (checked in float64), and the
    source printed for 12 is less than 4x that for 4 (it was 2^8 to 3^8 times larger)."""
    sizes = {}
    for n in (4, 12):
        model = build(n)
        want = x.astype(np.float64)
        for _ in range(n):
            want = step(want)
        (got,) = model(x)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        sizes[n] = len(model.source)
    assert sizes[12] < 4 * sizes[4]


@pytest.mark.parametrize("op, ref", [("hard_swish", _hard_swish), ("gelu", _gelu)])
def test_chained_activations_that_read_their_input_twice(op, ref):
    x = np.random.default_rng(2).standard_normal((4, 40)).astype(np.float32)
    _check_linear_growth(lambda n: _chain(op, n, [x]), x, ref)


def _silu(x):
    return x / (1 + np.exp(-x))


def _poly(x):
    return x + np.tanh(x * x * 0.1)


def _diamonds(kind: str, n: int) -> tensorforge.Module:
    """n SiLUs as sigmoid and mul nodes (x read directly and through the sigmoid), or n steps of
    x + tanh(x * x * 0.1) as four nodes."""
    b = GraphBuilder("diamonds")
    y = b.input("x", (3, 50), "float32")
    c = b.const(np.float32(0.1))
    for _ in range(n):
        if kind == "silu":
            y = b.add1("mul", [y, b.add1("sigmoid", [y])])
        else:
            y = b.add1("add", [y, b.add1("tanh", [b.add1("mul", [b.add1("mul", [y, y]), c])])])
    return tensorforge.compile(b.finish([y]), target="c")


@pytest.mark.parametrize("kind, ref", [("silu", _silu), ("poly", _poly)])
def test_diamonds_of_separate_nodes(kind, ref):
    x = np.random.default_rng(3).standard_normal((3, 50)).astype(np.float32) * 2
    _check_linear_growth(lambda n: _diamonds(kind, n), x, ref)


def test_load_only_a_branch_evaluates_stays_in_it():
    """out[i] = P[i-1] * P[i-1] where i > 0, else 0: P (large enough to be bound) read at i - 1
    only in the guarded branch.  Bound before the Select, it would read x[-1] at i = 0, which the
    reference interpreter refuses."""
    n = 37
    x = te.placeholder((n,), "float32", name="x")
    p = te.compute((n,), lambda i: sum((x[i] * float(k + 1) + float(k) for k in range(24)), x[i]), name="p")
    out = te.compute((n,), lambda i: te.if_then_else(i > 0, p[i - 1] * p[i - 1], 0.0), name="out")
    s = te.create_schedule([out.op])
    s[p].compute_inline()

    def reference(xv):
        xv = xv.astype(np.float64)
        pv = xv + sum(xv * (k + 1) + k for k in range(24))
        r = np.zeros(n)
        r[1:] = pv[:-1] * pv[:-1]
        return r.astype(np.float32)

    check_schedule(s, [x, out], reference, rtol=1e-5, atol=1e-3)


def test_repeated_load_evaluated_anyway_is_bound_once():
    """out[i] = select(P[i] > 0, P[i], 2 P[i]): the condition evaluates P[i] whatever the data,
    so it is computed once and bound."""
    n = 29
    x = te.placeholder((n,), "float32", name="x")
    p = te.compute((n,), lambda i: sum((x[i] * float(k + 1) - float(k) for k in range(24)), x[i]), name="p")
    out = te.compute((n,), lambda i: te.if_then_else(p[i] > 0.0, p[i], p[i] * 2.0), name="out")
    s = te.create_schedule([out.op])
    s[p].compute_inline()

    def reference(xv):
        xv = xv.astype(np.float64)
        pv = xv + sum(xv * (k + 1) - k for k in range(24))
        return np.where(pv > 0, pv, 2 * pv).astype(np.float32)

    func = check_schedule(s, [x, out], reference, rtol=1e-5, atol=1e-3)
    assert str(func).count("x[") == 25    # one copy of P's 25 loads of x, not three


def test_a_chain_of_400_fused_ops():
    """400 element-wise nodes inlined into one kernel: an expression deeper than Python's default
    recursion limit, which lowering and printing walk (it raised RecursionError)."""
    b = GraphBuilder("long")
    y = b.input("x", (3, 50), "float32")
    for k in range(400):
        y = b.add1("sin" if k % 2 else "cos", [y])
    model = tensorforge.compile(b.finish([y]), target="c")
    x = np.random.default_rng(4).standard_normal((3, 50)).astype(np.float32)
    want = x.astype(np.float64)
    for k in range(400):
        want = np.sin(want) if k % 2 else np.cos(want)
    np.testing.assert_allclose(model(x)[0], want, rtol=1e-4, atol=1e-5)


def test_load_indexed_by_a_variable_bound_inside_stays_inside():
    """out[i] = let j = n - 1 - i in P[j] + P[j] * 0.5: the repeated load's index is a variable
    the body binds, so it cannot be bound above that binding (it is copied instead)."""
    from tensorforge.ir.expr import Let, Var
    n = 23
    x = te.placeholder((n,), "float32", name="x")
    p = te.compute((n,), lambda i: sum((x[i] * float(k + 1) for k in range(30)), x[i]), name="p")

    def body(i):
        j = Var("j", "int32")
        return Let(j, n - 1 - i, p[j] + p[j] * 0.5)

    out = te.compute((n,), body, name="out")
    s = te.create_schedule([out.op])
    s[p].compute_inline()

    def reference(xv):
        pv = xv.astype(np.float64) * (1 + sum(range(1, 31)))
        return (1.5 * pv[::-1]).astype(np.float32)

    check_schedule(s, [x, out], reference, rtol=1e-5, atol=1e-3)


def test_load_on_the_right_of_and_stays_there():
    """out[i] = (i > 0 && P[i-1] > 0 && P[i-1] < 40): && evaluates P[i-1] only where i > 0, so
    it is not bound before the condition (x[-1] at i = 0 otherwise)."""
    n = 31
    x = te.placeholder((n,), "float32", name="x")
    p = te.compute((n,), lambda i: sum((x[i] * float(k + 1) for k in range(30)), x[i]), name="p")
    out = te.compute((n,), lambda i: te.if_then_else(te.all(i > 0, p[i - 1] > 0.0, p[i - 1] < 40.0), 1.0, 0.0),
                     name="out")
    s = te.create_schedule([out.op])
    s[p].compute_inline()

    def reference(xv):
        pv = xv.astype(np.float64) * (1 + sum(range(1, 31)))
        r = np.zeros(n)
        r[1:] = (pv[:-1] > 0) & (pv[:-1] < 40)
        return r.astype(np.float32)

    check_schedule(s, [x, out], reference)
