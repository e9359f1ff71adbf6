"""graph/passes/fold_qdq_gather: a gather from a dequantized constant table (a quantized
embedding) gathers the 8-bit rows first and dequantizes only those, with the same result."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import tensorforge
from tensorforge.frontend import from_onnx
from tensorforge.graph.passes.fold_qdq_gather import fold_qdq_gather
from tensorforge.graph.pipeline import optimize


def _embedding(per_axis: bool = False):
    rng = np.random.default_rng(0)
    table = rng.integers(0, 256, (50, 16)).astype(np.uint8)
    scale = np.linspace(0.01, 0.02, 16, dtype=np.float32) if per_axis else np.array(0.013, np.float32)
    zero = np.full(16, 131, np.uint8) if per_axis else np.array(131, np.uint8)
    inits = [numpy_helper.from_array(table, "table"), numpy_helper.from_array(scale, "s"),
             numpy_helper.from_array(zero, "z")]
    nodes = [helper.make_node("DequantizeLinear", ["table", "s", "z"], ["w"], axis=1),
             helper.make_node("Gather", ["w", "ids"], ["y"], axis=0)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, (2, 5))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (2, 5, 16))], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_gather_moves_before_the_dequantize():
    graph = from_onnx(_embedding())
    folded = fold_qdq_gather(graph)
    assert [n.op for n in folded.nodes] == ["gather", "dequantize_linear"]
    gather, dq = folded.nodes
    assert gather.inputs[0].dtype == "uint8" and gather.outputs[0] is dq.inputs[0]
    assert dq.outputs[0] is graph.outputs[0]
    optimized = optimize(graph, "c")       # no float copy of the table is made
    assert not any(a.dtype == np.float32 and a.size == 50 * 16 for a in optimized.params.values())


def test_per_axis_parameters_stay_as_they_are():
    graph = from_onnx(_embedding(per_axis=True))
    assert fold_qdq_gather(graph) is graph


@pytest.mark.parametrize("per_axis", [False, True])
def test_lookup_matches_onnx_runtime(per_axis):
    ort = pytest.importorskip("onnxruntime")
    model = _embedding(per_axis)
    ids = np.array([[0, 49, 7, 7, 3], [-1, 12, 0, 25, -50]], np.int64)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"ids": ids})[0]
    got = tensorforge.compile(from_onnx(model), target="c")(ids)[0]
    np.testing.assert_array_equal(got, want)
