"""Binary broadcasting ops (arithmetic, mod, pow, comparisons, logic, bitwise, shifts) compiled
to C against their NumPy references, with integer edge cases the C code must not trap on."""
from __future__ import annotations

import numpy as np
import pytest

from tensorforge.ops import OpError, TensorType, get
from tensorforge.ops.testing import check_op

FLOATS = ("float16", "float32", "float64")
SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
INTS = SIGNED + UNSIGNED
TOL = {"float16": 2e-3, "float32": 1e-5, "float64": 1e-9}


def extremes(dtype: str) -> np.ndarray:
    """Integer values that exercise wrap-around, zero and -1 divisors, both signs."""
    info = np.iinfo(dtype)
    small = [-7, -1, 0, 1, 3, 7] if info.min < 0 else [0, 1, 2, 3, 7, 9]
    return np.array([info.min, info.max, *small], dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div"])
def test_float_arithmetic_broadcasts(name, dtype):
    rng = np.random.default_rng(2)
    a = rng.uniform(-5, 5, (2, 3, 4)).astype(dtype)
    b = rng.uniform(0.5, 3, (3, 1)).astype(dtype)
    check_op(name, [a, b], rtol=TOL[dtype], atol=TOL[dtype])
    check_op(name, [b, np.array(1.5, dtype)], rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("dtype", INTS)
def test_integer_arithmetic_wraps_and_div_truncates(dtype):
    x = extremes(dtype)
    a, b = x[:, None], x[None, :]           # every pair, including x / 0 and MIN / -1
    for name in ("add", "sub", "mul", "div"):
        check_op(name, [a, b])


def test_div_rounds_toward_zero():
    (got,) = check_op("div", [np.array([7, -7, 7, -7], "int32"), np.array([2, 2, -2, -2], "int32")])
    np.testing.assert_array_equal(got, [3, -3, -3, 3])


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", INTS + FLOATS)
def test_mod(dtype, fmod):
    if dtype in FLOATS:
        a = np.array([5.5, -5.5, 0.0, 3.0, np.inf, -2.0, 7.25, -7.25], dtype)[:, None]
        b = np.array([2.0, -2.0, np.inf, -np.inf, 0.0, 1.5], dtype)[None, :]
    else:
        x = extremes(dtype)
        a, b = x[:, None], x[None, :]
    check_op("mod", [a, b], {"fmod": fmod}, rtol=TOL.get(dtype, 0), atol=TOL.get(dtype, 0))


def test_mod_signs():
    a, b = np.array([5, -5, 5, -5], "int64"), np.array([3, 3, -3, -3], "int64")
    np.testing.assert_array_equal(check_op("mod", [a, b], {"fmod": 0})[0], [2, 1, -1, -2])
    np.testing.assert_array_equal(check_op("mod", [a, b], {"fmod": 1})[0], [2, -2, 2, -2])


@pytest.mark.parametrize("base,exponent", [("float32", "float32"), ("float16", "float16"), ("float64", "int64"),
                                           ("float32", "int32"), ("float16", "float32"), ("float32", "uint8")])
def test_pow_floats(base, exponent):
    a = np.array([[0.5, 2.0, 3.0, 1.25]], base)
    b = np.array([[0], [1], [2], [3]], exponent)
    check_op("pow", [a, b], rtol=TOL[base], atol=TOL[base])
    if exponent in FLOATS:
        check_op("pow", [a, np.array([-0.5, 1.5, 2.5, -2.0], exponent)], rtol=TOL[base], atol=TOL[base])


@pytest.mark.parametrize("dtype", ["int32", "int64", "int8", "uint8", "uint64"])
def test_pow_integers_is_exact_and_wraps(dtype):
    info = np.iinfo(dtype)
    a = np.array([[0], [1], [2], [3], [-3 if info.min else 5], [info.max]], dtype)
    b = np.array([0, 1, 2, 7, 31, 63, 64], dtype)
    check_op("pow", [a, b])
    if info.min < 0:
        (got,) = check_op("pow", [np.array([1, -1, -1, 2, 0], dtype), np.array([-3, -3, -2, -1, -1], dtype)])
        np.testing.assert_array_equal(got, [1, -1, 1, 0, 0])


def test_pow_integer_base_float_exponent_truncates():
    (got,) = check_op("pow", [np.array([2, 9, 10], "int32"), np.array([0.5, 0.5, -1.0], "float32")])
    np.testing.assert_array_equal(got, [1, 3, 0])


@pytest.mark.parametrize("name", ["equal", "less", "less_or_equal", "greater", "greater_or_equal"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "int8", "int64", "uint8", "uint64"])
def test_comparisons(name, dtype):
    a = np.array([[0, 1, 2], [3, 2, 1]], dtype)
    b = np.array([1, 1, 2], dtype)
    check_op(name, [a, b])
    if dtype.startswith("float"):
        check_op(name, [np.array([np.nan, 1.0, np.inf], dtype), np.array([np.nan, np.nan, np.inf], dtype)])


def test_logic():
    a, b = np.array([[True, False, True, False]]), np.array([[True], [False]])
    for name in ("logical_and", "logical_or", "logical_xor", "equal"):
        check_op(name, [a, b])
    check_op("logical_not", [a])


@pytest.mark.parametrize("dtype", INTS)
def test_bitwise(dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(3)
    a = rng.integers(info.min, info.max, (3, 4), dtype=dtype, endpoint=True)
    a[0, :3] = [info.min, info.max, 0]
    b = rng.integers(info.min, info.max, (4,), dtype=dtype, endpoint=True)
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        check_op(name, [a, b])
    check_op("bitwise_not", [a])


@pytest.mark.parametrize("dtype", INTS)
def test_shifts_including_out_of_range_amounts(dtype):
    info = np.iinfo(dtype)
    bits = info.bits
    a = np.array([[info.min], [info.max], [1], [0], [5], [-5 if info.min else 6]], dtype)
    s = np.array([0, 1, 3, bits - 2, bits - 1, bits, bits + 5, -1 if info.min else 2], dtype)
    check_op("left_shift", [a, s])
    check_op("right_shift", [a, s])


def test_shift_semantics():
    (left,) = check_op("left_shift", [np.array([1, 2, -1, 64], "int8"), np.array([2, 3, 1, 1], "int8")])
    np.testing.assert_array_equal(left, [4, 16, -2, -128])
    (right,) = check_op("right_shift", [np.array([-8, -1, 8, -8], "int8"), np.array([1, 7, 9, -1], "int8")])
    np.testing.assert_array_equal(right, [-4, -1, 0, -1])


def test_binary_errors():
    f32, i32 = TensorType((2, 3), "float32"), TensorType((3,), "int32")
    with pytest.raises(OpError, match="input 1 has dtype int32 but input 0 has float32"):
        get("add").infer_types([f32, i32], {})
    with pytest.raises(OpError, match=r"add: shapes \(2, 3\), \(4,\) do not broadcast"):
        get("add").infer_types([f32, TensorType((4,), "float32")], {})
    with pytest.raises(OpError, match="fmod must be 0"):
        get("mod").infer_types([f32, f32], {"fmod": 2})
    with pytest.raises(OpError, match="bitwise_and: input has dtype float32"):
        get("bitwise_and").infer_types([f32, f32], {})
    with pytest.raises(OpError, match="logical_and: input has dtype int32"):
        get("logical_and").infer_types([i32, i32], {})
    with pytest.raises(OpError, match="pow: base has dtype bool"):
        get("pow").infer_types([TensorType((2,), "bool"), i32], {})
