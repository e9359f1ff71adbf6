"""Indexing and generating ops (gather, gather_elements, gather_nd, scatter_elements, scatter_nd,
one_hot, eye_like, trilu, constant_of_shape, range): TE compute (or opaque kernel) against the
NumPy reference, hand-checked values, and errors for bad attributes or index dtypes."""
from __future__ import annotations

import numpy as np
import pytest

from tensorforge.ops import get
from tensorforge.ops.registry import OPAQUE, OpError, TensorType
from tensorforge.ops.testing import check_op

RNG = np.random.default_rng(1)
D = RNG.standard_normal((5, 4, 3)).astype("float32")


def test_gather():
    check_op("gather", [D, np.array([[0, -1], [2, 4]])], {"axis": 0}, interpreter=True)
    check_op("gather", [D, np.array(-2, "int32")], {"axis": 1})
    check_op("gather", [D.astype("int16"), np.array([2, 0, 2])], {"axis": -1})


def test_gather_elements():
    check_op("gather_elements", [D, RNG.integers(-3, 3, (5, 2, 3))], {"axis": 2})
    check_op("gather_elements", [D, RNG.integers(-4, 4, (2, 4, 3)).astype("int32")], {"axis": 1})


def test_gather_nd():
    check_op("gather_nd", [D, np.array([[0, 1], [4, -1]])], {})
    check_op("gather_nd", [D, np.array([[[1, 2, 0]], [[0, 0, 2]]])], {})
    check_op("gather_nd", [D, np.array([[1], [3], [2], [0], [1]])], {"batch_dims": 1})


def test_compiled_gather_clamps_bad_indices():
    """Out-of-range indices read the border in the kernel instead of outside the buffer."""
    import tensorforge
    from tensorforge import te
    opdef = get("gather")
    data, idx = te.placeholder((4,), "float32", "d"), te.placeholder((2,), "int64", "i")
    out = opdef.build_compute([data, idx], {"axis": 0})[0]
    mod = tensorforge.build(te.create_schedule(out.op), [data, idx, out], target="c -O1")
    got = np.zeros(2, "float32")
    mod(np.arange(4, dtype="float32"), np.array([7, -9]), got)
    np.testing.assert_array_equal(got, [3, 0])


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter(reduction):
    assert get("scatter_elements").pattern == OPAQUE
    idx = np.array([[[0, 1, -1]], [[0, 0, 4]]])
    upd = RNG.standard_normal(idx.shape).astype("float32")
    got = check_op("scatter_elements", [D, idx, upd], {"axis": 0, "reduction": reduction})[0]
    if reduction == "add":
        want = D.copy()
        want[0, 0, 0] += upd[0, 0, 0] + upd[1, 0, 0]
        want[1, 0, 1] += upd[0, 0, 1]
        want[0, 0, 1] += upd[1, 0, 1]
        want[4, 0, 2] += upd[0, 0, 2] + upd[1, 0, 2]
        np.testing.assert_allclose(got, want, rtol=1e-6)
    nd_idx = np.array([[0, 1], [0, 1], [-1, 2]])
    check_op("scatter_nd", [D, nd_idx, np.ones((3, 3), "float32")], {"reduction": reduction})


def test_one_hot_eye_trilu():
    got = check_op("one_hot", [np.array([[1, -1], [5, 0]])],
                   {"depth": 4, "axis": 1, "on_value": 3, "off_value": -1, "dtype": "int32"})[0]
    np.testing.assert_array_equal(got[1, :, 0], [-1, -1, -1, -1])     # 5 is out of range
    np.testing.assert_array_equal(got[0, :, 1], [-1, -1, -1, 3])      # -1 counts from depth
    check_op("one_hot", [np.array([1.7, -1.0, 2.0], "float32")], {"depth": 3, "axis": 0})
    check_op("eye_like", [D[0]], {"k": 1})
    check_op("eye_like", [D[0]], {"k": -2, "dtype": "int32"})
    check_op("trilu", [D], {"k": 1, "upper": 0})
    check_op("trilu", [D.astype("int64")], {"k": -1, "upper": 1})
    check_op("trilu", [D], {"k": 9, "upper": 1})


def test_generators():
    got = check_op("constant_of_shape", [], {"shape": (2, 3), "value": 3, "dtype": "int32"})[0]
    np.testing.assert_array_equal(got, np.full((2, 3), 3))
    np.testing.assert_array_equal(check_op("range", [], {"start": 1, "limit": 10, "delta": 3, "dtype": "int64"})[0],
                                  [1, 4, 7])
    check_op("range", [], {"start": 1.0, "limit": -2.5, "delta": -0.5, "dtype": "float32"})
    assert get("range").infer_types([], {"start": 5, "limit": 1, "delta": 1, "dtype": "int32"})[0].shape == (0,)


@pytest.mark.parametrize("name, types, attrs, message", [
    ("gather", [TensorType((3,), "float32"), TensorType((2,), "float32")], {}, "integer dtype"),
    ("gather_elements", [TensorType((3, 2), "float32"), TensorType((2,), "int64")], {}, "rank"),
    ("gather_nd", [TensorType((3, 2), "float32"), TensorType((2, 3), "int64")], {}, "too long"),
    ("scatter_elements", [TensorType((3,), "float32"), TensorType((2,), "int64"), TensorType((3,), "float32")],
     {}, "one shape"),
    ("scatter_nd", [TensorType((3,), "float32"), TensorType((2, 1), "int64"), TensorType((2,), "float32")],
     {"reduction": "avg"}, "reduction"),
    ("one_hot", [TensorType((3,), "int64")], {"depth": 0}, "depth"),
    ("eye_like", [TensorType((3,), "float32")], {}, "2-D"),
    ("trilu", [TensorType((3,), "float32")], {}, "rank >= 2"),
    ("range", [], {"start": 0, "limit": 3, "delta": 0, "dtype": "int64"}, "delta"),
])
def test_errors(name, types, attrs, message):
    with pytest.raises(OpError, match=message):
        get(name).infer_types(types, attrs)


def test_gather_with_narrow_signed_indices_wraps_in_32_bits():
    """An int8 index -1 into 256 entries reads entry 255: the wrap (i + 256) is not done in
    int8, where 256 does not fit."""
    table = np.arange(256, dtype=np.float32)
    idx = np.array([[-1, 0, 5, 127, -128]], np.int8)
    got = check_op("gather", [table, idx], {"axis": 0})[0]
    np.testing.assert_array_equal(got, [[255, 0, 5, 127, 128]])


def test_gathered_rows_are_read_as_vectors():
    """An embedding lookup with a position add (BERT's first kernel): the loop splits the row
    axis by the vector width, so each vector's row index is computed once and its lanes read
    contiguous memory (before: a division and an index clamp per element and a gather
    instruction per vector, 2x slower)."""
    import tensorforge
    from tensorforge.graph.builder import GraphBuilder
    from tensorforge.graph.reference import run_reference
    rng = np.random.default_rng(7)
    b = GraphBuilder("embed")
    ids = b.input("ids", (1, 24), "int64")
    table = b.const(rng.standard_normal((50, 64)).astype("float32"), "table")
    pos = b.const(rng.standard_normal((1, 24, 64)).astype("float32"), "pos")
    y = b.add1("add", [b.add1("gather", [table, ids], {"axis": 0}), pos])
    graph = b.finish([y])
    model = tensorforge.compile(graph, target="c")
    x = rng.integers(-50, 50, (1, 24))
    np.testing.assert_array_equal(model(x)[0], run_reference(graph, x)[0])
    kernel = model.source[model.source.rfind("int32_t k0_"):]
    assert "tf_gather" not in kernel and "% 64" not in kernel and "/ 64" not in kernel
