"""Interval, const_int_bound and eval_interval: exact results for the cases bound inference uses."""
from __future__ import annotations

import dataclasses

import pytest

from tensorforge.arith import Analyzer, Interval, structural_equal
from tensorforge.ir import expr as E
from tensorforge.ir.expr import Cast, Ramp, Range, Select, Var, const
from tensorforge.tir.nodes import Buffer, BufferLoad

i, j, k, n = Var("i"), Var("j"), Var("k"), Var("n")
J = Interval(0, 3)


def same(iv: Interval | None, lo, hi) -> bool:
    assert iv is not None
    return structural_equal(iv.min, E.convert(lo)) and structural_equal(iv.max, E.convert(hi))


# -- the Interval value ---------------------------------------------------------------------------

def test_interval_constructors():
    assert same(Interval.point(i), i, i)
    assert Interval.point(i).is_point
    assert not J.is_point
    assert same(Interval.from_range(Range(const(2), n)), 2, n + 1)
    assert same(Interval(0, 3), 0, 3)
    r = Interval(i, i + 7).to_range()
    assert structural_equal(r.min, i) and structural_equal(r.extent, const(8))


def test_interval_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'min'"):
        J.min = const(1)  # type: ignore[misc]


# -- bindings and constant bounds -----------------------------------------------------------------

def test_bind_accepts_range_interval_and_pair():
    an = Analyzer()
    an.bind(i, Range(const(0), const(16)))
    an.bind(j, Interval(2, 5))
    an.bind(k, (-3, 3))
    an.bind(n, (1, None))
    assert an.const_int_bound(i) == (0, 15)
    assert an.const_int_bound(j) == (2, 5)
    assert an.const_int_bound(k) == (-3, 3)
    assert an.const_int_bound(n) == (1, None)
    with pytest.raises(TypeError):
        an.bind(i + 1, (0, 1))  # type: ignore[arg-type]


def test_rebinding_replaces_and_scopes_restore():
    an = Analyzer()
    an.bind(i, (0, 3))
    an.bind(i, (0, 7))
    assert an.const_int_bound(i) == (0, 7)
    with an.bound_scope({i: (0, 1)}):
        assert an.const_int_bound(i) == (0, 1)
    assert an.const_int_bound(i) == (0, 7)
    an.unbind(i)
    assert an.const_int_bound(i) == (None, None)


def test_const_int_bound_rules():
    an = Analyzer()
    an.bind(i, (0, 15))
    an.bind(j, (-4, 3))
    assert an.const_int_bound(i * 2 + 1) == (1, 31)
    assert an.const_int_bound(i - j) == (-3, 19)
    assert an.const_int_bound(i * j) == (-60, 45)
    assert an.const_int_bound(i // 4) == (0, 3)
    assert an.const_int_bound(j // 2) == (-2, 1)
    assert an.const_int_bound(i % 4) == (0, 3)
    assert an.const_int_bound(j % 8) == (0, 7)
    assert an.const_int_bound(i % 32) == (0, 15)
    assert an.const_int_bound((i + 16) % 32) == (16, 31)
    assert an.const_int_bound(E.Min(i, j)) == (-4, 3)
    assert an.const_int_bound(Select(i < 3, i, j + 100)) == (0, 103)
    assert an.const_int_bound(k) == (None, None)
    assert an.const_int_bound(k % 5) == (0, 4)
    assert an.const_int_bound(Cast("int8", k)) == (-128, 127)
    assert an.const_int_bound(Var("u", "uint8")) == (0, 255)
    assert an.const_int_bound(i < j) == (0, 1)


def test_symbolic_binding_gives_constant_bounds_once_known():
    an = Analyzer()
    an.bind(i, Range(const(0), n))
    assert an.const_int_bound(i) == (0, None)
    an.bind(n, (1, 64))
    assert an.const_int_bound(i) == (0, 63)


# -- eval_interval --------------------------------------------------------------------------------

def test_relaxed_and_kept_variables():
    an = Analyzer()
    assert same(an.eval_interval(i * 4 + j, {j: J}), i * 4, i * 4 + 3)
    assert same(an.eval_interval(i * 4 + j, {i: Interval(0, n - 1), j: J}), 0, n * 4 - 1)
    assert same(an.eval_interval(i, {j: J}), i, i)


def test_sign_aware_multiplication():
    an = Analyzer()
    assert same(an.eval_interval(j * -2 + 1, {j: J}), -5, 1)
    assert same(an.eval_interval(j * k, {j: Interval(-2, 3), k: Interval(-1, 5)}), -10, 15)
    an.bind(k, (0, 10))
    assert same(an.eval_interval(j * k, {j: J}), 0, k * 3)


def test_floordiv_and_floormod():
    an = Analyzer()
    assert same(an.eval_interval((i * 4 + j) // 4, {j: J}), i, i)
    assert same(an.eval_interval((i * 4 + j) // 2, {j: J}), i * 2, i * 2 + 1)
    assert same(an.eval_interval((i * 4 + j) % 4, {j: J}), 0, 3)
    assert same(an.eval_interval((i * 8 + j) % 8, {j: J}), 0, 3)       # one period: exact
    assert same(an.eval_interval((i * 4 + j + 1) % 4, {j: J}), 0, 3)   # wraps: [0, c - 1]
    assert same(an.eval_interval(j % 8, {j: J}), 0, 3)
    assert an.eval_interval(j // n, {j: J}) is None  # n may be zero or negative
    an.bind(n, (1, None))
    assert same(an.eval_interval(j // n, {j: J}), 0, 3 // n)


def test_min_max_cast_ramp_select():
    an = Analyzer()
    assert same(an.eval_interval(E.Min(j, k), {j: J}), E.Min(k, const(0)), E.Min(k, const(3)))
    assert same(an.eval_interval(E.Max(j * 2, const(1)), {j: J}), 1, 6)
    assert same(an.eval_interval(Cast("int64", j), {j: J}), const(0, "int64"), const(3, "int64"))
    assert same(an.eval_interval(Ramp(j * 4, const(1), 4), {j: J}), 0, 15)
    assert same(an.eval_interval(Select(j < 2, j, const(7)), {j: J}), 0, 7)


def test_unboundable_expressions_give_none():
    an = Analyzer()
    buf = Buffer("A", (16,), "int32")
    assert an.eval_interval(BufferLoad(buf, (j,)), {j: J}) is None
    assert an.eval_interval(E.call_intrin("exp", Cast("float32", j)), {j: J}) is None
    load = BufferLoad(buf, (i,))
    assert same(an.eval_interval(load + j, {j: J}), load, load + 3)  # the load does not vary


def test_symbolic_interval_ends():
    an = Analyzer()
    an.bind(i, Range(const(0), n))
    got = an.eval_interval(i * 2 + j, {i: Interval(0, n - 1), j: Interval(0, 1)})
    assert same(got, 0, n * 2 - 1)
