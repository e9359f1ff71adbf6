"""N-input maximum/minimum/sum/mean, where, clip, cast and identity compiled to C against their
NumPy references, plus clear errors for bad attributes and types."""
from __future__ import annotations

import numpy as np
import pytest

from tensorforge.ops import OpError, TensorType, get
from tensorforge.ops.testing import check_op

ALL = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
       "float16", "float32", "float64")


def sample(dtype: str) -> np.ndarray:
    if dtype == "bool":
        return np.array([True, False, True, True, False, False])
    if dtype.startswith("float"):
        return np.array([0.0, -0.0, 1.5, 2.5, 100.75, -7.25], dtype)
    info = np.iinfo(dtype)
    return np.array([info.min, info.max, 0, 1, 100, info.max // 3], dtype)


@pytest.mark.parametrize("dtype", ["float16", "float32", "int8", "int64", "uint64"])
@pytest.mark.parametrize("name", ["maximum", "minimum", "sum"])
def test_variadic(name, dtype):
    a, b = sample(dtype).reshape(2, 3), sample(dtype)[:3][::-1].copy()
    check_op(name, [a])
    check_op(name, [a, b])
    check_op(name, [a, b, a[:1], np.array(1, dtype)])


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_mean(dtype):
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=(2, 3)).astype(dtype), rng.normal(size=(3,)).astype(dtype)
    check_op("mean", [a], rtol=1e-3)
    check_op("mean", [a, b, a[:1], b], rtol=1e-3)


def test_maximum_minimum_propagate_nan():
    n, m = np.array([np.nan, 1, 2], "float32"), np.array([0, np.nan, 1], "float32")
    (mx,) = check_op("maximum", [n, m])
    (mn,) = check_op("minimum", [m, n, n])
    assert np.isnan(mx[:2]).all() and mx[2] == 2
    assert np.isnan(mn[:2]).all() and mn[2] == 1


@pytest.mark.parametrize("dtype", ALL)
def test_where(dtype):
    cond = np.array([[True], [False]])
    check_op("where", [cond, sample(dtype)[:3], sample(dtype)[3:]])
    check_op("where", [np.array(True), sample(dtype), np.array(sample(dtype)[0])])


@pytest.mark.parametrize("dtype", ["float16", "float32", "int8", "uint8", "int64"])
def test_clip_attribute_bounds(dtype):
    x = sample(dtype)
    for attrs in ({}, {"min": 1}, {"max": 5}, {"min": 1, "max": 5}, {"min": 5, "max": 1}, {"min": -1000, "max": 1000}):
        check_op("clip", [x], attrs)


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint16"])
def test_clip_tensor_bounds(dtype):
    x, lo, hi = sample(dtype).reshape(2, 3), np.array(1, dtype), np.array([5, 7, 9], dtype)
    check_op("clip", [x, lo, hi])
    check_op("clip", [x, None, hi])
    check_op("clip", [x, lo, None])
    check_op("clip", [x, None, hi], {"min": 0})


def test_clip_keeps_nan_and_min_above_max_gives_max():
    (got,) = check_op("clip", [np.array([np.nan, -np.inf, np.inf, 0.5], "float32")], {"min": -1.0, "max": 1.0})
    np.testing.assert_array_equal(got, [np.nan, -1, 1, 0.5])
    (got,) = check_op("clip", [np.array([0, 3, 9], "int32")], {"min": 5, "max": 2})
    np.testing.assert_array_equal(got, [2, 2, 2])


def cast_input(src: str, dst: str) -> np.ndarray:
    """Values whose conversion from `src` to `dst` is defined (no out-of-range float -> int)."""
    if src.startswith("float") and dst != "bool" and not dst.startswith("float"):
        x = np.array([0, 1.5, 2.7, 100.9, 3, 0.25], src)
        if dst.startswith("int"):
            x[2] = -3.9
        return x
    return sample(src)


CAST_PAIRS = [("bool", "float32"), ("float32", "bool"), ("int64", "int8"), ("int8", "uint64"), ("uint8", "int8"),
              ("float64", "float16"), ("float16", "int32"), ("float32", "uint8"), ("uint64", "float32"),
              ("int32", "float64"), ("int16", "bool"), ("uint32", "int16")]


@pytest.mark.parametrize("src,dst", CAST_PAIRS)
def test_cast(src, dst):
    check_op("cast", [cast_input(src, dst)], {"dtype": dst}, rtol=0, atol=0)


@pytest.mark.slow
@pytest.mark.parametrize("src", ALL)
def test_cast_between_every_pair(src):
    for dst in ALL:
        check_op("cast", [cast_input(src, dst)], {"dtype": dst}, rtol=0, atol=0)


def test_cast_rounds_once_to_float16():
    x = np.array([1 + 2 ** -11 + 2 ** -40, 1 + 2 ** -11, 65519.99, 1e-8, 6e-8, 1e6, np.nan, -np.inf], "float64")
    check_op("cast", [x], {"dtype": "float16"}, rtol=0, atol=0)
    check_op("cast", [np.array([2 ** 11 + 1, 2 ** 53 + 1, -(2 ** 40) - 3, 65519, 65520], "int64")],
             {"dtype": "float16"}, rtol=0, atol=0)
    (got,) = check_op("cast", [np.array([np.nan, np.inf, 0.0, -0.0], "float32")], {"dtype": "bool"})
    np.testing.assert_array_equal(got, [True, True, False, False])


def test_identity():
    check_op("identity", [sample("int8")])
    check_op("identity", [np.zeros((2, 0, 3), "float32")])


def test_misc_errors():
    f32 = TensorType((2, 3), "float32")
    with pytest.raises(OpError, match="cast: dtype must be one of"):
        get("cast").infer_types([f32], {"dtype": "float8"})
    with pytest.raises(OpError, match="where: condition has dtype float32"):
        get("where").infer_types([f32, f32, f32], {})
    with pytest.raises(OpError, match="where: x has dtype float32 but y has int32"):
        get("where").infer_types([TensorType((3,), "bool"), f32, TensorType((3,), "int32")], {})
    with pytest.raises(OpError, match="clip: min=1.5 is not an integer"):
        get("clip").infer_types([TensorType((3,), "int32")], {"min": 1.5})
    with pytest.raises(OpError, match="clip: min is given both as an input and as an attribute"):
        get("clip").infer_types([f32, TensorType((), "float32"), None], {"min": 1.0})
    with pytest.raises(OpError, match=r"does not broadcast to x's shape \(2, 3\)"):
        get("clip").infer_types([f32, TensorType((4, 3), "float32"), None], {})
    with pytest.raises(OpError, match="mean: input has dtype int32"):
        get("mean").infer_types([TensorType((3,), "int32")], {})
    with pytest.raises(OpError, match="maximum: takes one or more inputs"):
        get("maximum").infer_types([], {})
