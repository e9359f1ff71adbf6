"""A lone reshape between kernels reinterprets its input's bytes in the arena: no kernel, no copy
(driver.split_views), and the model computes the same."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tensorforge  # noqa: E402
from tensorforge.frontend import from_onnx  # noqa: E402


def _model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, None)
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 5)).astype(np.float32), "w")
    shape = numpy_helper.from_array(np.array([6, 8], np.int64), "shape")
    nodes = [helper.make_node("Softmax", ["x"], ["s"], axis=-1),
             helper.make_node("Reshape", ["s", "shape"], ["r"]),
             helper.make_node("MatMul", ["r", "w"], ["y"]),
             helper.make_node("Sin", ["s"], ["z"])]       # a second reader keeps the softmax apart
    graph = helper.make_graph(nodes, "views", [x], [y, z], [w, shape])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), numpy_helper.to_array(w)


def test_lone_reshape_is_a_view():
    model, w = _model()
    compiled = tensorforge.compile(from_onnx(model))
    labels = compiled.spec.labels
    assert not any(label.split(":", 1)[1] == "reshape" for label in labels), labels
    x = np.random.default_rng(1).standard_normal((2, 3, 8)).astype(np.float32)
    e = np.exp(x - x.max(-1, keepdims=True))
    want = (e / e.sum(-1, keepdims=True)).reshape(6, 8) @ w
    for _ in range(2):
        y, z = compiled(x)
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(z, np.sin(e / e.sum(-1, keepdims=True)), rtol=1e-5, atol=1e-6)
    # the view shares its source's offset in the arena
    arena = [(n, v["offset"]) for n, v in compiled.spec.values.items() if v["where"] == "arena"]
    assert len(arena) == 2 and arena[0][1] == arena[1][1], arena


def test_a_model_with_views_exports_and_loads(tmp_path):
    model, _ = _model()
    compiled = tensorforge.compile(from_onnx(model))
    x = np.random.default_rng(2).standard_normal((2, 3, 8)).astype(np.float32)
    again = tensorforge.load(compiled.export(str(tmp_path / "views.tfm")))
    for a, b in zip(again(x), compiled(x)):
        np.testing.assert_array_equal(a, b)


def _input_reshape_model():
    """x[4, 5, 8] -> reshape (20, 8) -> matmul w -> relu: the reshape reads the graph input."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 5, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = numpy_helper.from_array(np.random.default_rng(3).standard_normal((8, 6)).astype(np.float32), "w")
    shape = numpy_helper.from_array(np.array([20, 8], np.int64), "shape")
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("MatMul", ["r", "w"], ["m"]),
             helper.make_node("Relu", ["m"], ["y"])]
    graph = helper.make_graph(nodes, "input_view", [x], [y], [w, shape])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), numpy_helper.to_array(w)


def test_reshape_of_an_input_is_the_callers_array(tmp_path):
    model, w = _input_reshape_model()
    compiled = tensorforge.compile(from_onnx(model))
    assert not any(label.split(":", 1)[1] == "reshape" for label in compiled.spec.labels), compiled.spec.labels
    views = {n: v for n, v in compiled.spec.values.items() if v["where"] == "input_view"}
    assert [v["source"] for v in views.values()] == ["x"], compiled.spec.values
    rng = np.random.default_rng(4)
    for _ in range(2):                       # a fresh input each call: the view follows it
        x = rng.standard_normal((4, 5, 8)).astype(np.float32)
        kept = x.copy()
        (y,) = compiled(x)
        np.testing.assert_allclose(y, np.maximum(x.reshape(20, 8) @ w, 0), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(x, kept)
    xt = np.asfortranarray(rng.standard_normal((4, 5, 8)).astype(np.float32))   # not C-contiguous
    np.testing.assert_allclose(compiled(xt)[0], np.maximum(xt.reshape(20, 8) @ w, 0), rtol=1e-5, atol=1e-6)
    again = tensorforge.load(compiled.export(str(tmp_path / "input_view.tfm")))
    np.testing.assert_array_equal(again(xt)[0], compiled(xt)[0])


def test_a_view_of_a_missing_input_is_refused():
    from tensorforge.runtime.validate import SpecError, validate_spec
    model, _ = _input_reshape_model()
    compiled = tensorforge.compile(from_onnx(model))
    spec = compiled.spec
    name = next(n for n, v in spec.values.items() if v["where"] == "input_view")
    spec.values[name] = dict(spec.values[name], source="nowhere")
    with pytest.raises(SpecError, match="not an input"):
        validate_spec(spec, compiled.params)
