"""Activation ops compiled to C against their NumPy references: several attribute settings,
float16/32/64, values where naive formulas overflow (|x| = 100), NaN and infinities."""
from __future__ import annotations

import numpy as np
import pytest

from tensorforge.ops import OpError, TensorType, get
from tensorforge.ops.testing import check_op

FLOATS = ("float16", "float32", "float64")
TOL = {"float16": 2e-3, "float32": 1e-5, "float64": 1e-9}

CASES = {
    "relu": [{}],
    "leaky_relu": [{}, {"alpha": 0.3}],
    "thresholded_relu": [{}, {"alpha": -0.5}],
    "hard_sigmoid": [{}, {"alpha": 0.3, "beta": 0.1}],
    "hard_swish": [{}],
    "shrink": [{}, {"bias": 1.5, "lambd": 1.0}],
    "sigmoid": [{}],
    "tanh": [{}],
    "softplus": [{}],
    "softsign": [{}],
    "mish": [{}],
    "elu": [{}, {"alpha": 0.5}],
    "selu": [{}, {"alpha": 2.0, "gamma": 3.0}],
    "celu": [{}, {"alpha": 2.0}],
    "gelu": [{}, {"approximate": "tanh"}],
    "swish": [{}, {"alpha": 0.5}],
}


def inputs(dtype: str) -> np.ndarray:
    rng = np.random.default_rng(5)
    special = [0.0, -0.0, 50.0, -50.0, 100.0, -100.0, np.nan, np.inf, -np.inf]
    return np.concatenate([rng.normal(0, 3, 15), special]).astype(dtype).reshape(4, 6)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_activation(name, dtype):
    x = inputs(dtype)
    for attrs in CASES[name]:
        check_op(name, [x], attrs, rtol=TOL[dtype], atol=TOL[dtype], interpreter=dtype == "float32")


def test_softplus_does_not_overflow():
    (got,) = check_op("softplus", [np.array([100.0, -100.0, 0.0], "float32")])
    np.testing.assert_allclose(got, [100.0, 0.0, np.log(2.0)], rtol=1e-6, atol=1e-30)


def test_relu_keeps_nan():
    (got,) = check_op("relu", [np.array([np.nan, -1.0, 2.0], "float32")])
    assert np.isnan(got[0]) and got[1] == 0 and got[2] == 2


@pytest.mark.parametrize("dtype", FLOATS + ("int32", "int64", "uint32"))
def test_prelu_broadcast_slope(dtype):
    x = np.array([-3, -1, 0, 1, 2, 5] * 3, "float64").reshape(2, 3, 3).astype(dtype)
    slope = np.array([2, 3, 1], dtype)
    check_op("prelu", [x, slope], rtol=TOL.get(dtype, 0), atol=TOL.get(dtype, 0))
    check_op("prelu", [x, slope.reshape(3, 1)], rtol=TOL.get(dtype, 0), atol=TOL.get(dtype, 0))
    check_op("prelu", [x, np.array(2, dtype)], rtol=TOL.get(dtype, 0), atol=TOL.get(dtype, 0))


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8"])
def test_integer_relu_and_shrink(dtype):
    x = np.array([0, 1, 2, 3, 100, 5], dtype)
    if dtype.startswith("int"):
        x[3], x[5] = -3, -100
        check_op("shrink", [x], {"bias": 1.5, "lambd": 1.0})
    check_op("relu", [x])


def test_activation_errors():
    f32 = TensorType((2, 3), "float32")
    with pytest.raises(OpError, match="gelu: approximate must be 'none' or 'tanh'"):
        get("gelu").infer_types([f32], {"approximate": "erf"})
    with pytest.raises(OpError, match="celu: alpha must be nonzero"):
        get("celu").infer_types([f32], {"alpha": 0.0})
    with pytest.raises(OpError, match="leaky_relu: attribute alpha must be a number"):
        get("leaky_relu").infer_types([f32], {"alpha": "big"})
    with pytest.raises(OpError, match="shrink: lambd must be >= 0"):
        get("shrink").infer_types([f32], {"lambd": -1.0})
    with pytest.raises(OpError, match=r"prelu: slope of shape \(4,\) does not broadcast"):
        get("prelu").infer_types([f32, TensorType((4,), "float32")], {})
    with pytest.raises(OpError, match="sigmoid: input has dtype int32"):
        get("sigmoid").infer_types([TensorType((3,), "int32")], {})
