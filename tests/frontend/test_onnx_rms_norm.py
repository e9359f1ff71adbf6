"""ONNX RMSNormalization (opset 23): the compiled model against a NumPy reference, for every
axis, a broadcast scale, float16 input computed in float32 (stash_type 1), and a bad axis."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx_compiled_helpers import compile_and_run, one_node_model, rand  # noqa: E402

from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.ir import GraphError  # noqa: E402


def rms_norm_reference(x, scale, axis=-1, epsilon=1e-5):
    axis %= x.ndim
    x32 = x.astype(np.float32)
    mean_sq = np.mean(x32 * x32, axis=tuple(range(axis, x.ndim)), keepdims=True)
    return (x32 / np.sqrt(mean_sq + np.float32(epsilon))).astype(x.dtype) * scale


@pytest.mark.parametrize("axis", [-1, -2, 0, 1, 2])
def test_rms_norm_axes(axis):
    x = rand((2, 3, 5), seed=1)
    scale = rand(x.shape[axis % 3:], seed=2)
    model, feeds = one_node_model("RMSNormalization", {"x": x, "s": scale}, dict(axis=axis, epsilon=1e-3))
    (y,) = compile_and_run(model, feeds)
    np.testing.assert_allclose(y, rms_norm_reference(x, scale, axis, 1e-3), rtol=1e-5, atol=1e-6)


def test_rms_norm_broadcast_scale_and_float16():
    x = rand((2, 4, 6), "float16", seed=3)
    scale = rand((6,), "float16", seed=4)
    model, feeds = one_node_model("RMSNormalization", {"x": x, "s": scale}, dict(axis=1), consts=("s",))
    (y,) = compile_and_run(model, feeds)
    assert y.dtype == np.float16
    np.testing.assert_allclose(y.astype(np.float32), rms_norm_reference(x, scale, 1).astype(np.float32),
                               rtol=2e-3, atol=2e-3)


def test_rms_norm_bad_axis_is_named():
    model, _ = one_node_model("RMSNormalization", {"x": rand((2, 3)), "s": rand((3,))}, dict(axis=2))
    with pytest.raises(GraphError, match="axis=2 is out of range"):
        from_onnx(model)
