"""ONNX MaxUnpool: indices from ONNX Runtime's MaxPool unpooled against ONNX Runtime (1-D to
3-D, strides, pads), the output_shape input (hand-written), the compiled model, errors."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
from onnx_nn_helpers import check_against_ort, node_model, rand  # noqa: E402

import tensorforge  # noqa: E402
from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.ir import GraphError  # noqa: E402
from tensorforge.graph.reference import run_reference  # noqa: E402


def _pooled(shape, attrs):
    import onnxruntime as ort
    model, feeds = node_model("MaxPool", {"x": rand(shape)}, attrs, outputs=("y", "i"), opset=12,
                              out_dtypes={"i": "int64"})
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


@pytest.mark.parametrize("shape, attrs", [
    ((2, 3, 8), {"kernel_shape": [2], "strides": [2]}),
    ((1, 2, 5, 8), {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 0]}),
    ((1, 1, 4, 4, 4), {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2]}),
])
def test_against_onnxruntime(shape, attrs):
    y, i = _pooled(shape, attrs)
    check_against_ort(*node_model("MaxUnpool", {"x": y, "i": i}, attrs, opset=11))


def test_output_shape_and_compiled():
    """The ONNX example: a 2x2 pooling of a 5x5 image unpooled to 5x5 (the 4x4 default grown by
    one row and column of zeros)."""
    x = np.array([[[[5, 6], [7, 8]]]], np.float32)
    i = np.array([[[[5, 7], [13, 15]]]], np.int64)
    model, feeds = node_model("MaxUnpool", {"x": x, "i": i, "shape": np.array([1, 1, 5, 5], np.int64)},
                              {"kernel_shape": [2, 2], "strides": [2, 2]}, consts=("shape",), opset=11)
    want = np.array([[[[0, 0, 0, 0, 0], [0, 5, 0, 6, 0], [0, 0, 0, 0, 0], [0, 7, 0, 8, 0], [0, 0, 0, 0, 0]]]],
                    np.float32)
    graph = from_onnx(model)
    np.testing.assert_array_equal(run_reference(graph, x, i)[0], want)
    np.testing.assert_array_equal(tensorforge.compile(graph, target="c")(x, i)[0], want)


def test_errors():
    x = np.zeros((1, 1, 2, 2), np.float32)
    model, _ = node_model("MaxUnpool", {"x": x, "i": np.zeros((1, 1, 2, 2), np.int64),
                                        "shape": np.array([1, 1, 3, 3], np.int64)},
                          {"kernel_shape": [2, 2], "strides": [2, 2]}, consts=("shape",), opset=11)
    with pytest.raises(GraphError, match="at least"):
        from_onnx(model)
    model, _ = node_model("MaxUnpool", {"x": x, "i": np.zeros((1, 1, 2, 2), np.int64)}, {}, opset=11)
    with pytest.raises(GraphError, match="kernel_shape is required"):
        from_onnx(model)
