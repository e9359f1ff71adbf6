"""Cross-thread reductions on OpenCL (rfactor + the shared-memory all-reduce of
tir/allreduce.py), against NumPy: random row counts, row lengths and thread counts, including
lengths that the threads do not divide and thread counts that are not powers of two."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorforge
from tensorforge import te


def _rfactor_rows(rows: int, cols: int, threads: int, kind: str):
    A = te.placeholder((rows, cols), name="A")
    k = te.reduce_axis((0, cols), name="k")
    fn = {"sum": te.sum, "max": te.max, "min": te.min}[kind]
    B = te.compute((rows,), lambda i: fn(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    _, ki = s[B].split(k, factor=threads)
    BF = s.rfactor(B, ki)
    s[B].bind(s[B].op.axis[0], te.thread_axis("blockIdx.x"))
    tx = s[B].op.reduce_axis[0]
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    s[BF].compute_at(s[B], tx)
    s[BF].set_scope("local")
    return s, [A, B]


@settings(max_examples=10, deadline=None)
@given(rows=st.integers(1, 40), cols=st.integers(1, 700), threads=st.sampled_from([1, 3, 24, 32, 64, 128]),
       kind=st.sampled_from(["sum", "max", "min"]))
def test_rfactor_all_reduce_random_shapes(rows, cols, threads, kind):
    from gpu_probe import opencl_problem
    if opencl_problem():
        pytest.skip(opencl_problem())
    s, args = _rfactor_rows(rows, cols, threads, kind)
    f = tensorforge.build(s, args, target="opencl")
    a = np.random.default_rng(rows * 1000 + cols).standard_normal((rows, cols)).astype("float32")
    b = np.full(rows, np.nan, "float32")
    f(a, b)
    ref = {"sum": a.sum, "max": a.max, "min": a.min}[kind](axis=1)
    np.testing.assert_allclose(b, ref, rtol=1e-4, atol=1e-4)


def test_all_reduce_source_has_local_memory_and_barriers(opencl):
    s, args = _rfactor_rows(4, 256, 64, "sum")
    f = tensorforge.build(s, args, target="opencl")
    assert "__local float B_red[64];" in f.source
    assert f.source.count("barrier(CLK_LOCAL_MEM_FENCE);") == 7     # after the partials and each stride 32..1
