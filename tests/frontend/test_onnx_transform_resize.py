"""ONNX Resize (opsets 10, 13, 19) and Upsample (opsets 7, 9) against ONNX Runtime: scales or sizes,
axes, keep_aspect_ratio_policy, every coordinate transformation and nearest mode, cubic options,
tf_crop_and_resize; errors."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
from onnx_transform_helpers import check_ort, i64, one_node, rand  # noqa: E402

from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.ir import GraphError  # noqa: E402

X = rand((1, 2, 4, 6))
EMPTY = np.zeros(0, np.float32)


def resize(scales=None, sizes=None, roi=None, opset=19, x=X, **attrs):
    consts = {"roi": roi if roi is not None else EMPTY,
              "scales": np.asarray(scales, np.float32) if scales is not None else EMPTY,
              "sizes": i64(*sizes) if sizes is not None else None}
    return one_node("Resize", {"x": x}, consts, attrs, opset=opset)


@pytest.mark.parametrize("ctm", ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                 "half_pixel_symmetric"])
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_modes(mode, ctm):
    check_ort(*resize(scales=(1, 1, 2, 1.5), mode=mode, coordinate_transformation_mode=ctm), rtol=1e-4, atol=1e-5)
    check_ort(*resize(sizes=(1, 2, 3, 4), mode=mode, coordinate_transformation_mode=ctm), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
def test_nearest_modes(nearest_mode):
    check_ort(*resize(scales=(1, 1, 1.75, 0.5), mode="nearest", nearest_mode=nearest_mode,
                      coordinate_transformation_mode="asymmetric"))
    check_ort(*resize(sizes=(7, 5), axes=[2, 3], mode="nearest", nearest_mode=nearest_mode))


def test_cubic_options_and_integers():
    check_ort(*resize(scales=(1, 1, 0.8, 0.5), mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1), rtol=1e-4)
    # integers: nearest only (ONNX Runtime truncates linear results and lacks cubic for uint8,
    # where the ONNX reference rounds half to even and saturates, as tensorforge does)
    check_ort(*resize(sizes=(1, 2, 8, 5), mode="nearest", x=rand((1, 2, 4, 6), "uint8") + 20))
    check_ort(*resize(scales=(1, 1, 0.5, 1.5), mode="nearest", x=rand((1, 2, 4, 6), "int32")))


def test_keep_aspect_ratio_and_tf_crop():
    for policy in ("not_larger", "not_smaller"):
        check_ort(*resize(sizes=(6, 7), axes=[2, 3], mode="nearest", keep_aspect_ratio_policy=policy))
    roi = np.array([0, 0, 0.2, 0.1, 1, 1, 0.8, 1.2], np.float32)
    check_ort(*resize(sizes=(1, 2, 5, 5), roi=roi, mode="linear", coordinate_transformation_mode="tf_crop_and_resize",
                      extrapolation_value=-1.0), rtol=1e-4, atol=1e-5)


def test_legacy_opsets():
    check_ort(*one_node("Resize", {"x": X}, {"scales": np.array([1, 1, 2, 0.5], np.float32)}, {"mode": "nearest"},
                        opset=10))
    x = rand((1, 1, 10, 10))      # downscaling: the legacy rule takes ceil, upscaling floor
    check_ort(*one_node("Resize", {"x": x}, {"scales": np.array([1, 1, 0.6, 1.7], np.float32)}, {"mode": "nearest"},
                        opset=10))
    check_ort(*one_node("Resize", {"x": X}, {"scales": np.array([1, 1, 1.5, 2], np.float32)}, {"mode": "linear"},
                        opset=10), rtol=1e-4)
    check_ort(*one_node("Upsample", {"x": X}, {"scales": np.array([1, 1, 2, 3], np.float32)}, opset=9))
    check_ort(*one_node("Upsample", {"x": X}, attrs={"scales": [1.0, 1.0, 2.0, 2.0], "mode": "linear"}, opset=7),
              rtol=1e-4)


def test_errors():
    with pytest.raises(GraphError, match="mode"):
        from_onnx(resize(scales=(1, 1, 2, 2), mode="area")[0])
    with pytest.raises(GraphError, match="roi"):
        from_onnx(resize(scales=(1, 1, 2, 2), coordinate_transformation_mode="tf_crop_and_resize")[0])
    with pytest.raises(GraphError, match="scales"):
        from_onnx(resize(scales=(2, 2))[0])
