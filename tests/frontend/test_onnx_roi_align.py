"""ONNX RoiAlign (opsets 10 and 16, avg and max, fixed and adaptive sampling, regions reaching
outside the image) against ONNX Runtime; hand-computed bins on a ramp image; the compiled model
(an opaque host kernel); errors."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
from onnx_nn_helpers import check_against_ort, node_model  # noqa: E402

import tensorforge  # noqa: E402
from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.ir import GraphError  # noqa: E402

RNG = np.random.default_rng(9)
ROIS = np.array([[0, 0, 9, 9], [0.5, 1.2, 6.3, 4.4], [-2, -1, 3, 12], [4, 4, 4.2, 4.1], [2, 3, 8, 5]], np.float32)
BATCH = np.array([0, 1, 1, 0, 1], np.int64)


def _model(attrs: dict, opset: int):
    x = RNG.standard_normal((2, 3, 10, 8)).astype(np.float32)
    return node_model("RoiAlign", {"x": x, "rois": ROIS, "batch": BATCH}, attrs, opset=opset)


@pytest.mark.parametrize("opset, ctm", [(10, None), (16, "half_pixel"), (16, "output_half_pixel")])
@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("sampling_ratio", [0, 2])
def test_against_onnxruntime(opset, ctm, mode, sampling_ratio):
    attrs = {"mode": mode, "output_height": 3, "output_width": 2, "sampling_ratio": sampling_ratio,
             "spatial_scale": 0.8}
    if ctm is not None:
        attrs["coordinate_transformation_mode"] = ctm
    check_against_ort(*_model(attrs, opset), rtol=1e-5, atol=1e-5)


def test_ramp_image_by_hand_and_compiled():
    """On x[h, w] = w every bilinear sample reads its x coordinate, so an avg bin is the mean of
    its sample columns: roi x in [1, 5] (half_pixel: [0.5, 4.5]) in 2 bins of 2 samples each
    samples 1.0, 2.0 | 3.0, 4.0."""
    x = np.tile(np.arange(8, dtype=np.float32), (1, 1, 6, 1))
    rois = np.array([[1, 1, 5, 3]], np.float32)
    model, feeds = node_model("RoiAlign", {"x": x, "rois": rois, "batch": np.zeros(1, np.int64)},
                              {"output_height": 1, "output_width": 2, "sampling_ratio": 2}, opset=16)
    got = tensorforge.compile(from_onnx(model), target="c")(x, rois, np.zeros(1, np.int64))[0]
    np.testing.assert_allclose(got.reshape(-1), [1.5, 3.5], rtol=1e-6)


def test_errors():
    model, _ = node_model("RoiAlign", {"x": np.zeros((1, 1, 4, 4), np.float32), "rois": np.zeros((2, 4), np.float32),
                                       "batch": np.zeros(3, np.int64)}, opset=16)
    with pytest.raises(GraphError, match="one per region"):
        from_onnx(model)
    model, _ = _model({"mode": "sum"}, 16)
    with pytest.raises(GraphError, match="mode"):
        from_onnx(model)
