"""ONNX pooling converters against ONNX Runtime: MaxPool / AveragePool / LpPool with padding,
auto_pad, strides, dilations, ceil_mode, count_include_pad; the global pools; clear errors."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
from onnx_nn_helpers import check_against_ort, node_model, rand  # noqa: E402

from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.ir import GraphError  # noqa: E402

CASES = [
    # (x shape, attrs)
    ((1, 2, 9), dict(kernel_shape=[3], strides=[2], pads=[1, 1])),
    ((1, 2, 7, 6), dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1])),
    ((1, 2, 7, 6), dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    ((1, 2, 7, 7), dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")),
    ((1, 2, 6, 7), dict(kernel_shape=[2, 3], strides=[2, 1], auto_pad="SAME_LOWER")),
    ((1, 2, 7, 7), dict(kernel_shape=[3, 3], auto_pad="VALID")),
    ((1, 1, 4, 5, 4), dict(kernel_shape=[2, 2, 2], strides=[2, 1, 2], pads=[0, 1, 1, 1, 0, 0])),
]


@pytest.mark.parametrize("xs, attrs", CASES)
def test_max_pool(xs, attrs):
    model, feeds = node_model("MaxPool", {"x": rand(xs)}, attrs)
    check_against_ort(model, feeds)


def test_max_pool_dilations_and_uint8():
    model, feeds = node_model("MaxPool", {"x": rand((1, 2, 8, 8))},
                              dict(kernel_shape=[2, 2], dilations=[2, 2], pads=[1, 1, 0, 0]))
    check_against_ort(model, feeds)
    x = np.random.default_rng(0).integers(0, 255, (1, 2, 5, 5)).astype("uint8")
    model, feeds = node_model("MaxPool", {"x": x}, dict(kernel_shape=[2, 2], pads=[1, 1, 1, 1]))
    check_against_ort(model, feeds, rtol=0, atol=0)


@pytest.mark.parametrize("xs, attrs", CASES)
@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_average_pool(xs, attrs, count_include_pad):
    model, feeds = node_model("AveragePool", {"x": rand(xs)}, dict(attrs, count_include_pad=count_include_pad),
                              opset=19)
    check_against_ort(model, feeds)


@pytest.mark.parametrize("xs, attrs", [c for c in CASES if "ceil_mode" not in c[1]])
@pytest.mark.parametrize("p", [1, 2, 3])
def test_lp_pool(xs, attrs, p):
    model, feeds = node_model("LpPool", {"x": rand(xs)}, dict(attrs, p=p))
    check_against_ort(model, feeds, rtol=1e-4)


@pytest.mark.parametrize("op_type", ["GlobalMaxPool", "GlobalAveragePool", "GlobalLpPool"])
@pytest.mark.parametrize("xs", [(2, 3, 5), (1, 2, 4, 3), (1, 2, 2, 3, 2)])
def test_global_pool(op_type, xs):
    model, feeds = node_model(op_type, {"x": rand(xs)}, dict(p=3) if op_type == "GlobalLpPool" else {})
    check_against_ort(model, feeds, rtol=1e-4)


@pytest.mark.parametrize("xs,attrs", [
    ((1, 2, 5, 5), dict(kernel_shape=[2, 2])),
    ((2, 3, 7, 6), dict(kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1])),
    ((1, 2, 7, 7), dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    ((1, 2, 8, 8), dict(kernel_shape=[2, 2], dilations=[2, 2])),
    ((1, 2, 5, 4), dict(kernel_shape=[2, 2], storage_order=1)),
    ((2, 3, 9), dict(kernel_shape=[3], strides=[2])),
    ((1, 2, 4, 4, 4), dict(kernel_shape=[2, 2, 2])),
])
def test_max_pool_indices(xs, attrs):
    """The Indices output: flat positions in the input (row- or column-major), as ONNX Runtime."""
    model, feeds = node_model("MaxPool", {"x": rand(xs)}, attrs, outputs=("y", "idx"), out_dtypes={"idx": "int64"})
    check_against_ort(model, feeds)


def test_errors():
    model, _ = node_model("AveragePool", {"x": rand((1, 2, 5, 5))}, {})
    with pytest.raises(GraphError, match="kernel_shape is required"):
        from_onnx(model)
    model, _ = node_model("MaxPool", {"x": rand((1, 2, 5, 5))}, dict(kernel_shape=[2]))
    with pytest.raises(GraphError, match="kernel_shape"):
        from_onnx(model)
    model, _ = node_model("MaxPool", {"x": rand((1, 2, 3, 3))}, dict(kernel_shape=[4, 4]))
    with pytest.raises(GraphError, match="does not fit"):
        from_onnx(model)
    model, _ = node_model("GlobalAveragePool", {"x": rand((2, 3))}, {})
    with pytest.raises(GraphError, match=r"\(N, C, D1"):
        from_onnx(model)
