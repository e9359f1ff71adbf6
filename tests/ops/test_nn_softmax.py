"""softmax, log_softmax, hardmax over one or several axes: the TE compute, compiled to C, against
the NumPy reference; ties and large values; errors."""
from __future__ import annotations

import numpy as np
import pytest

from tensorforge.ops import get
from tensorforge.ops.registry import OpError, TensorType
from tensorforge.ops.testing import check_op

AXES = [(-1,), (0,), (1,), (1, 2), (0, 1, 2)]


@pytest.mark.parametrize("axes", AXES)
def test_softmax_family(axes):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((2, 3, 4)) * 3).astype("float32")
    sm = check_op("softmax", [x], dict(axes=axes), rtol=1e-5, atol=1e-6, interpreter=True)[0]
    np.testing.assert_allclose(sm.sum(axis=axes), 1.0, rtol=1e-5)
    lsm = check_op("log_softmax", [x], dict(axes=axes), rtol=1e-5, atol=1e-5)[0]
    np.testing.assert_allclose(np.exp(lsm), sm, rtol=1e-5, atol=1e-6)
    hm = check_op("hardmax", [x], dict(axes=axes), interpreter=True)[0]
    assert np.all(hm.sum(axis=axes) == 1)


def test_large_values_do_not_overflow():
    x = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1001.0, -1002.0]], "float32")
    sm = check_op("softmax", [x], {})[0]
    assert np.all(np.isfinite(sm))
    lsm = check_op("log_softmax", [x], {})[0]
    np.testing.assert_allclose(lsm[0], [-2.407606, -1.407606, -0.407606], rtol=1e-5)


def test_hardmax_takes_the_first_of_ties():
    x = np.array([[[1, 3, 3], [3, 0, 0]], [[2, 2, 2], [0, 0, 0]]], "float32")
    last = check_op("hardmax", [x], dict(axes=(-1,)))[0]
    np.testing.assert_array_equal(last[0], [[0, 1, 0], [1, 0, 0]])
    np.testing.assert_array_equal(last[1], [[1, 0, 0], [1, 0, 0]])
    block = check_op("hardmax", [x], dict(axes=(1, 2)))[0]
    np.testing.assert_array_equal(block[0], [[0, 1, 0], [0, 0, 0]])   # first in row-major order


@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_dtypes(dtype):
    x = np.random.default_rng(1).standard_normal((3, 5)).astype(dtype)
    tol = 2e-3 if dtype == "float16" else 1e-12
    for name in ("softmax", "log_softmax", "hardmax"):
        check_op(name, [x], dict(axes=(1,)), rtol=tol, atol=tol)


def _per_node(op: str, x: np.ndarray, axis: int) -> np.ndarray:
    """ONNX's function body of Softmax-13 / LogSoftmax-13 in NumPy, one array per node, each of
    x's dtype: ReduceSum accumulates float16 in float32 (rounded once), bfloat16 in bfloat16."""
    shifted = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(shifted)
    acc = np.float32 if x.dtype == np.float16 else x.dtype
    total = np.sum(e.astype(acc), axis=axis, keepdims=True).astype(x.dtype)
    return e / total if op == "softmax" else shifted - np.log(total)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("axis", [1, 0])
def test_16bit_rounds_at_each_node_of_the_definition(name, dtype, axis):
    """The compiled kernel equals the function body computed node by node in the dtype, bit for
    bit (float32 rounded once at the end is a few ulps away)."""
    if dtype == "bfloat16":
        dtype = pytest.importorskip("ml_dtypes").bfloat16
    x = (np.random.default_rng(2).standard_normal((5, 40)) * 3).astype(dtype)
    got = check_op(name, [x], dict(axes=(axis,)), rtol=0, atol=0)[0]
    want = _per_node(name, x, axis)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


def test_errors():
    with pytest.raises(OpError, match="float tensor"):
        get("softmax").infer_types([TensorType((2, 3), "int32")], {})
    with pytest.raises(OpError, match="axis 2 is out of range"):
        get("log_softmax").infer_types([TensorType((2, 3), "float32")], dict(axes=(2,)))
    with pytest.raises(OpError, match="repeated axes"):
        get("hardmax").infer_types([TensorType((2, 3), "float32")], dict(axes=(1, -1)))
