"""ONNX NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: reductions none/sum/mean, weights,
ignore_index (also one that every element hits), N-D targets, the optional log_prob output;
the converted graph's references against ONNX Runtime, the compiled model against both."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
from onnx_nn_helpers import check_against_ort, node_model, run_both  # noqa: E402

import tensorforge  # noqa: E402
from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.ir import GraphError  # noqa: E402

RNG = np.random.default_rng(7)


def _case(op_type: str, shape: tuple, reduction: str, weight: bool, ignore: int | None, dtype="float32",
          log_prob: bool = False, target_dtype="int64"):
    n, c = shape[0], shape[1]
    x = RNG.standard_normal(shape).astype(dtype)
    target = RNG.integers(0, c, (n,) + shape[2:]).astype(target_dtype)
    if ignore is not None:
        target.flat[::3] = ignore
    inputs = {"x": x, "target": target, "weight": RNG.random(c).astype(dtype) + 0.1 if weight else None}
    attrs = {"reduction": reduction}
    if ignore is not None:
        attrs["ignore_index"] = ignore
    outputs = ("y", "log_prob") if log_prob else ("y",)
    return node_model(op_type, inputs, attrs, outputs=outputs, opset=13)


@pytest.mark.parametrize("op_type", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weight", [False, True])
@pytest.mark.parametrize("ignore", [None, 1, -1])
def test_loss_against_onnxruntime(op_type, reduction, weight, ignore):
    for shape in [(4, 5), (3, 4, 6), (2, 3, 4, 2)]:
        check_against_ort(*_case(op_type, shape, reduction, weight, ignore), rtol=1e-5, atol=1e-6)


def test_sce_log_prob_output_and_int32_target():
    model, feeds = _case("SoftmaxCrossEntropyLoss", (3, 5, 2), "mean", True, 2, log_prob=True,
                         target_dtype="int32")
    got = check_against_ort(model, feeds)
    assert len(got) == 2 and got[1].shape == (3, 5, 2)


def test_loss_float64():
    check_against_ort(*_case("SoftmaxCrossEntropyLoss", (3, 4), "mean", True, None, dtype="float64"))


def test_mean_is_over_the_elements_not_ignored():
    """Hand-computed: two of the three elements count; their weights are the denominator."""
    x = np.log(np.array([[0.5, 0.25, 0.25], [0.1, 0.2, 0.7], [0.3, 0.3, 0.4]], np.float32))
    target = np.array([0, 2, 1], np.int64)
    weight = np.array([1.0, 3.0, 2.0], np.float32)
    model, feeds = node_model("NegativeLogLikelihoodLoss", {"x": x, "target": target, "weight": weight},
                              {"reduction": "mean", "ignore_index": 1}, opset=13)
    got = run_both(model, feeds)[0][0]
    want = -(np.log(0.5) * 1.0 + np.log(0.7) * 2.0) / (1.0 + 2.0)
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("op_type", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
def test_compiled_matches_onnxruntime(op_type):
    model, feeds = _case(op_type, (3, 5, 4), "mean", True, 0, log_prob=op_type == "SoftmaxCrossEntropyLoss")
    _ours, want = run_both(model, feeds)
    graph = from_onnx(model)
    compiled = tensorforge.compile(graph, target="c")
    got = compiled(*[feeds[v.name] for v in graph.inputs])
    got = got if isinstance(got, (list, tuple)) else [got]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_bad_target_shape_is_reported():
    model, _ = node_model("NegativeLogLikelihoodLoss",
                          {"x": np.zeros((2, 3, 4), np.float32), "target": np.zeros((2, 5), np.int64)}, opset=13)
    with pytest.raises(GraphError, match="target has shape"):
        from_onnx(model)


def test_bad_reduction_is_reported():
    model, _ = node_model("SoftmaxCrossEntropyLoss",
                          {"x": np.zeros((2, 3), np.float32), "target": np.zeros((2,), np.int64)},
                          {"reduction": "max"}, opset=13)
    with pytest.raises(GraphError, match="reduction"):
        from_onnx(model)
