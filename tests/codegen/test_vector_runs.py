"""Vector loads of contiguous runs (tir/lane_offsets.py): a vectorized depth-to-space reads each
vector of outputs as a few run loads and one shuffle (`tf_runs_...`), lane by lane where the
compiler has no `__builtin_shufflevector` (forced here with -DTF_LANEWISE_RUNS); both exact.
Lane distances that form no runs keep the scalar `omp simd` loop.  A load at a small constant
stride (2..4) reads runs of the vector's length over exactly the span its lanes cover."""
import ctypes

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorforge
from tensorforge import te
from tensorforge.backends.cpu import compile_flags
from tensorforge.ir import expr as E
from tensorforge.runtime.compile import compile_source
from tensorforge.target import Target
from tensorforge.tir.lane_offsets import MAX_RUN_STRIDE, Runs, runs, shuffled_runs, strided_runs


def _depth_to_space(c: int, h: int, w: int, b: int, mode: str, relu: bool):
    """y[o, y, x] of a (c * b * b, h, w) input, the last axis vectorized by 8."""
    x = te.placeholder((c * b * b, h, w), "float32", name="X")

    def source(o, yy, xx):
        a, d = yy % b, xx % b
        ch = (a * b + d) * c + o if mode == "DCR" else (o * b + a) * b + d
        v = x[ch, yy // b, xx // b]
        return te.if_then_else(v < 0.0, 0.0, v) if relu else v
    y = te.compute((c, h * b, w * b), source, name="Y")
    s = te.create_schedule(y.op)
    _, inner = s[y].split(y.op.axis[2], factor=8)
    s[y].vectorize(inner)
    return tensorforge.build(s, [x, y], target="c")


def _reference(x: np.ndarray, b: int, mode: str, relu: bool) -> np.ndarray:
    cb, h, w = x.shape
    c = cb // (b * b)
    t = x.reshape(b, b, c, h, w).transpose(2, 3, 0, 4, 1) if mode == "DCR" else \
        x.reshape(c, b, b, h, w).transpose(0, 3, 1, 4, 2)
    y = t.reshape(c, h * b, w * b)
    return np.where(y < 0, 0, y) if relu else y


@pytest.mark.parametrize("b, mode, relu", [(2, "CRD", True), (2, "DCR", False), (4, "CRD", False)])
def test_depth_to_space_reads_runs_and_is_exact(b, mode, relu):
    f = _depth_to_space(3, 4, 8, b, mode, relu)
    assert "tf_runs_float32x8_" in f.source and "__builtin_shufflevector" in f.source
    x = np.random.default_rng(0).standard_normal((3 * b * b, 4, 8)).astype(np.float32)
    out = np.full((3, 4 * b, 8 * b), np.nan, np.float32)
    f(x, out)
    np.testing.assert_array_equal(out, _reference(x, b, mode, relu))


def test_lanewise_fallback_gives_the_same_values():
    """The source compiled with -DTF_LANEWISE_RUNS (the path of compilers without
    __builtin_shufflevector), called through ctypes."""
    f = _depth_to_space(3, 4, 8, 2, "CRD", True)
    lib = ctypes.CDLL(compile_source(f.source, compile_flags(Target.parse("c")) + ["-DTF_LANEWISE_RUNS"]))
    x = np.random.default_rng(1).standard_normal((12, 4, 8)).astype(np.float32)
    out = np.full((3, 8, 16), np.nan, np.float32)
    fn = lib.main_kernel         # the symbol of a function built from a schedule
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    assert fn(x.ctypes.data, out.ctypes.data) == 0
    np.testing.assert_array_equal(out, _reference(x, 2, "CRD", True))


def test_distances_that_are_no_runs_stay_a_scalar_loop():
    x = te.placeholder((64,), "float32", name="X")
    y = te.compute((32,), lambda i: x[i // 2 * 3], name="Y")       # pairs of lanes, 3 apart
    s = te.create_schedule(y.op)
    _, inner = s[y].split(y.op.axis[0], factor=8)
    s[y].vectorize(inner)
    f = tensorforge.build(s, [x, y], target="c")
    assert "tf_runs_" not in f.source and "omp simd" in f.source
    xs = np.arange(64, dtype=np.float32)
    out = np.zeros(32, np.float32)
    f(xs, out)
    np.testing.assert_array_equal(out, xs[np.arange(32) // 2 * 3])


@settings(max_examples=60, deadline=None)
@given(offsets=st.lists(st.integers(-40, 40), min_size=2, max_size=16))
def test_runs_cover_each_lane_exactly(offsets):
    """Whatever the distances, `runs` either declines or puts every lane on its own element:
    run r's element j is distance starts[r] + j, and the runs have one power-of-two length."""
    found = runs(tuple(offsets))
    if found is None:
        return
    assert found.length >= 2 and found.length & (found.length - 1) == 0
    for lane, pick in zip(offsets, found.picks):
        assert found.starts[pick // found.length] + pick % found.length == lane


def test_shuffled_runs_of_an_interleave_and_not_of_a_ramp():
    i = E.Var("i")
    lanes = E.Ramp(E.const(0), E.const(1), 8)
    two = E.Broadcast(E.const(2), 8)
    interleave = E.Broadcast(i * 4, 8) + E.FloorMod(lanes, two) * E.Broadcast(E.const(100), 8) + E.FloorDiv(lanes, two)
    base, found = shuffled_runs(interleave)
    assert found == Runs(4, (0, 100), (0, 4, 1, 5, 2, 6, 3, 7))
    assert shuffled_runs(E.Ramp(i * 8, E.const(1), 8)) is None          # one plain vector load
    assert shuffled_runs(E.Broadcast(i, 8) + lanes * E.Broadcast(i, 8)) is None   # distances vary with i


def _strided(stride: int, lanes: int, n: int):
    """y[i] = x[stride * i + 1], vectorized by `lanes`, x exactly as long as the last lane needs."""
    x = te.placeholder((stride * (n - 1) + 2,), "float32", name="X")
    y = te.compute((n,), lambda i: x[i * stride + 1], name="Y")
    s = te.create_schedule(y.op)
    _, inner = s[y].split(y.op.axis[0], factor=lanes)
    s[y].vectorize(inner)
    return tensorforge.build(s, [x, y], target="c"), x.shape[0].value


@pytest.mark.parametrize("stride, lanes", [(2, 8), (2, 16), (3, 8), (4, 4)])
def test_strided_load_reads_runs_and_is_exact(stride, lanes):
    f, length = _strided(stride, lanes, 4 * lanes)
    assert "tf_runs_float32x" in f.source and "gather_strided" not in f.source
    xs = np.random.default_rng(2).standard_normal(length).astype(np.float32)
    out = np.full(4 * lanes, np.nan, np.float32)
    f(xs, out)
    np.testing.assert_array_equal(out, xs[1::stride])


def test_wide_stride_stays_a_gather():
    f, length = _strided(MAX_RUN_STRIDE + 1, 8, 16)
    assert "tf_runs_" not in f.source
    xs = np.arange(length, dtype=np.float32)
    out = np.zeros(16, np.float32)
    f(xs, out)
    np.testing.assert_array_equal(out, xs[1::MAX_RUN_STRIDE + 1])


@settings(max_examples=40, deadline=None)
@given(stride=st.integers(2, MAX_RUN_STRIDE), log_lanes=st.integers(1, 5))
def test_strided_runs_stay_inside_the_span(stride, log_lanes):
    """Every lane takes its own element, and the runs read nothing before lane 0's element or
    after the last lane's (a load past a buffer's end could fault)."""
    lanes = 1 << log_lanes
    base, found = strided_runs(E.Ramp(E.Var("i"), E.const(stride), lanes))
    span = (lanes - 1) * stride + 1
    assert found.length == lanes
    assert min(found.starts) == 0 and max(found.starts) + lanes == span
    for k, pick in enumerate(found.picks):
        assert found.starts[pick // lanes] + pick % lanes == k * stride
