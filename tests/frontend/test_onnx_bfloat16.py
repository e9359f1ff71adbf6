"""ONNX BFLOAT16 tensors: graph inputs, initializers and Cast to and from bfloat16, converted and
compiled, against ONNX Runtime (bit for bit)."""
from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
ml_dtypes = pytest.importorskip("ml_dtypes")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tensorforge  # noqa: E402
from tensorforge.frontend import from_onnx  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)


def _model(h_input: bool):
    """y = Cast<float>(h) * w + Cast<float>(Cast<bfloat16>(x)); w a bfloat16 initializer, h a bfloat16
    graph input or (for ONNX Runtime, whose Python API takes no bfloat16 arrays) an initializer."""
    h_value = np.linspace(3, -3, 12).astype(BF16).reshape(3, 4)
    w = np.linspace(-2, 2, 12).astype(BF16).reshape(3, 4)
    nodes = [helper.make_node("Cast", ["h"], ["hf"], to=TensorProto.FLOAT),
             helper.make_node("Cast", ["w"], ["wf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["hf", "wf"], ["p"]),
             helper.make_node("Cast", ["x"], ["xb"], to=TensorProto.BFLOAT16),
             helper.make_node("Cast", ["xb"], ["xf"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["p", "xf"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, (3, 4))]
    inits = [numpy_helper.from_array(w, "w")]
    if h_input:
        inputs.insert(0, helper.make_tensor_value_info("h", TensorProto.BFLOAT16, (3, 4)))
    else:
        inits.append(numpy_helper.from_array(h_value, "h"))
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, (3, 4))]
    if h_input:
        outputs.append(helper.make_tensor_value_info("xb", TensorProto.BFLOAT16, (3, 4)))
    graph = helper.make_graph(nodes, "bf16", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_bfloat16_initializers_and_casts_match_onnx_runtime():
    model = _model(h_input=False)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32) * 100
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = tensorforge.compile(from_onnx(model), target="c")(x)
    np.testing.assert_array_equal(got[0], want[0])


def test_bfloat16_graph_inputs_and_outputs():
    graph = from_onnx(_model(h_input=True))
    assert graph.inputs[0].dtype == "bfloat16" and graph.outputs[1].dtype == "bfloat16"
    rng = np.random.default_rng(1)
    h = rng.standard_normal((3, 4)).astype(BF16)
    x = rng.standard_normal((3, 4)).astype(np.float32) * 100
    got = tensorforge.compile(graph, target="c")(h, x)
    w = np.linspace(-2, 2, 12).astype(BF16).reshape(3, 4)
    xb = x.astype(BF16)
    np.testing.assert_array_equal(got[0], h.astype(np.float32) * w.astype(np.float32) + xb.astype(np.float32))
    assert got[1].dtype == BF16
    np.testing.assert_array_equal(got[1].view(np.uint16), xb.view(np.uint16))
