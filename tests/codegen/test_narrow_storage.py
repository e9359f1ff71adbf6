"""Narrow storage types (float8, float4, int4, int2) in generated code: buffers of one byte per
element that scalar and vector loops copy, gather and transpose bit for bit, in C and in the
reference interpreter."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tensorforge
from tensorforge import te
from tensorforge.ir import dtype as dt
from tensorforge.tir import interp


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2fnuz", "float4_e2m1fn", "int4", "uint2"])
@pytest.mark.parametrize("vector", [False, True])
def test_transpose_and_gather_copy_bytes(dtype, vector):
    x = te.placeholder((16, 32), dtype, name="x")
    idx = te.placeholder((8,), "int64", name="idx")
    t = te.compute((32, 16), lambda i, j: x[j, i], name="t")
    g = te.compute((32, 8), lambda i, j: t[i, idx[j]], name="g")
    s = te.create_schedule(g.op)
    if vector:
        _, inner = s[t].split(t.op.axis[1], factor=16)
        s[t].vectorize(inner)
    f = tensorforge.build(s, [x, idx, t, g], target="c")
    assert "uint8_t" in f.source
    np_type = dt.to_numpy(dtype)
    bits = 8 if dt.bits(dtype) == 8 else dt.bits(dtype)
    data = np.random.default_rng(0).integers(0, 1 << bits, size=(16, 32)).astype(np.uint8).view(np_type)
    where = np.array([15, 0, 3, 3, 7, 1, 9, 12], np.int64)
    got_t, got_g = np.empty((32, 16), np_type), np.empty((32, 8), np_type)
    f(data, where, got_t, got_g)
    np.testing.assert_array_equal(got_t.view(np.uint8), data.T.view(np.uint8))
    np.testing.assert_array_equal(got_g.view(np.uint8), data.T[:, where].view(np.uint8))
    again_t, again_g = np.empty((32, 16), np_type), np.empty((32, 8), np_type)
    interp.run(tensorforge.lower(s, [x, idx, t, g]), data, where, again_t, again_g)
    np.testing.assert_array_equal(again_g.view(np.uint8), data.T[:, where].view(np.uint8))


def test_narrow_dtype_names_follow_ml_dtypes():
    for name in dt.NARROW_TYPES:
        assert dt.to_numpy(name) == np.dtype(getattr(ml_dtypes, name)) and dt.itemsize(name) == 1
