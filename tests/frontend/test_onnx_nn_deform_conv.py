"""ONNX DeformConv (groups, offset groups, mask, bias, strides, pads, dilations) against ONNX
Runtime; the compiled model; zero offsets equal Conv; errors."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
from onnx_nn_helpers import check_against_ort, node_model, run_both  # noqa: E402

import tensorforge  # noqa: E402
from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.ir import GraphError  # noqa: E402

RNG = np.random.default_rng(8)


def _inputs(c=4, oc=6, group=1, offset_group=1, hw=(6, 7), out=(5, 5), kernel=(2, 3), bias=False, mask=False):
    kk = kernel[0] * kernel[1]
    return {"x": RNG.standard_normal((2, c) + hw).astype(np.float32),
            "w": RNG.standard_normal((oc, c // group) + kernel).astype(np.float32),
            "offset": (RNG.standard_normal((2, offset_group * 2 * kk) + out) * 1.5).astype(np.float32),
            "b": RNG.standard_normal(oc).astype(np.float32) if bias else None,
            "mask": RNG.random((2, offset_group * kk) + out).astype(np.float32) if mask else None}


@pytest.mark.parametrize("kw, attrs", [
    ({}, {}),
    ({"group": 2, "offset_group": 2, "bias": True, "mask": True}, {"group": 2, "offset_group": 2}),
    ({"out": (3, 2), "bias": True}, {"strides": [2, 2], "pads": [1, 0, 0, 1], "dilations": [1, 2]}),
    ({"mask": True}, {"kernel_shape": [2, 3]}),
])
def test_against_onnxruntime(kw, attrs):
    check_against_ort(*node_model("DeformConv", _inputs(**kw), attrs, opset=19), rtol=1e-4, atol=1e-4)


def test_compiled_and_zero_offsets_equal_conv():
    inputs = _inputs(group=2, offset_group=2, bias=True, mask=True)
    model, feeds = node_model("DeformConv", inputs, {"group": 2, "offset_group": 2}, opset=19)
    _, want = run_both(model, feeds)
    graph = from_onnx(model)
    got = tensorforge.compile(graph, target="c")(*[feeds[v.name] for v in graph.inputs])[0]
    np.testing.assert_allclose(got, want[0], rtol=1e-4, atol=1e-4)
    plain = dict(inputs, offset=np.zeros_like(inputs["offset"]), mask=None)
    deform, _ = run_both(*node_model("DeformConv", plain, {"group": 2, "offset_group": 2}, opset=19))
    conv, _ = run_both(*node_model("Conv", {"x": plain["x"], "w": plain["w"], "b": plain["b"]}, {"group": 2}))
    np.testing.assert_allclose(deform[0], conv[0], rtol=1e-5, atol=1e-5)


def test_bad_weight_shape_is_reported():
    inputs = _inputs()
    inputs["w"] = inputs["w"][:, :3]
    with pytest.raises(GraphError, match="W has shape"):
        from_onnx(node_model("DeformConv", inputs, opset=19)[0])
