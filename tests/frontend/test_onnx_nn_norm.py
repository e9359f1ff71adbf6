"""ONNX normalization converters against ONNX Runtime: BatchNormalization (constant and run-time
statistics, old opsets), InstanceNormalization, LayerNormalization (with its Mean / InvStdDev
outputs), LpNormalization, MeanVarianceNormalization, LRN; training mode with batch statistics."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
from onnx_nn_helpers import check_against_ort, node_model, rand  # noqa: E402

from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.ir import GraphError  # noqa: E402


def bn_inputs(shape):
    c = shape[1]
    return {"x": rand(shape), "s": rand(c, seed=1), "b": rand(c, seed=2), "m": rand(c, seed=3),
            "v": np.abs(rand(c, seed=4)) + 0.5}


@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 5), (1, 3, 4, 4), (1, 2, 2, 3, 2)])
@pytest.mark.parametrize("const", [False, True])
def test_batch_norm(shape, const):
    model, feeds = node_model("BatchNormalization", bn_inputs(shape), dict(epsilon=1e-3),
                              consts=("s", "b", "m", "v") if const else ())
    check_against_ort(model, feeds)


def test_batch_norm_old_opsets():
    for opset, attrs in ((7, dict(spatial=1)), (9, {}), (14, dict(training_mode=0))):
        model, feeds = node_model("BatchNormalization", bn_inputs((1, 3, 4, 4)), attrs, opset=opset)
        check_against_ort(model, feeds)


def _bn_training_reference(f, eps, momentum):
    axes = tuple(k for k in range(f["x"].ndim) if k != 1)
    mean, var = f["x"].mean(axes), f["x"].var(axes)
    shape = (1, -1) + (1,) * (f["x"].ndim - 2)
    y = (f["x"] - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * f["s"].reshape(shape) \
        + f["b"].reshape(shape)
    return y, f["m"] * momentum + mean * (1 - momentum), f["v"] * momentum + var * (1 - momentum), mean, var


@pytest.mark.parametrize("opset,outputs,attrs", [(15, ("y", "rm", "rv"), dict(training_mode=1)),
                                                 (9, ("y", "rm", "rv", "sm", "sv"), {})])
def test_batch_norm_training_uses_batch_statistics(opset, outputs, attrs):
    """training_mode=1 (opset 14+), or the running outputs used (opsets 7-13): the batch's own
    mean and population variance, and the running statistics updated with `momentum`."""
    import tensorforge
    feeds = bn_inputs((2, 3, 4))
    model, _ = node_model("BatchNormalization", feeds, dict(attrs, epsilon=1e-3, momentum=0.8), opset=opset,
                          outputs=outputs)
    got = tensorforge.compile(from_onnx(model))(*feeds.values())
    want = _bn_training_reference(feeds, 1e-3, 0.8)[:len(outputs)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(2, 3, 5), (1, 2, 4, 3), (1, 2, 2, 3, 2)])
def test_instance_norm(shape):
    model, feeds = node_model("InstanceNormalization", {"x": rand(shape), "s": rand(shape[1], seed=1),
                                                        "b": rand(shape[1], seed=2)}, dict(epsilon=1e-3))
    check_against_ort(model, feeds, rtol=1e-4)


@pytest.mark.parametrize("axis", [-1, 1, 2, 0])
@pytest.mark.parametrize("bias", [False, True])
def test_layer_norm(axis, bias):
    shape = (2, 3, 4)
    norm = shape[axis % 3:]
    inputs = {"x": rand(shape), "s": rand(norm, seed=1), "b": rand(norm, seed=2) if bias else None}
    model, feeds = node_model("LayerNormalization", inputs, dict(axis=axis, epsilon=1e-3),
                              outputs=("y", "mean", "inv_std"))
    check_against_ort(model, feeds, rtol=1e-4)
    model, feeds = node_model("LayerNormalization", inputs, dict(axis=axis), consts=("s", "b"))
    check_against_ort(model, feeds, rtol=1e-4)
    assert from_onnx(model).nodes[0].attrs["stash"] is False


@pytest.mark.parametrize("axis, p", [(-1, 2), (0, 1), (1, 2), (1, 1)])
def test_lp_normalization(axis, p):
    model, feeds = node_model("LpNormalization", {"x": rand((3, 4, 2))}, dict(axis=axis, p=p))
    check_against_ort(model, feeds)


@pytest.mark.parametrize("axes", [None, [1], [2, 3]])
def test_mean_variance_normalization(axes):
    model, feeds = node_model("MeanVarianceNormalization", {"x": rand((2, 3, 4, 5))},
                              {} if axes is None else dict(axes=axes))
    check_against_ort(model, feeds, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("size", [1, 3, 5])     # ONNX Runtime takes odd sizes only
def test_lrn(size):
    model, feeds = node_model("LRN", {"x": rand((2, 6, 3, 2))}, dict(size=size, alpha=1e-2, beta=0.6, bias=2.0))
    check_against_ort(model, feeds)


def test_errors():
    model, _ = node_model("LayerNormalization", {"x": rand((2, 3)), "s": rand(3)}, dict(stash_type=16))
    with pytest.raises(NotImplementedError, match="stash_type"):
        from_onnx(model)
    model, _ = node_model("LpNormalization", {"x": rand((2, 3))}, dict(p=3))
    with pytest.raises(GraphError, match="p=3"):
        from_onnx(model)
    model, _ = node_model("LRN", {"x": rand((1, 2, 3, 3))}, {})
    with pytest.raises(GraphError, match="size is required"):
        from_onnx(model)
    model, _ = node_model("InstanceNormalization", {"x": rand((1, 2, 3)), "s": rand(3), "b": rand(2)}, {})
    with pytest.raises(GraphError, match="scale must have shape"):
        from_onnx(model)


def _group_norm_numpy(x, scale_c, bias_c, groups, eps):
    n, c = x.shape[:2]
    g = x.astype(np.float64).reshape(n, groups, -1)
    y = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + eps)).reshape(x.shape)
    shape = (c,) + (1,) * (x.ndim - 2)
    return y * scale_c.reshape(shape) + bias_c.reshape(shape)


@pytest.mark.parametrize("shape, groups", [((2, 6, 5), 3), ((1, 4, 3, 3), 2), ((2, 4, 2, 2), 4), ((1, 3, 4), 1)])
@pytest.mark.parametrize("const", [False, True])
def test_group_norm_opset21_per_channel(shape, groups, const):
    c = shape[1]
    inputs = {"x": rand(shape), "s": rand(c, seed=1), "b": rand(c, seed=2)}
    model, feeds = node_model("GroupNormalization", inputs, {"num_groups": groups, "epsilon": 1e-3},
                              consts=("s", "b") if const else (), opset=21)
    got = check_against_ort(model, feeds, rtol=1e-4, atol=1e-5)[0]
    np.testing.assert_allclose(got, _group_norm_numpy(inputs["x"], inputs["s"], inputs["b"], groups, 1e-3),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("const", [False, True])
def test_group_norm_opset18_per_group(const):
    """Opset 18 scales and shifts per group: each group's value covers its C / G channels."""
    x, s, b = rand((2, 6, 4)), rand(3, seed=1), rand(3, seed=2)
    model, feeds = node_model("GroupNormalization", {"x": x, "s": s, "b": b}, {"num_groups": 3},
                              consts=("s", "b") if const else (), opset=18)
    from tensorforge.graph.reference import run_reference
    graph = from_onnx(model)
    got = run_reference(graph, *[feeds[v.name] for v in graph.inputs])[0]
    np.testing.assert_allclose(got, _group_norm_numpy(x, np.repeat(s, 2), np.repeat(b, 2), 3, 1e-5),
                               rtol=1e-4, atol=1e-5)


def test_group_norm_float16_normalizes_in_float32():
    import tensorforge
    x, s, b = rand((1, 4, 8), "float16", scale=30.0), rand(4, "float16", seed=1), rand(4, "float16", seed=2)
    model, feeds = node_model("GroupNormalization", {"x": x, "s": s, "b": b}, {"num_groups": 2}, opset=21)
    graph = from_onnx(model)
    assert any(node.op == "cast" for node in graph.nodes)
    got = tensorforge.compile(graph, target="c")(x, s, b)[0]
    want = _group_norm_numpy(x.astype(np.float32), s.astype(np.float32), b.astype(np.float32), 2, 1e-5)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("opset, scale_len, message", [(21, 4, "must divide"), (18, 6, "one value per group"),
                                                       (21, 3, "one value per channel")])
def test_group_norm_errors(opset, scale_len, message):
    groups = 4 if message == "must divide" else 3
    model, _ = node_model("GroupNormalization", {"x": rand((1, 6, 2)), "s": rand(scale_len), "b": rand(scale_len)},
                          {"num_groups": groups}, opset=opset)
    with pytest.raises(GraphError, match=message):
        from_onnx(model)
