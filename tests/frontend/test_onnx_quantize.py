"""ONNX quantization ops against ONNX Runtime: QuantizeLinear / DequantizeLinear at opsets 10, 13
and 21 (per tensor, per axis), DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul
and QLinearConv (per-channel weights, bias); the graphs they build; one model compiled to C."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
from onnx_nn_helpers import check_against_ort, node_model, run_both  # noqa: E402

import tensorforge  # noqa: E402
from tensorforge.frontend import from_onnx  # noqa: E402


def _u8(shape, seed=0):
    return np.random.default_rng(seed).integers(0, 256, shape).astype(np.uint8)


def _s8(shape, seed=0):
    return np.random.default_rng(seed).integers(-128, 128, shape).astype(np.int8)


def _f32(shape, seed=0, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


@pytest.mark.parametrize("opset", [10, 13, 21])
@pytest.mark.parametrize("zp_dtype", [np.uint8, np.int8])
def test_quantize_per_tensor(opset, zp_dtype):
    x = _f32((3, 8), scale=4.0)
    x[0, :4] = [0.25, 0.75, -0.25, 1.25]                    # exact halves of the scale: ties to even
    model, feeds = node_model("QuantizeLinear", {"x": x, "s": np.array(0.5, np.float32),
                                                 "z": np.array(3, zp_dtype)}, consts=("s", "z"),
                              opset=opset, out_dtypes={"y": zp_dtype})
    check_against_ort(model, feeds, rtol=0, atol=0)


@pytest.mark.parametrize("opset", [13, 21])
def test_quantize_dequantize_per_axis(opset):
    x = _f32((2, 4, 3), scale=2.0)
    scale = np.array([0.01, 0.03, 0.1, 0.02], np.float32)
    zp = np.array([0, 5, -7, 100], np.int8)
    model, feeds = node_model("QuantizeLinear", {"x": x, "s": scale, "z": zp}, {"axis": 1}, consts=("s", "z"),
                              opset=opset, out_dtypes={"y": np.int8})
    check_against_ort(model, feeds, rtol=0, atol=0)
    q = _s8((2, 3, 4))
    model, feeds = node_model("DequantizeLinear", {"x": q, "s": scale, "z": zp}, {"axis": -1},
                              consts=("s", "z"), opset=opset, out_dtypes={"y": np.float32})
    check_against_ort(model, feeds, rtol=1e-6, atol=0)


def test_dequantize_int32_without_zero_point():
    q = np.arange(-5, 5, dtype=np.int32) * 1000
    model, feeds = node_model("DequantizeLinear", {"x": q, "s": np.array(0.001, np.float32)}, consts=("s",),
                              opset=10, out_dtypes={"y": np.float32})
    check_against_ort(model, feeds, rtol=1e-6, atol=0)


def test_dynamic_quantize():
    x = _f32((3, 7), scale=3.0) + 1.0
    model, feeds = node_model("DynamicQuantizeLinear", {"x": x}, outputs=("y", "s", "z"), opset=11,
                              out_dtypes={"y": np.uint8, "z": np.uint8})
    got, want = run_both(model, feeds)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-7)
    np.testing.assert_array_equal(got[2], want[2])


@pytest.mark.parametrize("b_const", [False, True])
def test_matmul_integer(b_const):
    model, feeds = node_model("MatMulInteger", {"a": _u8((2, 5, 6)), "b": _s8((6, 4), 1),
                                                "za": np.array(120, np.uint8), "zb": np.array(-3, np.int8)},
                              consts=("zb", "b") if b_const else ("zb",), opset=10, out_dtypes={"y": np.int32})
    check_against_ort(model, feeds, rtol=0, atol=0)


def test_conv_integer():
    model, feeds = node_model("ConvInteger", {"x": _u8((1, 3, 7, 6)), "w": _u8((4, 3, 3, 3), 1),
                                              "zx": np.array(100, np.uint8)},
                              {"pads": [1, 0, 1, 2], "strides": [2, 1]}, consts=("w",), opset=10,
                              out_dtypes={"y": np.int32})
    check_against_ort(model, feeds, rtol=0, atol=0)


def _qlinear_matmul(opset: int = 10):
    return node_model("QLinearMatMul", {
        "a": _u8((3, 8)), "sa": np.array(0.02, np.float32), "za": np.array(128, np.uint8),
        "b": _s8((8, 5), 1), "sb": np.array([0.01, 0.02, 0.03, 0.01, 0.05], np.float32),
        "zb": np.zeros(5, np.int8), "sy": np.array(0.1, np.float32), "zy": np.array(10, np.uint8)},
        consts=("sa", "za", "b", "sb", "zb", "sy", "zy"), opset=opset, out_dtypes={"y": np.uint8})


def test_qlinear_matmul_per_column_weights():
    model, feeds = _qlinear_matmul()
    check_against_ort(model, feeds, rtol=0, atol=0)
    assert [n.op for n in from_onnx(model).nodes] == ["matmul_integer", "requantize"]


def _qlinear_conv():
    w_scale = np.array([0.01, 0.02, 0.005, 0.03], np.float32)
    return node_model("QLinearConv", {
        "x": _u8((1, 3, 8, 8)), "sx": np.array(0.05, np.float32), "zx": np.array(120, np.uint8),
        "w": _s8((4, 3, 3, 3), 1), "sw": w_scale, "zw": np.zeros(4, np.int8),
        "sy": np.array(0.2, np.float32), "zy": np.array(5, np.uint8),
        "b": np.array([100, -200, 3000, 0], np.int32)},
        {"pads": [1, 1, 1, 1]}, consts=("sx", "zx", "w", "sw", "zw", "sy", "zy", "b"), opset=10,
        out_dtypes={"y": np.uint8})


def test_qlinear_conv_per_channel_with_bias():
    model, feeds = _qlinear_conv()
    check_against_ort(model, feeds, rtol=0, atol=0)
    assert [n.op for n in from_onnx(model).nodes] == ["conv_integer", "add", "requantize"]


@pytest.mark.parametrize("make", [_qlinear_conv, _qlinear_matmul])
def test_compiled_matches_onnx_runtime(make):
    model, feeds = make()
    _, want = run_both(model, feeds)
    compiled = tensorforge.compile(from_onnx(model), target="c")
    np.testing.assert_array_equal(compiled(*feeds.values())[0], want[0])
