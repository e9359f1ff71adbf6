"""The narrow storage types (float8, float4, int4, int2) and the ops that convert them: the dtype
facts, cast_narrow's rounding and saturation rules on random values (NaN, infinities and
out-of-range values included), float8e8m0's three rounding modes, integer wrap-around, bitcast,
quantize_narrow / dequantize_narrow, and the refusal of arithmetic on narrow types."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorforge.ir import dtype as dt
from tensorforge.ops.registry import OpError, TensorType, get

FLOAT8 = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")
SMALL_INTS = {"int4": (-8, 7), "uint4": (0, 15), "int2": (-2, 1), "uint2": (0, 3)}

floats32 = st.floats(width=32, allow_nan=True, allow_infinity=True)
values = st.lists(st.one_of(floats32, st.sampled_from([448.0, 449.0, 465.0, -1e6, 57344.0, 61440.0, 2.0 ** -10,
                                                       -0.0, 240.0, 247.0])), min_size=1, max_size=40)


def cast(x: np.ndarray, dtype: str, **attrs) -> np.ndarray:
    opdef = get("cast_narrow")
    attrs = {"dtype": dtype, **attrs}
    (out_type,) = opdef.infer_types([TensorType(x.shape, x.dtype.name)], attrs)
    (out,) = opdef.run_kernel([x], attrs)
    assert out.dtype == dt.to_numpy(out_type.dtype) and out.shape == x.shape
    return out


def test_dtype_facts():
    for name in dt.NARROW_TYPES:
        assert dt.check(name) == name
        assert dt.to_numpy(name) == np.dtype(getattr(ml_dtypes, name))
        assert dt.itemsize(name) == 1 == dt.to_numpy(name).itemsize
        assert dt.is_narrow(name)
    assert [dt.bits(t) for t in ("float8_e5m2", "float4_e2m1fn", "int4", "uint2")] == [8, 4, 4, 2]
    assert dt.value_range("int4") == (-8, 7) and dt.value_range("float8_e4m3fn") == (-448.0, 448.0)
    assert not dt.is_narrow("float16") and not dt.is_narrow("int8")


@settings(max_examples=60, deadline=None)
@given(values, st.sampled_from(FLOAT8), st.sampled_from([0, 1]))
def test_cast_to_float8_follows_onnx_rules(vals, dtype, saturate):
    x = np.array(vals, np.float32)
    got = cast(x, dtype, saturate=saturate).astype(np.float64)
    lo, hi = dt.value_range(dtype)
    has_inf = dtype == "float8_e5m2"
    for v, g in zip(x.astype(np.float64), got):
        rounded = float(np.array(v).astype(dt.to_numpy(dtype)).astype(np.float64)) if math.isfinite(v) else v
        if math.isnan(v):
            assert math.isnan(g)
        elif saturate and (math.isinf(v) or abs(rounded) > hi or math.isnan(rounded)):
            assert g == math.copysign(hi, v), (v, g)                 # saturate to the largest finite value
        elif not saturate and (math.isinf(v) or math.isnan(rounded) or math.isinf(rounded)):
            assert (g == math.copysign(math.inf, v)) if has_inf else math.isnan(g), (v, g)
        else:
            assert g == rounded, (v, g)                               # round to nearest even, in range
            assert lo <= g <= hi


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=2.0 ** -126, max_value=float(np.finfo(np.float32).max), width=32), min_size=1, max_size=30),
       st.sampled_from(["up", "down", "nearest"]))
def test_cast_to_e8m0_rounds_to_powers_of_two(vals, mode):
    x = np.array(vals, np.float32)
    got = cast(x, "float8_e8m0fnu", saturate=1, round_mode=mode).astype(np.float64)
    for v, g in zip(x.astype(np.float64), got):
        mant, exp = math.frexp(v)                   # v = mant * 2^exp, 0.5 <= mant < 1
        below = 2.0 ** (exp - 1)
        want = {"down": below, "up": below if v == below else 2 * below,
                "nearest": 2 * below if v >= 1.5 * below else below}[mode]
        want = min(max(want, 2.0 ** -127), 2.0 ** 127)
        assert g == want, (v, mode, g, want)


def test_cast_to_e8m0_special_values():
    x = np.array([np.inf, np.nan, 0.0, 2.0 ** 127 * 1.5], np.float32)
    sat = cast(x, "float8_e8m0fnu", saturate=1, round_mode="up").astype(np.float64)
    assert sat[0] == 2.0 ** 127 and np.isnan(sat[1]) and sat[2] == 2.0 ** -127 and sat[3] == 2.0 ** 127
    raw = cast(x, "float8_e8m0fnu", saturate=0, round_mode="nearest").astype(np.float64)
    assert np.isnan(raw[0]) and np.isnan(raw[1]) and np.isnan(raw[2]) and np.isnan(raw[3])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-(2 ** 40), 2 ** 40), min_size=1, max_size=30), st.sampled_from(sorted(SMALL_INTS)))
def test_integers_wrap_into_small_ints(vals, dtype):
    x = np.array(vals, np.int64)
    lo, hi = SMALL_INTS[dtype]
    span = hi - lo + 1
    want = [((v - lo) % span) + lo for v in vals]                   # keep the low bits, two's complement
    assert cast(x, dtype).astype(np.int64).tolist() == want


def test_floats_truncate_into_small_ints_and_back():
    x = np.array([-7.9, -2.5, -0.4, 0.6, 3.5, 6.99], np.float32)
    assert cast(x, "int4").astype(np.int64).tolist() == [-7, -2, 0, 0, 3, 6]
    q = np.arange(-8, 8).astype(ml_dtypes.int4)
    assert cast(q, "float32").tolist() == list(range(-8, 8))
    assert cast(q, "uint8").tolist() == [v % 256 for v in range(-8, 8)]
    assert cast(q, "bool").tolist() == [v != 0 for v in range(-8, 8)]


def test_float8_to_wider_types_is_exact():
    f8 = np.array([-448, -1.5, 0, 0.015625, 3.25, 448], np.float32).astype(ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(cast(f8, "float16"), f8.astype(np.float32).astype(np.float16))
    np.testing.assert_array_equal(cast(f8, "int32"), [-448, -1, 0, 0, 3, 448])
    e5 = cast(f8, "float8_e5m2", saturate=1)                        # narrow to narrow: 3.25 -> 3.0 (even)
    assert e5.astype(np.float32).tolist() == [-448, -1.5, 0, 0.015625, 3.0, 448]


def test_cast_narrow_checks_its_types():
    with pytest.raises(OpError, match="use cast"):
        get("cast_narrow").infer_types([TensorType((2,), "float32")], {"dtype": "float16"})
    with pytest.raises(OpError, match="round_mode"):
        get("cast_narrow").infer_types([TensorType((2,), "float32")], {"dtype": "float8_e8m0fnu", "round_mode": "odd"})


def test_bitcast_reinterprets_bits():
    x = np.array([1.0, -2.5, np.inf], np.float32)
    opdef = get("bitcast")
    (y,) = opdef.run_kernel([x], {"dtype": "int32"})
    np.testing.assert_array_equal(y, x.view(np.int32))
    nib = np.arange(16, dtype=np.uint8).astype(ml_dtypes.uint4)
    (s4,) = opdef.run_kernel([nib], {"dtype": "int4"})
    assert s4.astype(np.int64).tolist() == list(range(8)) + list(range(-8, 0))
    (f4,) = opdef.run_kernel([nib], {"dtype": "float4_e2m1fn"})
    assert f4.astype(np.float32)[[1, 7, 9, 15]].tolist() == [0.5, 6.0, -0.5, -6.0]
    with pytest.raises(OpError, match="equally wide"):
        opdef.infer_types([TensorType((2,), "float32")], {"dtype": "int16"})


def test_quantize_narrow_blocked_int4():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 6)).astype(np.float32) * 4
    scale = np.array([[0.5, 0.25], [1.0, 0.75]], np.float32)        # blocks of 3 along axis 1
    zp = np.array([[1, -2], [0, 3]], np.int8).astype(ml_dtypes.int4)
    attrs = {"axis": 1, "block_size": 3, "dtype": "int4"}
    (q,) = get("quantize_narrow").run_kernel([x, scale, zp], attrs)
    s_full, z_full = np.repeat(scale, 3, axis=1), np.repeat(zp.astype(np.float32), 3, axis=1)
    want = np.clip(np.rint(x / s_full) + z_full, -8, 7)
    np.testing.assert_array_equal(q.astype(np.float32), want)
    (d,) = get("dequantize_narrow").run_kernel([q, scale, zp], {"axis": 1, "block_size": 3, "dtype": ""})
    np.testing.assert_array_equal(d, ((want - z_full) * s_full).astype(np.float32))


def test_quantize_narrow_float8_saturates_per_axis():
    x = np.array([[1.0, 1000.0, -np.inf], [0.3, -5000.0, np.nan]], np.float32)
    scale = np.array([1.0, 2.0], np.float32)
    (q,) = get("quantize_narrow").run_kernel([x, scale, None], {"axis": 0, "dtype": "float8_e4m3fn"})
    got = q.astype(np.float32)
    assert got[0].tolist() == [1.0, 448.0, -448.0]
    assert got[1, 0] == np.float32(0.15).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    assert got[1, 1] == -448.0 and np.isnan(got[1, 2])
    (raw,) = get("quantize_narrow").run_kernel([x, scale, None], {"axis": 0, "dtype": "float8_e4m3fn", "saturate": 0})
    assert np.isnan(raw.astype(np.float32)[0, 1])


def test_arithmetic_on_narrow_types_is_refused():
    f8 = TensorType((4,), "float8_e4m3fn")
    with pytest.raises(OpError, match="add: input 0 has dtype float8_e4m3fn, a storage-only type"):
        get("add").infer_types([f8, f8], {})
    with pytest.raises(OpError, match="cast: cannot produce int4"):
        get("cast").infer_types([TensorType((4,), "float32")], {"dtype": "int4"})
    assert get("transpose").infer_types([f8], {"perm": (0,)})[0].dtype == "float8_e4m3fn"
