"""Byte lookups in a 256-entry table at byte indices (a quantized activation folded into a
table): 16 lanes at a time with two vpermi2b on AVX-512 VBMI (lanewise otherwise), exact for
every index; smaller tables and wider indices keep the lanewise gather."""
import numpy as np
import pytest

import tensorforge
from tensorforge import te


def _lookup(table_size: int, table_dtype: str = "uint8"):
    t = te.placeholder((table_size,), table_dtype, name="T")
    x = te.placeholder((512,), "uint8", name="X")
    y = te.compute((512,), lambda i: t[x[i].astype("int32")], name="Y")
    s = te.create_schedule(y.op)
    _, inner = s[y].split(y.op.axis[0], factor=16)
    s[y].vectorize(inner)
    return tensorforge.build(s, [t, x, y], target="c")


@pytest.mark.parametrize("table_dtype", ["uint8", "int8"])
def test_byte_table_lookup_is_two_permutes_and_exact(table_dtype):
    f = _lookup(256, table_dtype)
    assert "tf_lookup256_" in f.source and "_mm512_permutex2var_epi8" in f.source
    rng = np.random.default_rng(0)
    table = rng.integers(0, 256, 256).astype(np.uint8).view(table_dtype)
    x = np.concatenate([np.arange(256), rng.integers(0, 256, 256)]).astype(np.uint8)
    out = np.zeros(512, table_dtype)
    f(table, x, out)
    np.testing.assert_array_equal(out, table[x])


def test_smaller_table_keeps_the_lanewise_gather():
    f = _lookup(200)
    assert "tf_lookup256_" not in f.source and "tf_gather_uint8x16" in f.source
    table = np.arange(200).astype(np.uint8)
    x = (np.arange(512) % 200).astype(np.uint8)
    out = np.zeros(512, np.uint8)
    f(table, x, out)
    np.testing.assert_array_equal(out, table[x])
