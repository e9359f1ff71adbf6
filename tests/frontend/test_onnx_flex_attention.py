"""ONNX FlexAttention (ai.onnx.preview): the compiled model against NumPy attention, with grouped
heads, an explicit scale, float16 / float64, score_mod and prob_mod subgraphs (inlined, including
one that builds a causal mask from the scores' shape), and clear errors."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx_compiled_helpers import compile_and_run, convert, one_node_model, rand  # noqa: E402

from tensorforge.graph.ir import GraphError  # noqa: E402

DOMAIN = "ai.onnx.preview"
pytestmark = pytest.mark.filterwarnings("ignore:model .* declares ONNX opset")


def flex_reference(q, k, v, scale=None, score_mod=None, prob_mod=None):
    compute = np.float32 if q.dtype == np.float16 else q.dtype
    reps = q.shape[1] // k.shape[1]
    k, v_c = np.repeat(k, reps, axis=1), np.repeat(v, reps, axis=1).astype(compute)
    scale = 1 / np.sqrt(q.shape[3]) if scale is None else scale
    scores = (q.astype(np.float64) @ np.swapaxes(k.astype(np.float64), 2, 3) * scale).astype(compute)
    if score_mod is not None:
        scores = score_mod(scores).astype(compute)
    e = np.exp(scores - scores.max(-1, keepdims=True))
    probs = e / e.sum(-1, keepdims=True)
    if prob_mod is not None:
        probs = prob_mod(probs).astype(compute)
    return (probs @ v_c).astype(v.dtype)


def modifier(name: str, nodes: list, inits: list) -> helper.GraphProto:
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["B", "H", "L", "S"]) for n in ("x", "y")]
    return helper.make_graph(nodes, name, io[:1], io[1:], inits)


def causal_mask_graph() -> helper.GraphProto:
    """score_mod: -inf above the diagonal, the mask computed from the scores' run shape."""
    c = numpy_helper.from_array
    inits = [c(np.array(0, np.int64), "zero"), c(np.array(1, np.int64), "one"), c(np.array(2, np.int64), "two"),
             c(np.array(3, np.int64), "three"), c(np.array([-1, 1], np.int64), "col"),
             c(np.array([1, -1], np.int64), "row"), c(np.array(-np.inf, np.float32), "neg_inf")]
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "two"], ["L"]), helper.make_node("Gather", ["shape", "three"], ["S"]),
             helper.make_node("Range", ["zero", "L", "one"], ["qr"]), helper.make_node("Range", ["zero", "S", "one"], ["kr"]),
             helper.make_node("Reshape", ["qr", "col"], ["qi"]), helper.make_node("Reshape", ["kr", "row"], ["ki"]),
             helper.make_node("GreaterOrEqual", ["qi", "ki"], ["keep"]),
             helper.make_node("Where", ["keep", "x", "neg_inf"], ["y"])]
    return modifier("causal", nodes, inits)


def scale_graph(factor: float) -> helper.GraphProto:
    return modifier("times", [helper.make_node("Mul", ["x", "f"], ["y"])],
                    [numpy_helper.from_array(np.array(factor, np.float32), "f")])


def flex_case(q_shape, k_shape, v_shape=None, dtype="float32", **attrs):
    q, k = rand(q_shape, dtype, 1), rand(k_shape, dtype, 2)
    v = rand(v_shape or k_shape, dtype, 3)
    model, feeds = one_node_model("FlexAttention", {"q": q, "k": k, "v": v}, attrs, opset=26, domain=DOMAIN)
    return model, feeds


@pytest.mark.parametrize("q_shape, k_shape, v_shape, dtype, attrs", [
    ((2, 4, 5, 8), (2, 4, 6, 8), None, "float32", {}),
    ((1, 6, 3, 4), (1, 2, 7, 4), (1, 2, 7, 5), "float32", dict(scale=0.2)),
    ((2, 2, 4, 8), (2, 2, 4, 8), None, "float64", {}),
    ((1, 2, 4, 8), (1, 2, 5, 8), None, "float16", {}),
])
def test_flex_attention(q_shape, k_shape, v_shape, dtype, attrs):
    model, feeds = flex_case(q_shape, k_shape, v_shape, dtype, **attrs)
    (y,) = compile_and_run(model, feeds)
    want = flex_reference(feeds["q"], feeds["k"], feeds["v"], attrs.get("scale"))
    assert y.dtype == want.dtype and y.shape == want.shape
    tol = 2e-3 if dtype == "float16" else 1e-5
    np.testing.assert_allclose(y.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)


def test_flex_attention_modifier_subgraphs():
    model, feeds = flex_case((1, 2, 5, 4), (1, 2, 5, 4), score_mod=causal_mask_graph(), prob_mod=scale_graph(0.5))
    (y,) = compile_and_run(model, feeds)
    causal = np.tril(np.ones((5, 5), bool))
    want = flex_reference(feeds["q"], feeds["k"], feeds["v"], score_mod=lambda s: np.where(causal, s, -np.inf),
                          prob_mod=lambda p: p * 0.5)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def test_flex_attention_errors_are_named():
    model, _ = flex_case((1, 3, 4, 8), (1, 2, 4, 8))
    with pytest.raises(GraphError, match="3 query heads cannot be grouped over 2"):
        convert(model)
    bad = modifier("bad", [helper.make_node("ReduceSum", ["x"], ["y"], keepdims=0)], [])
    model, _ = flex_case((1, 2, 4, 8), (1, 2, 4, 8), score_mod=bad)
    with pytest.raises(GraphError, match="score_mod must keep the shape"):
        convert(model)
