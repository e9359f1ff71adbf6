"""ONNX reduction converters (Reduce* with axes as attribute or input, keepdims,
noop_with_empty_axes; ArgMax / ArgMin; CumSum; CumProd; TopK; Einsum) against ONNX Runtime; errors."""
from __future__ import annotations

import numpy as np
import pytest

import tensorforge

pytest.importorskip("onnxruntime")
from onnx_transform_helpers import check_ort, i64, one_node, rand  # noqa: E402

from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.ir import GraphError  # noqa: E402
from tensorforge.graph.reference import run_reference  # noqa: E402

X = rand((2, 3, 4))
REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
          "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]


def positive(op_type: str) -> np.ndarray:
    return np.abs(X) + 0.5 if op_type == "ReduceLogSum" else X


@pytest.mark.parametrize("op_type", REDUCE)
def test_reduce_axes_as_input(op_type):
    x = positive(op_type)
    check_ort(*one_node(op_type, {"x": x}, {"axes": i64(0, -1)}, {"keepdims": 0}), rtol=1e-4)
    check_ort(*one_node(op_type, {"x": x}, {"axes": i64(1)}), rtol=1e-4)
    check_ort(*one_node(op_type, {"x": x}), rtol=1e-4)                                   # every axis
    check_ort(*one_node(op_type, {"x": x}, attrs={"noop_with_empty_axes": 1}), rtol=1e-4)


@pytest.mark.parametrize("op_type", REDUCE)
def test_reduce_axes_as_attribute(op_type):
    check_ort(*one_node(op_type, {"x": positive(op_type)}, attrs={"axes": [1], "keepdims": 0}, opset=11), rtol=1e-4)


@pytest.mark.parametrize("op_type", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"])
def test_reduce_integers(op_type):
    check_ort(*one_node(op_type, {"x": rand((3, 4), "int64")}, {"axes": i64(1)}))
    check_ort(*one_node(op_type, {"x": rand((3, 4), "int32")}, {"axes": i64(0)}, {"keepdims": 0}))


@pytest.mark.parametrize("op_type", ["ArgMax", "ArgMin"])
def test_arg(op_type):
    ties = np.random.default_rng(1).integers(0, 3, (3, 5)).astype(np.float32)
    for attrs in ({"axis": 1}, {"axis": 0, "keepdims": 0}, {"axis": -1, "select_last_index": 1}):
        check_ort(*one_node(op_type, {"x": ties}, attrs=attrs))
        check_ort(*one_node(op_type, {"x": rand((3, 5), "int32")}, attrs=attrs))


def test_cumsum():
    for attrs in ({}, {"exclusive": 1}, {"reverse": 1}, {"exclusive": 1, "reverse": 1}):
        check_ort(*one_node("CumSum", {"x": X}, {"axis": np.array(-2, np.int32)}, attrs))
        check_ort(*one_node("CumSum", {"x": rand((3, 4), "int64")}, {"axis": i64(1)}, attrs))


def test_cumprod():
    x = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
    want = {(0, 0): [[1, 2, 6], [4, 20, 120]], (1, 0): [[1, 1, 2], [1, 4, 20]],
            (0, 1): [[6, 6, 3], [120, 30, 6]], (1, 1): [[6, 3, 1], [30, 6, 1]]}
    for (exclusive, reverse), expected in want.items():
        model, feeds = one_node("CumProd", {"x": x}, {"axis": np.array(-1, np.int32)},
                                {"exclusive": exclusive, "reverse": reverse}, opset=26)
        got = run_reference(from_onnx(model), x)[0]
        np.testing.assert_array_equal(got, np.asarray(expected, np.float32))


def test_topk():
    ties = np.array([[3, 1, 3, 2, 1, 2]], np.float32)
    for attrs in ({}, {"largest": 0}, {"axis": 0}):
        k = i64(1) if attrs.get("axis") == 0 else i64(4)
        check_ort(*one_node("TopK", {"x": ties}, {"k": k}, attrs, n_outputs=2))
    check_ort(*one_node("TopK", {"x": rand((3, 6), "int64")}, {"k": i64(2)}, {"axis": 1}, n_outputs=2))
    check_ort(*one_node("TopK", {"x": X}, attrs={"k": 2, "axis": 1}, opset=9, n_outputs=2))


@pytest.mark.parametrize("equation, shapes", [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (1, 4, 5)]),
    ("ii->i", [(3, 3)]),
    ("ij->", [(3, 4)]),
    ("ij,kj", [(3, 4), (2, 4)]),
])
def test_einsum(equation, shapes):
    feeds = {f"x{k}": rand(s, seed=k) for k, s in enumerate(shapes)}
    check_ort(*one_node("Einsum", feeds, attrs={"equation": equation}), rtol=1e-4, atol=1e-5)


def test_errors():
    with pytest.raises(GraphError, match="out of range"):
        from_onnx(one_node("ReduceSum", {"x": X}, {"axes": i64(3)})[0])
    with pytest.raises(GraphError, match="k = 9"):
        from_onnx(one_node("TopK", {"x": X}, {"k": i64(9)}, n_outputs=2)[0])
    with pytest.raises(GraphError, match="einsum"):
        from_onnx(one_node("Einsum", {"x": X}, attrs={"equation": "ij->i"})[0])
    staged = tensorforge.compile(from_onnx(one_node("ReduceSum", {"x": X, "axes": i64(1)})[0]))
    for axis in (1, 0, -1):      # axes given at run time: specialized per value
        np.testing.assert_allclose(staged(X, i64(axis))[0], X.sum(axis=axis, keepdims=True), rtol=1e-5)


def test_topk_with_its_indices_unused_runs():
    """x.topk(k)[0] as exported: TopK's indices output is read by nothing, so the memory plan gives
    it no buffer; the host kernel's step wrote every output and the call raised KeyError."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    g = helper.make_graph([helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=-1), helper.make_node("Relu", ["v"], ["y"])],
                          "topk_values", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (2, 5, 8))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(np.array([3], np.int64), "k")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    x = rand((2, 5, 8))
    got = tensorforge.compile(from_onnx(onnx.shape_inference.infer_shapes(model)))(x)[0]
    np.testing.assert_array_equal(got, np.maximum(-np.sort(-x, axis=-1)[..., :3], 0))
