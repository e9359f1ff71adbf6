"""ONNX Adagrad, Momentum and Adam (ai.onnx.preview.training): the compiled model against NumPy
updates, one and several optimized tensors, the first iteration (T = 0) and later ones from one
compiled model, both momentum modes, and clear errors."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx_compiled_helpers import compile_and_run, convert, one_node_model, rand  # noqa: E402

from tensorforge.graph.ir import GraphError  # noqa: E402

DOMAIN = "ai.onnx.preview.training"


def adagrad(r, t, x, grad, h, norm_coefficient=0.0, decay_factor=0.0, epsilon=1e-6):
    reg = norm_coefficient * x + grad
    h = h + reg * reg
    return x - r / (1 + t * decay_factor) * reg / (np.sqrt(h) + epsilon), h


def momentum(r, t, x, grad, v, alpha, beta, mode, norm_coefficient):
    reg = norm_coefficient * x + grad
    v = alpha * v + (beta if t > 0 else 1.0) * reg
    return (x - r * v if mode == "standard" else x - r * (reg + alpha * v)), v


def adam(r, t, x, grad, v, h, alpha=0.9, beta=0.999, epsilon=1e-6, norm_coefficient=0.0, norm_coefficient_post=0.0):
    reg = norm_coefficient * x + grad
    v = alpha * v + (1 - alpha) * reg
    h = beta * h + (1 - beta) * reg * reg
    rate = r * np.sqrt(1 - beta ** t) / (1 - alpha ** t) if t > 0 else r
    return (1 - norm_coefficient_post) * (x - rate * v / (np.sqrt(h) + epsilon)), v, h


def optimizer_case(op, attrs, shapes, states):
    """(model, feeds, per-tensor arrays): R, T, then X_i, G_i and each state for every shape."""
    arrays = [[rand(s, seed=10 * i + k) if k < 2 else np.abs(rand(s, seed=10 * i + k)) for k in range(2 + states)]
              for i, s in enumerate(shapes)]
    inputs = {"R": np.array(0.1, np.float32), "T": np.array(0, np.int64)}
    for k in range(2 + states):
        for i in range(len(shapes)):
            inputs[f"in{k}_{i}"] = arrays[i][k]
    outputs = [f"out{k}_{i}" for k in range(1 + states) for i in range(len(shapes))]
    model, feeds = one_node_model(op, inputs, attrs, outputs=outputs, opset=17, domain=DOMAIN)
    return model, feeds, arrays


def check(model, feeds, arrays, reference, steps=(0, 3)):
    for t in steps:
        feeds = dict(feeds, T=np.array(t, np.int64))
        got = compile_and_run(model, feeds)
        want = [reference(0.1, t, *a) for a in arrays]
        want = [w[k] for k in range(len(want[0])) for w in want]          # grouped like the outputs
        for gv, wv in zip(got, want):
            np.testing.assert_allclose(gv, wv, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shapes", [[(3,)], [(1,), (2, 3)]])
def test_adagrad(shapes):
    attrs = dict(decay_factor=0.1, epsilon=1e-5, norm_coefficient=0.001)
    model, feeds, arrays = optimizer_case("Adagrad", attrs, shapes, 1)
    check(model, feeds, arrays, lambda r, t, *a: adagrad(r, t, *a, **attrs))


@pytest.mark.parametrize("mode", ["standard", "nesterov"])
def test_momentum(mode):
    attrs = dict(alpha=0.9, beta=0.5, mode=mode, norm_coefficient=0.01)
    model, feeds, arrays = optimizer_case("Momentum", attrs, [(4,), (2, 2)], 1)
    check(model, feeds, arrays, lambda r, t, *a: momentum(r, t, *a, **attrs))


@pytest.mark.parametrize("attrs", [dict(alpha=0.95, beta=0.85, epsilon=0.01, norm_coefficient=0.001),
                                   dict(norm_coefficient_post=0.02)])
def test_adam(attrs):
    model, feeds, arrays = optimizer_case("Adam", attrs, [(2,), (3, 2)], 2)
    check(model, feeds, arrays, lambda r, t, *a: adam(r, t, *a, **attrs))


def test_optimizer_errors_are_named():
    model, _, _ = optimizer_case("Momentum", dict(alpha=0.9, beta=0.5, norm_coefficient=0.0), [(2,)], 1)
    with pytest.raises(GraphError, match=r"missing required attribute\(s\): mode"):
        convert(model)
    model, _, _ = optimizer_case("Adam", {}, [(2,), (3,)], 1)         # one state short per tensor
    with pytest.raises(GraphError, match="4 groups of equal size"):
        convert(model)
