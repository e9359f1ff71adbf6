"""Reductions (reduce_*), argmax/argmin, cumsum, topk and einsum: TE compute compiled to C against
the NumPy reference over axes / keepdims / dtypes, empty reductions, tie rules, and errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorforge.ops import get
from tensorforge.ops.registry import OPAQUE, REDUCTION, OpError, TensorType
from tensorforge.ops.testing import check_op

RNG = np.random.default_rng(3)
X = RNG.standard_normal((3, 4, 5)).astype("float32")
XI = RNG.integers(-50, 50, (3, 4, 5)).astype("int32")
REDUCE_OPS = ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reduce_l1", "reduce_l2",
              "reduce_sum_square", "reduce_log_sum", "reduce_log_sum_exp"]
FLOAT_ONLY = ("reduce_log_sum", "reduce_log_sum_exp")


@pytest.mark.parametrize("name", REDUCE_OPS)
def test_reduce(name):
    assert get(name).pattern == REDUCTION
    x = np.abs(X) + 0.1 if name == "reduce_log_sum" else X
    for axes, keepdims in [(None, 1), ((1,), 0), ((0, 2), 1), ((), 1), ((-1,), 0)]:
        check_op(name, [x], {"axes": axes, "keepdims": keepdims}, rtol=1e-4)
    check_op(name, [np.zeros((2, 0, 3), "float32")], {"axes": (1,)})          # empty: the identity
    check_op(name, [x], {"axes": (1,)}, rtol=1e-4, interpreter=True)
    check_op(name, [x.astype("float16")], {"axes": (1,)}, rtol=1e-2, atol=1e-2)
    if name not in FLOAT_ONLY:
        check_op(name, [XI], {"axes": (0, 2), "keepdims": 0})
        check_op(name, [XI.astype("uint8")], {"axes": (1,)})


def test_reduce_integer_semantics():
    x = np.array([[-7, 2]], "int32")
    np.testing.assert_array_equal(check_op("reduce_mean", [x], {"axes": (1,)})[0], [[-2]])   # truncates
    big = np.array([2 ** 30, 2 ** 30, 2 ** 30], "int32")
    np.testing.assert_array_equal(check_op("reduce_sum", [big], {})[0], [-(2 ** 30)])        # wraps
    np.testing.assert_array_equal(check_op("reduce_max", [np.array([[True, False]])], {"axes": (1,)})[0], [[True]])


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg(name):
    for axis, keepdims, last in [(0, 1, 0), (1, 0, 1), (-1, 1, 1)]:
        attrs = {"axis": axis, "keepdims": keepdims, "select_last_index": last}
        check_op(name, [X], attrs)
        check_op(name, [RNG.integers(-2, 2, (3, 4, 5))], attrs)      # many ties
    check_op(name, [np.zeros((2, 3), bool)], {"axis": 1})                # every value ties the identity
    ties = np.array([[1.0, 3.0, 3.0, 1.0]], "float32")
    want = (1, 2) if name == "argmax" else (0, 3)
    assert check_op(name, [ties], {"axis": 1, "keepdims": 0})[0][0] == want[0]
    assert check_op(name, [ties], {"axis": 1, "keepdims": 0, "select_last_index": 1})[0][0] == want[1]


def test_cumsum():
    for exclusive in (0, 1):
        for reverse in (0, 1):
            got = check_op("cumsum", [np.array([1, 2, 3], "int64")], {"axis": 0, "exclusive": exclusive,
                                                                       "reverse": reverse})[0]
            want = {(0, 0): [1, 3, 6], (1, 0): [0, 1, 3], (0, 1): [6, 5, 3], (1, 1): [5, 3, 0]}
            np.testing.assert_array_equal(got, want[exclusive, reverse])
            check_op("cumsum", [X], {"axis": 1, "exclusive": exclusive, "reverse": reverse})
    check_op("cumsum", [X.astype("float16")], {"axis": -1}, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "float16"])
@pytest.mark.parametrize("axis", [0, -1])
def test_cumsum_runs_each_line_as_a_running_sum(dtype, axis):
    """On the CPU, cumsum tensorizes each line along the axis with a running sum (scan.cpu, O(n))
    and gives the reference's values: exactly (the same order of additions), and in float16 (which
    accumulates in float32) to its rounding."""
    import tensorforge
    from tensorforge.graph.builder import GraphBuilder
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((6, 37)) * 10).astype(dtype)
    for exclusive in (0, 1):
        for reverse in (0, 1):
            b = GraphBuilder("cumsum")
            attrs = {"axis": axis, "exclusive": exclusive, "reverse": reverse}
            graph = b.finish([b.add1("cumsum", [b.input("x", x.shape, dtype)], attrs)])
            model = tensorforge.compile(graph, target="c")
            assert "tf_cumsum_" in model.source
            want = get("cumsum").run_reference([x], attrs)[0]
            if dtype == "float16":
                np.testing.assert_allclose(model(x)[0].astype("float32"), want.astype("float32"), rtol=1e-3, atol=1e-2)
            else:
                np.testing.assert_array_equal(model(x)[0], want)


@pytest.mark.parametrize("shape, axis", [((64, 300), -1), ((4, 64, 80), -1), ((2, 3, 40, 50), 1)])
def test_cumsum_after_fused_element_wise_work_on_many_lines(monkeypatch, shape, axis):
    """A cumsum whose input is element-wise work fused before it (relu, then a scaled select) and
    whose lines are several axes fused, on a machine with two cores: the fused work is computed
    into a buffer the running-sum intrinsic reads (inlined into the scanned expression, the
    tensorize refused it), and the fused line loop goes to the thread pool (its extent was read
    from the fused axis, which has none, and the compile raised AttributeError)."""
    import tensorforge
    from tensorforge.graph.builder import GraphBuilder
    from tensorforge.target import Target
    monkeypatch.setattr(Target, "num_cores", property(lambda self: 2))
    x = np.random.default_rng(5).standard_normal(shape).astype("float32")
    b = GraphBuilder("fused_cumsum")
    r = b.add1("relu", [b.input("x", shape, "float32")])
    m = b.add1("mul", [r, b.const(np.float32(0.5), "half")])
    out = b.add1("cumsum", [m], {"axis": axis})
    model = tensorforge.compile(b.finish([out]), target="c")
    assert "tf_cumsum_" in model.source and "omp parallel" in model.source
    want = np.cumsum(np.maximum(x, 0) * np.float32(0.5), axis=axis, dtype=np.float32)
    np.testing.assert_allclose(model(x)[0], want, rtol=1e-5, atol=1e-5)


def test_cumprod():
    for exclusive in (0, 1):
        for reverse in (0, 1):
            got = check_op("cumprod", [np.array([2, 3, 4], "int64")], {"axis": 0, "exclusive": exclusive,
                                                                        "reverse": reverse})[0]
            want = {(0, 0): [2, 6, 24], (1, 0): [1, 2, 6], (0, 1): [24, 12, 4], (1, 1): [12, 4, 1]}
            np.testing.assert_array_equal(got, want[exclusive, reverse])
            check_op("cumprod", [X], {"axis": 1, "exclusive": exclusive, "reverse": reverse})
    check_op("cumprod", [X.astype("float16")], {"axis": -1}, rtol=1e-2, atol=1e-2)


def test_topk():
    assert get("topk").pattern == OPAQUE
    x = np.array([[3, 1, 3, 2, 1]], "int64")
    values, indices = check_op("topk", [x], {"k": 3, "axis": 1})
    np.testing.assert_array_equal(values, [[3, 3, 2]])
    np.testing.assert_array_equal(indices, [[0, 2, 3]])                  # ties: lower index first
    values, indices = check_op("topk", [x], {"k": 2, "axis": -1, "largest": 0})
    np.testing.assert_array_equal(indices, [[1, 4]])
    check_op("topk", [X], {"k": 2, "axis": 0})


@settings(max_examples=80, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(["float32", "float64", "int32", "int64", "uint8"]),
       ties=st.booleans(), nan=st.booleans(), extreme=st.booleans())
def test_topk_without_sorting_whole_lines_orders_as_the_full_sort(data, dtype, ties, nan, extreme):
    """The extraction path (k <= 8 rounds of argmax) and the partition path (few of many, no tie
    across the k-th place, no NaN) give the indices the stable full sort gives; the extraction
    steps aside where the dtype's lowest (highest) value or a NaN is in the data, the partition
    where ties straddle the k-th place or a NaN is there."""
    from tensorforge.runtime import host_kernels
    shape = tuple(data.draw(st.lists(st.integers(1, 30), min_size=1, max_size=3)))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    x = (rng.integers(-3, 4, shape) if ties else rng.standard_normal(shape) * 100).astype(dtype)
    if nan and dtype.startswith("float"):
        x.flat[0] = np.nan
    if extreme:
        low, high = (-np.inf, np.inf) if dtype.startswith("float") else (np.iinfo(dtype).min, np.iinfo(dtype).max)
        x.flat[-1] = data.draw(st.sampled_from([low, high]))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    k = data.draw(st.integers(0, x.shape[axis]))
    largest = data.draw(st.sampled_from([0, 1]))
    a = axis % x.ndim
    want = np.take(host_kernels._order(x, a, bool(largest)), np.arange(k), axis=a)
    values, indices = host_kernels.topk(x, k, axis, largest)
    np.testing.assert_array_equal(indices, want)
    np.testing.assert_array_equal(values, np.take_along_axis(x, want, axis=a))


@pytest.mark.parametrize("equation, shapes", [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk", [(2, 3, 4), (4, 5)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("ijk->kji", [(2, 3, 4)]),
    ("...j,j->...", [(2, 3, 4), (4,)]),
    ("i,j", [(3,), (2,)]),
])
def test_einsum(equation, shapes):
    arrays = [RNG.standard_normal(s).astype("float32") for s in shapes]
    check_op("einsum", arrays, {"equation": equation}, rtol=1e-4, atol=1e-5, interpreter=True)


def test_einsum_integer():
    check_op("einsum", [RNG.integers(-3, 3, (3, 4)), RNG.integers(-3, 3, (4,))], {"equation": "ij,j->i"})


@pytest.mark.parametrize("name, types, attrs, message", [
    ("reduce_sum", [TensorType((2, 3), "float32")], {"axes": (2,)}, "out of range"),
    ("reduce_sum", [TensorType((2, 3), "float32")], {"axes": (1, -1)}, "repeat"),
    ("reduce_log_sum", [TensorType((2, 3), "int32")], {}, "float"),
    ("argmax", [TensorType((2, 0), "float32")], {"axis": 1}, "empty"),
    ("topk", [TensorType((2, 3), "float32")], {"k": 4}, "k = 4"),
    ("cumsum", [TensorType((2, 3), "float32")], {"axis": 2}, "out of range"),
    ("cumprod", [TensorType((2, 3), "bool")], {"axis": 0}, "bool"),
    ("einsum", [TensorType((2, 3), "float32")], {"equation": "ijk->i"}, "rank"),
    ("einsum", [TensorType((2, 3), "float32"), TensorType((4, 3), "float32")], {"equation": "ij,ij->i"}, "size"),
])
def test_errors(name, types, attrs, message):
    with pytest.raises(OpError, match=message):
        get(name).infer_types(types, attrs)


@pytest.mark.parametrize("op, axis, keepdims", [("argmax", -1, 1), ("argmin", 0, 0), ("argmax", 1, 0)])
def test_arg_reductions_accumulate_in_registers(op, axis, keepdims):
    """argmax / argmin's (index, value) accumulators live in the output's loop (local, registers),
    not in heap arrays at the root that every element stored to and loaded from."""
    import tensorforge
    from tensorforge.graph.builder import GraphBuilder
    rng = np.random.default_rng(5)
    x = rng.integers(-4, 5, (6, 40, 33)).astype("float32")          # ties: the first index wins
    b = GraphBuilder("arg")
    graph = b.finish([b.add1(op, [b.input("x", x.shape, "float32")], {"axis": axis, "keepdims": keepdims})])
    model = tensorforge.compile(graph, target="c")
    want = (np.argmax if op == "argmax" else np.argmin)(x, axis=axis)
    np.testing.assert_array_equal(model(x)[0], np.expand_dims(want, axis) if keepdims else want)
    assert "tf_alloc" not in model.source.split(f"k0_{op}(")[1]
