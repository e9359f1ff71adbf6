"""bfloat16 end to end: the dtype, C storage with conversions bit-exact to ml_dtypes' (round to
nearest even, NaN kept), scalar and vector loops, the interpreter, ops on bfloat16 tensors."""
from __future__ import annotations

import numpy as np
import pytest

import tensorforge
from tensorforge import te
from tensorforge.ir import dtype as dt
from tensorforge.ops.testing import check_op
from tensorforge.tir import interp

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint16)


def test_dtype_facts():
    assert dt.check("bfloat16") == "bfloat16" and dt.is_float("bfloat16x16")
    assert dt.itemsize("bfloat16") == 2 and dt.to_numpy("bfloat16") == BF16
    assert dt.promote("bfloat16", "float32") == "float32"
    assert dt.promote("bfloat16", "float16") == "float32"
    assert dt.promote("bfloat16", "int32") == "bfloat16"


@pytest.mark.parametrize("vector", [False, True])
def test_conversions_match_ml_dtypes(vector):
    x = te.placeholder((64,), "float32", name="x")
    h = te.compute((64,), lambda i: x[i].astype("bfloat16"), name="h")
    y = te.compute((64,), lambda i: (h[i].astype("float32") * 3.0).astype("bfloat16"), name="y")
    s = te.create_schedule(y.op)
    if vector:
        for t in (h, y):
            _, inner = s[t].split(t.op.axis[0], factor=16)
            s[t].vectorize(inner)
    f = tensorforge.build(s, [x, h, y], target="c")
    data = np.random.default_rng(0).standard_normal(64).astype(np.float32) * 100
    data[:6] = [np.nan, np.inf, -np.inf, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 3.4e38]   # ties to even, overflow
    got_h, got_y = np.empty(64, BF16), np.empty(64, BF16)
    f(data, got_h, got_y)
    want_h = data.astype(BF16)
    want_y = (want_h.astype(np.float32) * 3).astype(BF16)
    np.testing.assert_array_equal(_bits(got_h)[1:], _bits(want_h)[1:])
    np.testing.assert_array_equal(_bits(got_y)[1:], _bits(want_y)[1:])
    assert np.isnan(got_h[0].astype(np.float32)) and np.isnan(got_y[0].astype(np.float32))
    again_h, again_y = np.empty(64, BF16), np.empty(64, BF16)
    interp.run(tensorforge.lower(s, [x, h, y]), data, again_h, again_y)
    np.testing.assert_array_equal(_bits(again_h)[1:], _bits(want_h)[1:])


@pytest.mark.parametrize("src, dst", [("float32", "bfloat16"), ("bfloat16", "float32"), ("bfloat16", "int32"),
                                      ("int8", "bfloat16"), ("bfloat16", "float16"), ("float64", "bfloat16")])
def test_cast_op(src, dst):
    x = (np.random.default_rng(1).standard_normal((3, 17)) * 50).astype(dt.to_numpy(src))
    check_op("cast", [x], {"dtype": dst}, rtol=0, atol=0)


def test_arithmetic_rounds_once_per_operation():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((4, 33)).astype(BF16), rng.standard_normal((4, 33)).astype(BF16)
    check_op("add", [a, b], rtol=0, atol=0)
    check_op("mul", [a, b], rtol=0, atol=0)
    check_op("relu", [a], rtol=0, atol=0)
