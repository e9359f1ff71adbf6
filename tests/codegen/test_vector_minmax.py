"""A vectorized float min/max (`te.min`, `te.max`: `a < b ? a : b`, `a > b ? a : b`) is one
vminps/vmaxps on x86 (minpd/maxpd for doubles), which returns its second operand wherever the
compare is false: equal values, +0 and -0, a NaN in either.  So the values are those of the
compare-and-blend it replaces, bit for bit; checked here on every pair of special values, at
16, 8 and 4 lanes (AVX-512, AVX2, SSE builds) and at the 2 lanes that keep the blend."""
import numpy as np
import pytest

import tensorforge
from tensorforge import te
from tensorforge.target import Target

SPECIAL = [np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, 3e38, -3e38, 1e-45, -1e-45, 2.5, 2.5]


def _pairs(dtype: str, lanes: int) -> tuple[np.ndarray, np.ndarray]:
    special = np.array(SPECIAL, dtype)
    if dtype == "float32":            # a NaN with a payload of its own: which operand's NaN comes out shows
        special[1] = np.array([0x7FC01234], np.uint32).view(np.float32)[0]
    a, b = np.repeat(special, len(special)), np.tile(special, len(special))
    pad = -len(a) % lanes
    return np.concatenate([a, np.zeros(pad, dtype)]), np.concatenate([b, np.ones(pad, dtype)])


@pytest.mark.parametrize("dtype, lanes, mcpu, intrinsic", [
    ("float32", 16, "x86-64-v4", "_mm512_max_ps"), ("float32", 8, "x86-64-v3", "_mm256_max_ps"),
    ("float32", 4, "x86-64", "_mm_max_ps"), ("float64", 8, "x86-64-v4", "_mm512_max_pd"),
    ("float64", 4, "x86-64-v3", "_mm256_max_pd"), ("float64", 2, "x86-64", "_mm_max_pd"),
    ("float32", 2, "x86-64", None)])
def test_vector_min_max_are_the_blend_bit_for_bit(dtype, lanes, mcpu, intrinsic):
    a, b = _pairs(dtype, lanes)
    n = len(a)
    A, B = te.placeholder((n,), dtype, name="A"), te.placeholder((n,), dtype, name="B")
    hi = te.compute((n,), lambda i: te.max(A[i], B[i]), name="hi")
    lo = te.compute((n,), lambda i: te.min(A[i], B[i]), name="lo")
    s = te.create_schedule([hi.op, lo.op])
    for t in (hi, lo):
        _, inner = s[t].split(s[t].op.axis[0], factor=lanes)
        s[t].vectorize(inner)
    f = tensorforge.build(s, [A, B, hi, lo], target=f"c -mcpu={mcpu}")
    if intrinsic is None:
        assert "_mm_max_ps" not in f.source
    else:
        assert intrinsic in f.source and intrinsic.replace("max", "min") in f.source
    if mcpu != "x86-64" and Target.parse("c -mcpu=native").simd_lanes("float32") < (16 if "v4" in mcpu else 8):
        pytest.skip(f"this machine cannot run {mcpu} code")
    got_hi, got_lo = np.full(n, 7, dtype), np.full(n, 7, dtype)
    f(a, b, got_hi, got_lo)
    bits = np.uint32 if dtype == "float32" else np.uint64
    np.testing.assert_array_equal(got_hi.view(bits), np.where(a > b, a, b).view(bits))
    np.testing.assert_array_equal(got_lo.view(bits), np.where(a < b, a, b).view(bits))
