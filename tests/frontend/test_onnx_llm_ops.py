"""ONNX RotaryEmbedding (opset 23), SwiGLU (opset 28) and TensorScatter (opset 24): the compiled
model against NumPy references, every layout and mode, and clear errors."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx_compiled_helpers import compile_and_run, one_node_model, rand  # noqa: E402

from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.ir import GraphError  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:model .* declares ONNX opset")


def rotary_reference(x, cos, sin, positions=None, interleaved=False, rot=0, heads=0):
    """Rotate each (x[2i], x[2i+1]) (interleaved) or (x[i], x[i + R/2]) pair by its position's angle."""
    x4 = x.reshape(x.shape[0], x.shape[1], heads, -1) if x.ndim == 3 else np.transpose(x, (0, 2, 1, 3))
    rot = rot or x4.shape[3]
    if positions is not None:
        cos, sin = cos[positions], sin[positions]
    y = x4.copy()
    for i in range(rot // 2):
        a, b = (2 * i, 2 * i + 1) if interleaved else (i, i + rot // 2)
        c, s = cos[:, :, None, i], sin[:, :, None, i]
        y[..., a] = c * x4[..., a] - s * x4[..., b]
        y[..., b] = s * x4[..., a] + c * x4[..., b]
    return y.reshape(x.shape) if x.ndim == 3 else np.transpose(y, (0, 2, 1, 3))


@pytest.mark.parametrize("rank, positions, interleaved, rot", [
    (4, True, False, 0), (4, False, True, 0), (3, True, True, 4), (3, False, False, 6), (4, True, True, 2),
])
def test_rotary_embedding(rank, positions, interleaved, rot):
    batch, heads, seq, head = 2, 3, 5, 8
    x = rand((batch, heads, seq, head) if rank == 4 else (batch, seq, heads * head), seed=1)
    half = (rot or head) // 2
    angles = np.random.default_rng(2).uniform(0, 6, (11, half) if positions else (batch, seq, half))
    pos = np.random.default_rng(3).integers(0, 11, (batch, seq)) if positions else None
    attrs = dict(interleaved=int(interleaved), rotary_embedding_dim=rot)
    if rank == 3:
        attrs["num_heads"] = heads
    inputs = {"x": x, "cos": np.cos(angles).astype(np.float32), "sin": np.sin(angles).astype(np.float32),
              "pos": pos}
    model, feeds = one_node_model("RotaryEmbedding", inputs, attrs, opset=23)
    (y,) = compile_and_run(model, feeds)
    want = rotary_reference(x, inputs["cos"], inputs["sin"], pos, interleaved, rot, heads)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def test_rotary_embedding_errors_are_named():
    x, c = rand((2, 4, 12)), rand((2, 4, 3))
    model, _ = one_node_model("RotaryEmbedding", {"x": x, "cos": c, "sin": c}, {}, opset=23)
    with pytest.raises(GraphError, match="needs a num_heads attribute"):
        from_onnx(model)
    c = rand((2, 4, 2))
    model, _ = one_node_model("RotaryEmbedding", {"x": x, "cos": c, "sin": c}, dict(num_heads=2), opset=23)
    with pytest.raises(GraphError, match=r"cos_cache must give shape \[2, 4, 3\]"):
        from_onnx(model)


@pytest.mark.parametrize("alpha, dtype", [(1.0, "float32"), (1.702, "float32"), (1.0, "float16")])
def test_swiglu(alpha, dtype):
    a, b = rand((3, 16), dtype, 1, 3.0), rand((3, 16), dtype, 2)
    model, feeds = one_node_model("SwiGLU", {"a": a, "b": b}, dict(alpha=alpha), opset=28)
    (y,) = compile_and_run(model, feeds)
    a64 = a.astype(np.float64)
    want = a64 / (1 + np.exp(-alpha * a64)) * b
    assert y.dtype == np.dtype(dtype)
    tol = 2e-3 if dtype == "float16" else 1e-5
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=tol, atol=tol)


def scatter_reference(past, update, write, mode, axis):
    out = past.copy()
    axis %= past.ndim
    for prefix in np.ndindex(past.shape[:axis]):
        for s in range(update.shape[axis]):
            m = write[prefix[0]] + s
            m = m % past.shape[axis] if mode == "circular" else m
            out[(*prefix, m)] = update[(*prefix, s)]
    return out


@pytest.mark.parametrize("shape, steps, axis, mode, write", [
    ((2, 3, 6, 4), 2, -2, "linear", [0, 3]), ((3, 5, 4), 1, 1, "linear", [4, 0, 2]),
    ((2, 3, 5, 4), 3, 2, "circular", [4, 1]), ((2, 6, 3), 2, 1, "linear", None),
    ((2, 4, 3, 2), 2, 1, "circular", [3, 2]),
])
def test_tensor_scatter(shape, steps, axis, mode, write):
    past = rand(shape, seed=1)
    ushape = list(shape)
    ushape[axis] = steps
    update = rand(ushape, seed=2)
    write = np.array(write, np.int64) if write is not None else None
    model, feeds = one_node_model("TensorScatter", {"past": past, "update": update, "write": write},
                                  dict(mode=mode, axis=axis), opset=24)
    (y,) = compile_and_run(model, feeds)
    want = scatter_reference(past, update, write if write is not None else np.zeros(shape[0], np.int64), mode, axis)
    np.testing.assert_array_equal(y, want)


def test_tensor_scatter_errors_are_named():
    model, _ = one_node_model("TensorScatter", {"past": rand((2, 4, 3)), "update": rand((2, 5, 3))}, dict(axis=1),
                              opset=24)
    with pytest.raises(GraphError, match="no longer along it"):
        from_onnx(model)
