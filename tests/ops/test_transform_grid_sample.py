"""grid_sample: every mode, padding mode and align_corners, 1-D to 3-D, compiled to C against
the NumPy reference (which the ONNX conformance suite checks); hand-computed 1-D values;
errors."""
from __future__ import annotations

import numpy as np
import pytest

from tensorforge.ops import get
from tensorforge.ops.registry import OpError, TensorType
from tensorforge.ops.testing import check_op

RNG = np.random.default_rng(3)


def _grid(n: int, out: tuple, r: int, dtype="float32") -> np.ndarray:
    return RNG.uniform(-1.7, 1.7, (n,) + out + (r,)).astype(dtype)     # some points fall outside


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_2d_compiled_matches_reference(mode, padding_mode, align_corners):
    x = RNG.standard_normal((2, 3, 4, 5)).astype("float32")
    attrs = {"mode": mode, "padding_mode": padding_mode, "align_corners": align_corners}
    check_op("grid_sample", [x, _grid(2, (3, 6), 2)], attrs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "reflection"])
def test_1d_and_3d(mode, padding_mode):
    attrs = {"mode": mode, "padding_mode": padding_mode, "align_corners": 0}
    check_op("grid_sample", [RNG.standard_normal((2, 2, 7)).astype("float32"), _grid(2, (5,), 1)], attrs,
             rtol=1e-4, atol=1e-5)
    check_op("grid_sample", [RNG.standard_normal((1, 2, 3, 4, 2)).astype("float32"), _grid(1, (2, 3, 2), 3)],
             attrs, rtol=1e-4, atol=1e-5)


def test_float64_and_float16():
    x = RNG.standard_normal((1, 2, 4, 4))
    check_op("grid_sample", [x, _grid(1, (3, 3), 2, "float64")], {"mode": "cubic"})
    got = check_op("grid_sample", [x.astype("float16"), _grid(1, (3, 3), 2, "float16")], {}, rtol=1e-2, atol=1e-2)
    assert got[0].dtype == np.float16


X1 = np.array([[[5.0, 10.0, 20.0]]], np.float32)      # (N=1, C=1, W=3)


@pytest.mark.parametrize("mode, padding_mode, align_corners, g, want", [
    # align_corners=1: g = -1, 0, 0.5, 1 are positions 0, 1, 1.5, 2
    ("linear", "zeros", 1, [-1, 0, 0.5, 1], [5, 10, 15, 20]),
    # align_corners=0: g = -1, 0, 0.5, 1.5 are positions -0.5, 1, 1.75, 3.25
    ("linear", "zeros", 0, [-1, 0, 0.5, 1.5], [2.5, 10, 17.5, 0]),
    ("linear", "border", 0, [-1, 0, 0.5, 1.5], [5, 10, 17.5, 20]),       # 3.25 clamps to 2
    ("linear", "reflection", 0, [-1, 0, 0.5, 1.5], [5, 10, 17.5, 17.5]),  # 3.25 reflects at 2.5 to 1.75
    ("nearest", "zeros", 0, [-1, 0, 0.5, 1.5], [5, 10, 20, 0]),
    ("nearest", "zeros", 1, [-0.5, 0.5], [5, 20]),                        # 0.5 and 1.5 round to even
    ("cubic", "zeros", 1, [0.0], [10]),                                    # a pixel centre reads the pixel
    # border clamps the coordinate -0.2 to 0 before the taps (the ONNX reference; ONNX Runtime
    # clamps the taps -2..1 instead and mixes in pixel 1)
    ("cubic", "border", 1, [-1.2], [5]),
])
def test_hand_computed_1d(mode, padding_mode, align_corners, g, want):
    grid = np.asarray(g, np.float32).reshape(1, -1, 1)
    attrs = {"mode": mode, "padding_mode": padding_mode, "align_corners": align_corners}
    got = check_op("grid_sample", [X1, grid], attrs)[0]
    np.testing.assert_allclose(got.reshape(-1), want, rtol=1e-6)


@pytest.mark.parametrize("types, attrs, message", [
    ([TensorType((1, 1, 4, 4), "float32"), TensorType((1, 2, 2, 3), "float32")], {}, "grid has shape"),
    ([TensorType((2, 1, 4, 4), "float32"), TensorType((1, 2, 2, 2), "float32")], {}, "grid has shape"),
    ([TensorType((1, 4), "float32"), TensorType((1, 2, 1), "float32")], {}, "rank >= 3"),
    ([TensorType((1, 1, 4), "int32"), TensorType((1, 2, 1), "float32")], {}, "floating point"),
    ([TensorType((1, 1, 4), "float32"), TensorType((1, 2, 1), "float32")], {"mode": "bilinear"}, "mode"),
    ([TensorType((1, 1, 4), "float32"), TensorType((1, 2, 1), "float32")], {"padding_mode": "wrap"},
     "padding_mode"),
])
def test_errors(types, attrs, message):
    with pytest.raises(OpError, match=message):
        get("grid_sample").infer_types(types, attrs)
