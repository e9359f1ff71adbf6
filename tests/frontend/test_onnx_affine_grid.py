"""ONNX AffineGrid (2-D and 3-D, align_corners 0 and 1, a length-1 axis) against ONNX Runtime
and hand-written grids; the compiled model; errors."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
from onnx_transform_helpers import check_ort, i64, one_node  # noqa: E402

import tensorforge  # noqa: E402
from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.ir import GraphError  # noqa: E402
from tensorforge.graph.reference import run_reference  # noqa: E402

RNG = np.random.default_rng(5)


@pytest.mark.parametrize("size", [(2, 3, 4, 5), (1, 1, 1, 3), (2, 1, 3, 2, 4)])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_against_onnxruntime(size, align_corners):
    if align_corners and 1 in size[2:]:
        pytest.skip("a length-1 axis with align_corners=1: ONNX Runtime puts it at 1, PyTorch (which the "
                    "specification cites) at 0, as tensorforge does; test_compiled_shift_and_scale checks it")
    r = len(size) - 2
    theta = RNG.standard_normal((size[0], r, r + 1)).astype(np.float32)
    check_ort(*one_node("AffineGrid", {"theta": theta}, {"size": i64(*size)}, {"align_corners": align_corners},
                        opset=20))


def test_identity_theta_gives_the_base_grid():
    theta = np.array([[[1, 0, 0], [0, 1, 0]]], np.float32)
    for align_corners, xs, ys in [(1, [-1, 0, 1], [-1, 1]), (0, [-2 / 3, 0, 2 / 3], [-0.5, 0.5])]:
        model, _ = one_node("AffineGrid", {"theta": theta}, {"size": i64(1, 1, 2, 3)},
                            {"align_corners": align_corners}, opset=20)
        got = run_reference(from_onnx(model), theta)[0]
        assert got.shape == (1, 2, 3, 2)
        np.testing.assert_allclose(got[0, :, :, 0], [xs, xs], atol=1e-6)            # x varies along W
        np.testing.assert_allclose(got[0, :, :, 1], [[ys[0]] * 3, [ys[1]] * 3], atol=1e-6)


def test_compiled_shift_and_scale():
    theta = np.array([[[2, 0, 0.5], [0, 1, -1]]], np.float32)          # x' = 2x + 0.5, y' = y - 1
    model, _ = one_node("AffineGrid", {"theta": theta}, {"size": i64(1, 1, 1, 2)}, {"align_corners": 1}, opset=20)
    got = tensorforge.compile(from_onnx(model), target="c")(theta)[0]
    np.testing.assert_allclose(got, [[[[-1.5, -1.0], [2.5, -1.0]]]], atol=1e-6)   # H = 1: y = 0


def test_theta_shape_is_checked():
    theta = np.zeros((1, 3, 4), np.float32)
    model, _ = one_node("AffineGrid", {"theta": theta}, {"size": i64(1, 1, 2, 3)}, opset=20)
    with pytest.raises(GraphError, match="theta has shape"):
        from_onnx(model)
