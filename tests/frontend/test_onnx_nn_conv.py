"""ONNX Conv / ConvTranspose converters: from_onnx + run_reference against ONNX Runtime (auto_pad,
groups, dilations, output_shape, bias as a constant or a run-time input), the graph they build,
and clear errors."""
from __future__ import annotations

import pytest

pytest.importorskip("onnxruntime")
from onnx_nn_helpers import check_against_ort, node_model, rand  # noqa: E402

from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.ir import GraphError  # noqa: E402

CONV_CASES = [
    # (x shape, w shape, attrs)
    ((1, 3, 7), (4, 3, 3), dict(strides=[2], pads=[1, 2])),
    ((2, 3, 7, 6), (4, 3, 3, 3), dict(pads=[1, 1, 1, 1])),
    ((1, 4, 7, 7), (6, 2, 3, 2), dict(group=2, strides=[2, 1], dilations=[1, 2], pads=[1, 0, 2, 1])),
    ((1, 4, 6, 6), (4, 1, 3, 3), dict(group=4, auto_pad="SAME_UPPER", strides=[2, 2])),      # depthwise
    ((1, 2, 7, 6), (3, 2, 4, 3), dict(auto_pad="SAME_LOWER", strides=[2, 1])),
    ((1, 2, 7, 6), (3, 2, 3, 3), dict(auto_pad="VALID", strides=[2, 2])),
    ((1, 2, 4, 5, 4), (3, 2, 2, 3, 2), dict(strides=[1, 2, 1], pads=[0, 1, 1, 1, 0, 0], kernel_shape=[2, 3, 2])),
]


@pytest.mark.parametrize("xs, ws, attrs", CONV_CASES)
@pytest.mark.parametrize("bias", ["none", "const", "input"])
def test_conv(xs, ws, attrs, bias):
    inputs = {"x": rand(xs), "w": rand(ws, seed=1)}
    if bias != "none":
        inputs["b"] = rand(ws[0], seed=2)
    model, feeds = node_model("Conv", inputs, attrs, consts=("w", "b") if bias == "const" else ("w",))
    check_against_ort(model, feeds, rtol=1e-4, atol=1e-4)


def test_conv_graph_keeps_bias_separate():
    model, _ = node_model("Conv", {"x": rand((1, 2, 5, 5)), "w": rand((3, 2, 3, 3)), "b": rand(3)}, {},
                          consts=("w", "b"))
    graph = from_onnx(model)
    assert [n.op for n in graph.nodes] == ["conv2d", "add"]
    bias = graph.nodes[1].inputs[1]
    assert graph.params[bias].shape == (3, 1, 1)


TRANSPOSE_CASES = [
    ((1, 2, 4), (2, 3, 3), dict(strides=[2])),
    ((1, 2, 3, 3), (2, 3, 3, 3), dict(strides=[2, 2], pads=[1, 0, 0, 1], output_padding=[1, 1])),
    ((1, 4, 3, 4), (4, 2, 2, 3), dict(group=2, strides=[1, 2], dilations=[2, 1])),
    ((1, 1, 3, 3), (1, 2, 3, 3), dict(strides=[3, 2], output_shape=[10, 8])),
    ((1, 1, 3, 3), (1, 2, 3, 3), dict(strides=[2, 2], output_shape=[5, 6])),
    ((1, 1, 3, 3), (1, 2, 3, 3), dict(strides=[2, 2], auto_pad="SAME_UPPER")),
    ((1, 1, 3, 3), (1, 2, 3, 3), dict(strides=[2, 2], auto_pad="SAME_LOWER")),
    ((1, 2, 2, 3, 2), (2, 2, 2, 2, 2), dict(strides=[2, 1, 2])),
]


@pytest.mark.parametrize("xs, ws, attrs", TRANSPOSE_CASES)
@pytest.mark.parametrize("bias", [False, True])
def test_conv_transpose(xs, ws, attrs, bias):
    inputs = {"x": rand(xs), "w": rand(ws, seed=1)}
    if bias:
        inputs["b"] = rand(ws[1] * attrs.get("group", 1), seed=2)
    model, feeds = node_model("ConvTranspose", inputs, attrs)
    check_against_ort(model, feeds, rtol=1e-4, atol=1e-4)


def test_errors():
    model, _ = node_model("Conv", {"x": rand((1, 2, 5, 5)), "w": rand((3, 2, 3, 3))}, dict(kernel_shape=[2, 2]))
    with pytest.raises(GraphError, match="Conv.*kernel_shape"):
        from_onnx(model)
    model, _ = node_model("Conv", {"x": rand((1, 4, 5, 5)), "w": rand((3, 2, 3, 3))}, dict(group=3))
    with pytest.raises(GraphError, match="groups=3"):
        from_onnx(model)
    model, _ = node_model("Conv", {"x": rand((1, 2, 5, 5)), "w": rand((3, 2, 3, 3))}, dict(auto_pad="SAME"))
    with pytest.raises(GraphError, match="auto_pad"):
        from_onnx(model)
    model, _ = node_model("Conv", {"x": rand((1, 2, 2, 2, 2, 2)), "w": rand((3, 2, 1, 1, 1, 1))}, {})
    with pytest.raises(NotImplementedError, match="Conv.*rank 3 to 5"):
        from_onnx(model)
    model, _ = node_model("ConvTranspose", {"x": rand((1, 2, 3, 3)), "w": rand((2, 1, 3, 3))},
                          dict(output_shape=[5]))
    with pytest.raises(GraphError, match="output_shape"):
        from_onnx(model)
