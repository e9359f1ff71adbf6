"""ONNX GridSample (opset 16 names and opset 20 names, 4-D and 5-D, every padding mode and
align_corners): the converted graph's reference against ONNX Runtime; errors."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
from onnx_nn_helpers import check_against_ort, node_model  # noqa: E402

from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.ir import GraphError  # noqa: E402

RNG = np.random.default_rng(11)


def _feeds(x_shape: tuple, out: tuple) -> dict:
    return {"x": RNG.standard_normal(x_shape).astype(np.float32),
            "grid": RNG.uniform(-1.5, 1.5, (x_shape[0],) + out + (len(out),)).astype(np.float32)}


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_opset16_against_onnxruntime(mode, padding_mode, align_corners):
    if (mode, padding_mode) == ("bicubic", "border"):
        pytest.skip("ONNX Runtime clamps each bicubic tap instead of the coordinate; tensorforge follows "
                    "the ONNX reference (tests/ops/test_transform_grid_sample.py checks it by hand)")
    attrs = {"mode": mode, "padding_mode": padding_mode, "align_corners": align_corners}
    check_against_ort(*node_model("GridSample", _feeds((2, 3, 5, 4), (3, 6)), attrs, opset=16),
                      rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["linear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_opset20_volumetric_against_onnxruntime(mode, padding_mode):
    attrs = {"mode": mode, "padding_mode": padding_mode, "align_corners": 0}
    check_against_ort(*node_model("GridSample", _feeds((1, 2, 3, 4, 5), (2, 3, 2)), attrs, opset=20),
                      rtol=1e-4, atol=1e-5)


def test_opset20_cubic_and_defaults():
    check_against_ort(*node_model("GridSample", _feeds((1, 2, 4, 4), (3, 3)), {"mode": "cubic"}, opset=20),
                      rtol=1e-4, atol=1e-5)
    check_against_ort(*node_model("GridSample", _feeds((1, 2, 4, 4), (3, 3)), opset=20), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opset, mode", [(16, "linear"), (20, "bilinear")])
def test_mode_names_of_the_other_opset_are_rejected(opset, mode):
    model, _ = node_model("GridSample", _feeds((1, 1, 3, 3), (2, 2)), {"mode": mode}, opset=opset)
    with pytest.raises(GraphError, match="mode"):
        from_onnx(model)


def test_opset16_takes_4d_input_only():
    model, _ = node_model("GridSample", _feeds((1, 1, 3, 3, 3), (2, 2, 2)), opset=16)
    with pytest.raises(GraphError, match="4-D"):
        from_onnx(model)
