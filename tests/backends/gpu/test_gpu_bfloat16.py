"""bfloat16 on the GPU dialects: 16-bit storage, float32 in registers, conversions in both
directions as the C backend makes them (round to nearest even, NaN kept quiet).  Run on OpenCL
against ml_dtypes, compiled for sm_90 with NVRTC."""
from __future__ import annotations

import numpy as np
import pytest

import tensorforge
from tensorforge import te

ml_dtypes = pytest.importorskip("ml_dtypes")


def _round_trip():
    """A (float32) -> B = bfloat16(A) -> C = bfloat16(float32(B) * 2): two kernels."""
    A = te.placeholder((100,), name="A", dtype="float32")
    B = te.compute((100,), lambda i: A[i].astype("bfloat16"), name="B")
    C = te.compute((100,), lambda i: (B[i].astype("float32") * 2.0).astype("bfloat16"), name="C")
    s = te.create_schedule(C.op)
    for t in (B, C):
        bo, bi = s[t].split(t.op.axis[0], factor=32)
        s[t].bind(bo, te.thread_axis("blockIdx.x"))
        s[t].bind(bi, te.thread_axis("threadIdx.x"))
    return s, [A, C]


def test_bfloat16_rounds_like_ml_dtypes_on_gpu(gpu):
    f = tensorforge.build(*_round_trip(), target=gpu)
    assert ("__global ushort*" if gpu == "opencl" else "unsigned short*") in f.source
    a = np.random.default_rng(0).standard_normal(100).astype("float32")
    a[:6] = [np.nan, np.inf, -np.inf, 3.0078125, 1.00390625, 1.01171875]     # ties go to even
    c = np.zeros(100, ml_dtypes.bfloat16)
    f(a, c)
    expected = (a.astype(ml_dtypes.bfloat16).astype("float32") * 2).astype(ml_dtypes.bfloat16)
    assert np.isnan(c[0].astype("float32"))
    np.testing.assert_array_equal(c[1:].view("uint16"), expected[1:].view("uint16"))


def test_bfloat16_compiles_for_sm_90(nvrtc):
    f = tensorforge.build(*_round_trip(), target="cuda -arch=sm_90")
    assert f.binary[:4] == b"\x7fELF" and "__float_as_uint" in f.source and "unsigned short*" in f.source
