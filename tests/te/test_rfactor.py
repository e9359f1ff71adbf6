"""rfactor (te/rfactor.py): the partial-reduction stage has the factored axis first (or at
factor_axis), the original stage reduces it, and the built program still equals NumPy
(dividing and non-dividing splits, fused reduce axes, min as well as sum)."""
from __future__ import annotations

import numpy as np
import pytest

import tensorforge
from tensorforge import te
from tensorforge.te.schedule import ScheduleError


def _row_reduce(n, m, kind="sum"):
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    fn = te.sum if kind == "sum" else te.min
    B = te.compute((n,), lambda i: fn(A[i, k], axis=k), name="B")
    return A, B, k


@pytest.mark.parametrize("m,factor,which", [(100, 16, "inner"), (100, 16, "outer"), (96, 8, "inner"), (5, 7, "inner")])
@pytest.mark.parametrize("kind", ["sum", "min"])
def test_rfactor_of_a_split_axis_equals_numpy(m, factor, which, kind):
    A, B, k = _row_reduce(7, m, kind)
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=factor)
    BF = s.rfactor(B, ki if which == "inner" else ko)
    expect = factor if which == "inner" else -(-m // factor)
    assert tuple(int(d.value) for d in BF.shape) == (expect, 7)
    assert len(s[B].op.reduce_axis) == 1 and int(s[B].op.reduce_axis[0].dom.extent.value) == expect
    f = tensorforge.build(s, [A, B], target="c")
    a = np.random.default_rng(m).standard_normal((7, m)).astype("float32")
    b = np.full(7, np.nan, "float32")
    f(a, b)
    ref = a.sum(1) if kind == "sum" else a.min(1)
    np.testing.assert_allclose(b, ref, rtol=1e-5, atol=1e-5)


def test_rfactor_of_two_reduce_axes_fused():
    A = te.placeholder((4, 6, 10), name="A")
    r, c = te.reduce_axis((0, 6), name="r"), te.reduce_axis((0, 10), name="c")
    B = te.compute((4,), lambda i: te.sum(A[i, r, c], axis=[r, c]), name="B")
    s = te.create_schedule(B.op)
    fused = s[B].fuse(r, c)
    fo, fi = s[B].split(fused, factor=16)
    s.rfactor(B, fi)
    f = tensorforge.build(s, [A, B], target="c")
    a = np.random.default_rng(1).standard_normal((4, 6, 10)).astype("float32")
    b = np.full(4, np.nan, "float32")
    f(a, b)
    np.testing.assert_allclose(b, a.sum((1, 2)), rtol=1e-5, atol=1e-5)


def test_rfactor_of_a_data_axis_is_an_error():
    A, B, k = _row_reduce(3, 8)
    s = te.create_schedule(B.op)
    with pytest.raises(ScheduleError, match="not a reduction axis"):
        s.rfactor(B, B.op.axis[0])


@pytest.mark.parametrize("factor_axis", [0, 1, 2])
def test_factor_axis_places_the_partials(factor_axis):
    """With factor_axis the factored axis sits at that position of the partial stage (its memory
    order); the result is the same."""
    A = te.placeholder((3, 5, 32), name="A")
    k = te.reduce_axis((0, 32), name="k")
    B = te.compute((3, 5), lambda i, j: te.sum(A[i, j, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    _, ki = s[B].split(k, factor=8)
    BF = s.rfactor(B, ki, factor_axis=factor_axis)
    shape = [3, 5]
    shape.insert(factor_axis, 8)
    assert tuple(int(d.value) for d in BF.shape) == tuple(shape)
    f = tensorforge.build(s, [A, B], target="c")
    a = np.random.default_rng(factor_axis).standard_normal((3, 5, 32)).astype("float32")
    b = np.full((3, 5), np.nan, "float32")
    f(a, b)
    np.testing.assert_allclose(b, a.sum(2), rtol=1e-5, atol=1e-5)
    with pytest.raises(ScheduleError, match="factor_axis 4"):
        s2 = te.create_schedule(B.op)
        s2.rfactor(B, s2[B].split(B.op.reduce_axis[0], factor=8)[1], factor_axis=4)


@pytest.mark.parametrize("which", ["inner", "outer"])
def test_rfactor_of_a_reduce_axis_over_a_shape_variable(which):
    """A row length m that is a shape variable: the split keeps its guard, the partial stage
    has the factor (or ceil(m / factor)) entries, and one build serves every m."""
    m = te.var("m")
    A, B, k = _row_reduce(5, m)
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=8)
    BF = s.rfactor(B, ki if which == "inner" else ko)
    assert tuple(str(d) for d in BF.shape)[1:] == ("5",)
    f = tensorforge.build(s, [A, B], target="c")
    for width in (1, 8, 13, 100):
        a = np.random.default_rng(width).standard_normal((5, width)).astype("float32")
        b = np.full(5, np.nan, "float32")
        f(a, b)
        np.testing.assert_allclose(b, a.sum(1), rtol=1e-5, atol=1e-5)
