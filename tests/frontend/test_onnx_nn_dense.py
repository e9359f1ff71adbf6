"""ONNX Gemm / MatMul converters against ONNX Runtime: every transA / transB / alpha / beta / C
combination, constant and run-time operands, batched and 1-D MatMul; the graph they build."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
from onnx_nn_helpers import check_against_ort, node_model, rand  # noqa: E402

from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.ir import GraphError  # noqa: E402


@pytest.mark.parametrize("trans_a", [0, 1])
@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("b_const", [False, True])
def test_gemm_transposes(trans_a, trans_b, b_const):
    a = rand((4, 3) if trans_a else (3, 4))
    b = rand((5, 4) if trans_b else (4, 5), seed=1)
    model, feeds = node_model("Gemm", {"a": a, "b": b}, dict(transA=trans_a, transB=trans_b),
                              consts=("b",) if b_const else ())
    check_against_ort(model, feeds)


@pytest.mark.parametrize("c_shape", [None, (), (1,), (5,), (3, 1), (3, 5)])
@pytest.mark.parametrize("alpha, beta", [(1.0, 1.0), (0.5, 2.0), (1.0, 0.0)])
def test_gemm_bias(c_shape, alpha, beta):
    inputs = {"a": rand((3, 4)), "b": rand((4, 5), seed=1)}
    if c_shape is not None:
        inputs["c"] = rand(c_shape, seed=2)
    model, feeds = node_model("Gemm", inputs, dict(alpha=alpha, beta=beta), consts=("b",))
    check_against_ort(model, feeds)


def test_gemm_graph():
    model, _ = node_model("Gemm", {"a": rand((3, 4)), "b": rand((4, 5)), "c": rand(5)}, dict(beta=2.0),
                          consts=("b", "c"))
    graph = from_onnx(model)
    assert [n.op for n in graph.nodes] == ["dense", "add"]
    assert graph.params[graph.nodes[0].inputs[1]].shape == (5, 4)     # B transposed once, at import


@pytest.mark.parametrize("a_shape, b_shape", [((3, 4), (4, 5)), ((4,), (4,)), ((4,), (2, 4, 3)),
                                              ((2, 3, 4), (4,)), ((2, 1, 3, 4), (3, 4, 5)), ((1, 3, 4), (2, 4, 2))])
@pytest.mark.parametrize("b_const", [False, True])
def test_matmul(a_shape, b_shape, b_const):
    model, feeds = node_model("MatMul", {"a": rand(a_shape), "b": rand(b_shape, seed=1)},
                              consts=("b",) if b_const else ())
    check_against_ort(model, feeds, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["int32", "int64", "float64"])
def test_matmul_dtypes(dtype):
    rng = np.random.default_rng(0)
    a, b = rng.integers(-9, 9, (2, 3, 4)).astype(dtype), rng.integers(-9, 9, (4, 2)).astype(dtype)
    model, feeds = node_model("MatMul", {"a": a, "b": b})
    check_against_ort(model, feeds, rtol=0, atol=0)


def test_matmul_graph_uses_dense_for_constant_weights():
    model, _ = node_model("MatMul", {"a": rand((3, 4)), "b": rand((4, 5))}, consts=("b",))
    assert [n.op for n in from_onnx(model).nodes] == ["dense"]
    model, _ = node_model("MatMul", {"a": rand((2, 3, 4)), "b": rand((4, 5))}, consts=("b",))
    assert [n.op for n in from_onnx(model).nodes] == ["matmul"]


def test_errors():
    model, _ = node_model("Gemm", {"a": rand((3, 4)), "b": rand((5, 6))})
    with pytest.raises(GraphError, match="Gemm"):
        from_onnx(model)
    model, _ = node_model("Gemm", {"a": rand((2, 3, 4)), "b": rand((4, 6))})
    with pytest.raises(GraphError, match="must be 2-D"):
        from_onnx(model)
    model, _ = node_model("MatMul", {"a": rand((2, 3)), "b": rand((4, 5))})
    with pytest.raises(GraphError, match="reduced axes differ"):
        from_onnx(model)
