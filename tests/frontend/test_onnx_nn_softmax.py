"""ONNX Softmax / LogSoftmax / Hardmax against ONNX Runtime, in both semantics: opset >= 13
normalizes along one axis, older opsets over the input flattened to 2-D at `axis`; in float16
and bfloat16, compiled, against the ONNX reference of their function bodies."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("onnxruntime")
from onnx_compiled_helpers import compile_and_run, one_node_model  # noqa: E402
from onnx_function_helpers import assert_close, expanded, onnx_reference  # noqa: E402
from onnx_nn_helpers import check_against_ort, node_model, rand  # noqa: E402

from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.ir import GraphError  # noqa: E402

OPS = ["Softmax", "LogSoftmax", "Hardmax"]


@pytest.mark.parametrize("op_type", OPS)
@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, -2])
def test_softmax_family(op_type, opset, axis):
    model, feeds = node_model(op_type, {"x": rand((2, 3, 4), scale=3)}, {} if axis is None else dict(axis=axis),
                              opset=opset)
    check_against_ort(model, feeds, rtol=1e-5, atol=1e-6)


def test_axes_attribute():
    model, _ = node_model("Softmax", {"x": rand((2, 3, 4))}, dict(axis=1), opset=11)
    assert from_onnx(model).nodes[0].attrs["axes"] == (1, 2)
    model, _ = node_model("Softmax", {"x": rand((2, 3, 4))}, dict(axis=1), opset=13)
    assert from_onnx(model).nodes[0].attrs["axes"] == (1,)


def test_hardmax_ties():
    x = np.array([[1, 3, 3], [2, 2, 2]], "float32")
    model, feeds = node_model("Hardmax", {"x": x}, {})
    check_against_ort(model, feeds, rtol=0, atol=0)


def test_errors():
    model, _ = node_model("Softmax", {"x": rand((2, 3))}, dict(axis=2))
    with pytest.raises(GraphError, match="Softmax.*out of range"):
        from_onnx(model)


# -- 16-bit floats: each node of the function body rounds to the dtype -------------------------
INNERMOST = [((4, 6), -1), ((3, 33), -1), ((2, 5, 64), 2), ((3, 1, 7), 2)]
OUTER = [((6, 4), 0), ((3, 8, 5), 1)]


def _softmax_case(op_type: str, dtype: str, shape: tuple, axis: int, scale: float, seed: int):
    """(model, its function body, feeds, the ONNX reference's outputs of the body)."""
    pytest.importorskip("ml_dtypes")
    x = rand(shape, "float32", seed=seed, scale=scale).astype(np.dtype(dtype))
    model, feeds = one_node_model(op_type, {"x": x}, dict(axis=axis), opset=13)
    body = expanded(model)
    return model, body, feeds, onnx_reference(body, feeds)[0]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(op_type=st.sampled_from(["Softmax", "LogSoftmax"]), dtype=st.sampled_from(["float16", "bfloat16"]),
       case=st.sampled_from(INNERMOST), scale=st.sampled_from([1.0, 4.0]), seed=st.integers(0, 2 ** 16))
def test_16bit_softmax_rounds_as_its_function_body(op_type, dtype, case, scale, seed):
    """Softmax-13 is ReduceMax, Sub, Exp, ReduceSum, Div of float16 (or bfloat16) tensors, each
    node's result rounded to the dtype.  The compiled op and its compiled body both give what the
    ONNX reference gives for the body (for Softmax, also for the op itself): a float32 softmax
    rounded once is up to a few ulps off, beyond rtol 1e-3."""
    model, body, feeds, want = _softmax_case(op_type, dtype, *case, scale, seed)
    got = compile_and_run(model, feeds)[0]
    assert_close(got, want, rtol=1e-3, what=op_type)
    assert_close(compile_and_run(body, feeds)[0], want, rtol=1e-3, what=f"{op_type} body")
    if op_type == "Softmax":    # the reference's LogSoftmax takes the log of the rounded softmax
        assert_close(got, onnx_reference(model, feeds)[0], rtol=1e-3, what=f"{op_type} against the reference's op")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", OUTER)
@pytest.mark.parametrize("op_type", ["Softmax", "LogSoftmax"])
def test_16bit_softmax_over_an_outer_axis(op_type, case, dtype):
    """ReduceSum accumulates float16 in float32 on every axis; NumPy (so the reference) does so
    along the innermost axis only and rounds each addition to float16 along the others, so there
    the two may differ by an ulp or two of the sum.  bfloat16 accumulates in bfloat16 in both."""
    model, body, feeds, want = _softmax_case(op_type, dtype, *case, 1.0, 0)
    rtol = 4e-3 if dtype == "float16" else 1e-3
    assert_close(compile_and_run(model, feeds)[0], want, rtol=rtol, what=op_type)
    np.testing.assert_array_equal(compile_and_run(model, feeds)[0], compile_and_run(body, feeds)[0])
