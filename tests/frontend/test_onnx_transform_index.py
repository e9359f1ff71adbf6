"""ONNX indexing and generating converters (Gather, GatherElements, GatherND, ScatterElements,
Scatter, ScatterND, OneHot, EyeLike, Trilu, Range, ConstantOfShape, Constant) against ONNX
Runtime; what becomes a constant; errors."""
from __future__ import annotations

import numpy as np
import pytest

import tensorforge

pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402
from onnx_transform_helpers import check_ort, i64, one_node, rand  # noqa: E402

from tensorforge.frontend import from_onnx  # noqa: E402

D = rand((4, 3, 5))


def test_gathers():
    check_ort(*one_node("Gather", {"x": D, "i": i64([0, -1], [2, 3])}, attrs={"axis": 0}))
    check_ort(*one_node("Gather", {"x": D}, {"i": np.array(-2, np.int32)}, attrs={"axis": 2}))
    idx = np.random.default_rng(0).integers(-3, 3, (4, 2, 5))
    check_ort(*one_node("GatherElements", {"x": D, "i": idx}, attrs={"axis": 1}))
    check_ort(*one_node("GatherND", {"x": D, "i": i64([0, 1], [3, -1])}))
    check_ort(*one_node("GatherND", {"x": D, "i": i64([[1]], [[0]], [[2]], [[2]])}, attrs={"batch_dims": 1}))


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatters(reduction):
    idx = i64([[0, 1, -1, 2, 0]], [[3, 3, 0, 1, 2]])
    upd = rand((2, 1, 5), seed=1)
    attrs = {"axis": 0} if reduction == "none" else {"axis": 0, "reduction": reduction}
    check_ort(*one_node("ScatterElements", {"x": D, "i": idx, "u": upd}, attrs=attrs))
    nd_idx, nd_upd = i64([0, 1], [2, 2], [-1, 0]), rand((3, 5), seed=2)
    attrs = {} if reduction == "none" else {"reduction": reduction}
    check_ort(*one_node("ScatterND", {"x": D, "i": nd_idx, "u": nd_upd}, attrs=attrs))


def test_scatter_opset9():
    check_ort(*one_node("Scatter", {"x": D, "i": i64([[0, 1, 2, 0, 1]]), "u": rand((1, 1, 5))},
                        attrs={"axis": 1}, opset=9))


def test_one_hot_eye_like_trilu():
    values = np.array([-2, 5], np.int32)
    check_ort(*one_node("OneHot", {"i": i64([1, -1], [7, 0])}, {"depth": np.array(4.0, np.float32),
                                                                  "values": values}, {"axis": 1}))
    check_ort(*one_node("OneHot", {"i": rand((3,), "int64")}, {"depth": np.array([30.0], np.float32),
                                                               "values": np.array([0, 1.5], np.float32)}))
    check_ort(*one_node("EyeLike", {"x": rand((3, 5))}, attrs={"k": 2}))
    check_ort(*one_node("EyeLike", {"x": rand((4, 3))}, attrs={"k": -1, "dtype": 6}))
    check_ort(*one_node("Trilu", {"x": D}, {"k": i64(1)}, {"upper": 0}))
    check_ort(*one_node("Trilu", {"x": D.astype(np.int64)}, {"k": i64(-2)}))
    check_ort(*one_node("Trilu", {"x": D}))


def test_constants_fold():
    model, _ = one_node("Range", {}, {"s": np.array(1.0, np.float32), "l": np.array(-3.0, np.float32),
                                      "d": np.array(-0.75, np.float32)})
    graph = from_onnx(model)
    assert not graph.nodes
    np.testing.assert_allclose(graph.params[graph.outputs[0]], np.arange(1.0, -3.0, -0.75, dtype=np.float32))
    value = helper.make_tensor("v", 6, [1], [7])
    graph = from_onnx(one_node("ConstantOfShape", {}, {"s": i64(2, 3)}, {"value": value})[0])
    out = graph.params[graph.outputs[0]]
    assert out.dtype == np.int32 and out.shape == (2, 3) and (out == 7).all()
    graph = from_onnx(one_node("Constant", {}, attrs={"value_ints": [1, 2]})[0])
    np.testing.assert_array_equal(graph.params[graph.outputs[0]], [1, 2])


def test_range_with_run_time_bounds_compiles_per_value():
    """The start is an input: the output length depends on its value, so the model is staged and
    specialized on each value it is called with."""
    model, _ = one_node("Range", {"s": np.array(0, np.int64)}, {"l": i64(5), "d": i64(1)})
    staged = tensorforge.compile(from_onnx(model))
    for start in (0, 3, 7):
        np.testing.assert_array_equal(staged(np.array(start, np.int64))[0], np.arange(start, 5, dtype=np.int64))


def test_string_constant_is_made_on_the_host():
    model, _ = one_node("Constant", {}, attrs={"value_strings": ["hi", "there"]})
    out = tensorforge.compile(from_onnx(model))()[0]
    assert out.dtype == object and out.tolist() == ["hi", "there"]


def test_range_float16_accumulates_in_the_stash_type():
    """Opset 27: a float16 Range is computed in float32 (stash_type 1) and cast, so a long range
    keeps counting where float16 additions would stall."""
    start, limit, delta = (np.array(v, np.float16) for v in (2040.0, 2060.0, 1.0))
    model, _ = one_node("Range", {}, {"s": start, "l": limit, "d": delta}, opset=27)
    graph = from_onnx(model)
    got = graph.params[graph.outputs[0]]
    np.testing.assert_array_equal(got, np.arange(2040, 2060, dtype=np.float32).astype(np.float16))
