"""Vector casts from 8-bit integers to 32-bit lanes: printed through 16-bit lanes (GCC builds a
direct byte -> 32-bit __builtin_convertvector one lane at a time, through 16 bits it is the
vector zero/sign extensions), and exact for every byte value."""
import numpy as np
import pytest

import tensorforge
from tensorforge import te


@pytest.mark.parametrize("src, dst", [("uint8", "float32"), ("uint8", "int32"), ("int8", "float32"),
                                      ("int8", "int32")])
def test_byte_to_32_bit_vector_cast(src, dst):
    a = te.placeholder((256,), src, name="A")
    b = te.compute((256,), lambda i: a[i].astype(dst), name="B")
    s = te.create_schedule(b.op)
    _, inner = s[b].split(b.op.axis[0], factor=16)
    s[b].vectorize(inner)
    f = tensorforge.build(s, [a, b], target="c")
    mid = "uint16x16" if src == "uint8" else "int16x16"
    assert "__builtin_convertvector(__builtin_convertvector(" in f.source and mid in f.source
    ext = "zx" if src == "uint8" else "sx"
    assert f"__builtin_ia32_pmov{ext}bd512_mask" in f.source and "#if defined(__AVX512F__)" in f.source
    x = np.arange(256).astype(np.uint8).view(src)
    out = np.zeros(256, dst)
    f(x, out)
    np.testing.assert_array_equal(out, x.astype(dst))


def test_byte_to_32_bit_vector_cast_of_8_lanes():
    """Lane counts other than 16 take the 16-bit form."""
    a = te.placeholder((64,), "int8", name="A")
    b = te.compute((64,), lambda i: a[i].astype("float32"), name="B")
    s = te.create_schedule(b.op)
    _, inner = s[b].split(b.op.axis[0], factor=8)
    s[b].vectorize(inner)
    f = tensorforge.build(s, [a, b], target="c")
    assert "int16x8" in f.source and "pmovsxbd" not in f.source
    x = np.arange(-32, 32).astype(np.int8)
    out = np.zeros(64, np.float32)
    f(x, out)
    np.testing.assert_array_equal(out, x.astype(np.float32))
