"""ONNX Softmax / LogSoftmax / Hardmax against ONNX Runtime, in both semantics: opset >= 13
normalizes along one axis, older opsets over the input flattened to 2-D at `axis`."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
from onnx_nn_helpers import check_against_ort, node_model, rand  # noqa: E402

from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.ir import GraphError  # noqa: E402

OPS = ["Softmax", "LogSoftmax", "Hardmax"]


@pytest.mark.parametrize("op_type", OPS)
@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, -2])
def test_softmax_family(op_type, opset, axis):
    model, feeds = node_model(op_type, {"x": rand((2, 3, 4), scale=3)}, {} if axis is None else dict(axis=axis),
                              opset=opset)
    check_against_ort(model, feeds, rtol=1e-5, atol=1e-6)


def test_axes_attribute():
    model, _ = node_model("Softmax", {"x": rand((2, 3, 4))}, dict(axis=1), opset=11)
    assert from_onnx(model).nodes[0].attrs["axes"] == (1, 2)
    model, _ = node_model("Softmax", {"x": rand((2, 3, 4))}, dict(axis=1), opset=13)
    assert from_onnx(model).nodes[0].attrs["axes"] == (1,)


def test_hardmax_ties():
    x = np.array([[1, 3, 3], [2, 2, 2]], "float32")
    model, feeds = node_model("Hardmax", {"x": x}, {})
    check_against_ort(model, feeds, rtol=0, atol=0)


def test_errors():
    model, _ = node_model("Softmax", {"x": rand((2, 3))}, dict(axis=2))
    with pytest.raises(GraphError, match="Softmax.*out of range"):
        from_onnx(model)
