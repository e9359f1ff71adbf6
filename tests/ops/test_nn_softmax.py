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


def test_bfloat16_is_computed_in_float32_and_rounded_once():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.random.default_rng(2).standard_normal((3, 7)).astype(ml_dtypes.bfloat16)
    for name in ("softmax", "log_softmax"):
        got = check_op(name, [x], dict(axes=(1,)), rtol=1e-2, atol=1e-2)[0]
        want = get(name).reference(x.astype(np.float32), axes=(1,)).astype(ml_dtypes.bfloat16)
        # one rounding of the float32 result: at most one bfloat16 step apart
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2 ** -7, atol=2 ** -9)


def test_errors():
    with pytest.raises(OpError, match="float tensor"):
        get("softmax").infer_types([TensorType((2, 3), "int32")], {})
    with pytest.raises(OpError, match="axis 2 is out of range"):
        get("log_softmax").infer_types([TensorType((2, 3), "float32")], dict(axes=(2,)))
    with pytest.raises(OpError, match="repeated axes"):
        get("hardmax").infer_types([TensorType((2, 3), "float32")], dict(axes=(1, -1)))
