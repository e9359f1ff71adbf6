"""TE schedules built for OpenCL and run (on PoCL when there is no GPU), against NumPy."""
from __future__ import annotations

import numpy as np
import pytest
from gpu_probe import SPELLING
from gpu_schedules import injective, matmul_shared_vthread, row_sum
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorforge
from tensorforge import te
from tensorforge.tir.passes.lower_thread_binding import ThreadBindingError


def _nan(shape, dtype="float32"):
    return np.full(shape, np.nan, dtype)


@pytest.mark.parametrize("vthread", [True, False])
def test_matmul_with_shared_memory_and_vthread_equals_numpy(gpu, vthread):
    s, args = matmul_shared_vthread(vthread=vthread)
    f = tensorforge.build(s, args, target=gpu)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 64)).astype("float32")
    b = rng.standard_normal((64, 96)).astype("float32")
    c = _nan((128, 96))
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    assert f"{SPELLING[gpu]['shared']} float" in f.source and SPELLING[gpu]["barrier"] in f.source


def test_matmul_source_is_printed_without_a_device():
    s, args = matmul_shared_vthread()
    lowered = tensorforge.lower(s, args, target="opencl")
    text = str(lowered)
    assert "barrier('shared')" in text and "device_kernel" in text


@pytest.mark.parametrize("kind", ["opencl", "cuda"])
@settings(max_examples=12, deadline=None)
@given(n=st.integers(1, 300), m=st.integers(1, 5), threads=st.sampled_from([1, 7, 32, 64]),
       op=st.sampled_from(["exp", "relu", "affine", "round"]))
def test_injective_random_shapes(n, m, threads, op, kind):
    from gpu_probe import gpu_problem
    if gpu_problem(kind):
        pytest.skip(gpu_problem(kind))
    fns = {"exp": (te.exp, np.exp),
           "relu": (lambda x: te.if_then_else(x > 0, x, 0.0), lambda x: np.where(x > 0, x, 0)),
           "affine": (lambda x: x * 3.0 - 1.5, lambda x: x * np.float32(3) - np.float32(1.5)),
           "round": (te.round, np.round)}
    te_fn, np_fn = fns[op]
    s, args = injective((n, m), threads, te_fn)
    f = tensorforge.build(s, args, target=kind)
    a = (np.random.default_rng(n * 7 + m).standard_normal((n, m)) * 3).astype("float32")
    b = _nan((n, m))
    f(a, b)
    np.testing.assert_allclose(b, np_fn(a), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["opencl", "cuda"])
@settings(max_examples=8, deadline=None)
@given(rows=st.integers(1, 200), cols=st.integers(1, 70), threads=st.sampled_from([1, 16, 64]))
def test_row_sum_random_shapes(rows, cols, threads, kind):
    from gpu_probe import gpu_problem
    if gpu_problem(kind):
        pytest.skip(gpu_problem(kind))
    s, args = row_sum(rows, cols, threads)
    f = tensorforge.build(s, args, target=kind)
    a = np.random.default_rng(rows).standard_normal((rows, cols)).astype("float32")
    b = _nan((rows,))
    f(a, b)
    np.testing.assert_allclose(b, a.sum(axis=1), rtol=1e-4, atol=1e-4)


def test_two_root_stages_become_two_kernels_with_a_workspace(opencl):
    A = te.placeholder((100,), name="A")
    T = te.compute((100,), lambda i: A[i] * 2.0, name="T")
    B = te.compute((100,), lambda i: T[99 - i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    for X in (T, B):
        o, i = s[X].split(X.op.axis[0], factor=32)
        s[X].bind(o, te.thread_axis("blockIdx.x"))
        s[X].bind(i, te.thread_axis("threadIdx.x"))
    f = tensorforge.build(s, [A, B], target="opencl")
    assert f.source.count("__kernel void") == 2
    a = np.arange(100, dtype="float32")
    b = _nan((100,))
    f(a, b)
    np.testing.assert_array_equal(b, a[::-1] * 2 + 1)


def test_time_evaluator_measures(opencl):
    s, args = injective((1000,), 64, te.exp)
    f = tensorforge.build(s, args, target="opencl")
    times = f.time_evaluator("main", number=2, repeat=2)(np.ones(1000, "float32"), np.empty(1000, "float32"))
    assert len(times) == 2 and all(t > 0 for t in times)


def test_unbound_schedule_is_a_clear_error():
    A = te.placeholder((10,), name="A")
    B = te.compute((10,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    with pytest.raises(ThreadBindingError, match="not bound to GPU threads"):
        tensorforge.build(s, [A, B], target="opencl")


def test_scope_the_target_lacks_is_an_error():
    s, args = matmul_shared_vthread()
    reader = [st for st in s.stages if st.name == "A.shared"][0]
    reader.set_scope("texture")
    with pytest.raises(ValueError, match="memory scope 'texture'.*'opencl' does not have"):
        tensorforge.build(s, args, target="opencl")


def test_shared_scope_on_the_c_target_is_an_error():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s.cache_read(A, "shared", [B])
    with pytest.raises(ValueError, match="shared"):
        tensorforge.build(s, [A, B], target="c")


def test_bad_arguments_are_checked_before_the_device(opencl):
    s, args = injective((10,), 8, te.exp)
    f = tensorforge.build(s, args, target="opencl")
    with pytest.raises(ValueError, match="shape"):
        f(np.ones(11, "float32"), np.empty(10, "float32"))


def test_passes_print_under_debug(monkeypatch, capsys):
    monkeypatch.setenv("TENSORFORGE_DEBUG", "passes")
    s, args = injective((10,), 8, te.exp)
    tensorforge.lower(s, args, target="opencl")
    err = capsys.readouterr().err
    for name in ("unroll_vector_loops", "inject_virtual_threads", "lower_thread_binding", "insert_barriers"):
        assert f"after {name}" in err


@pytest.mark.parametrize("dtype", ["float16", "float64", "int64", "int8", "bool"])
def test_dtypes_run(opencl, dtype):
    A = te.placeholder((40,), name="A", dtype=dtype)
    B = te.compute((40,), lambda i: A[i] if dtype == "bool" else A[i] * A[i], name="B")
    s = te.create_schedule(B.op)
    o, i = s[B].split(B.op.axis[0], factor=16)
    s[B].bind(o, te.thread_axis("blockIdx.x"))
    s[B].bind(i, te.thread_axis("threadIdx.x"))
    f = tensorforge.build(s, [A, B], target="opencl")
    a = (np.arange(40) % 7 - 3).astype(dtype)
    b = np.zeros(40, dtype)
    f(a, b)
    np.testing.assert_array_equal(b, a if dtype == "bool" else a * a)


def test_shared_fetch_covers_the_block_tile_not_one_threads_share():
    # bound inference relaxes the threadIdx and vthread loops around a shared stage: its buffer
    # is the block's 32x8 tile of A per k-step, fetched by all 64 threads together
    from tensorforge.ir.functor import post_order_visit
    from tensorforge.tir import nodes as N
    from tensorforge.tir.build import schedule_to_primfunc
    s, args = matmul_shared_vthread()
    shapes = {}
    post_order_visit(schedule_to_primfunc(s, args).body, lambda n: shapes.__setitem__(
        n.buffer.name, [int(d.value) for d in n.buffer.shape]) if isinstance(n, N.Allocate) else None)
    assert shapes["A.shared"] == [32, 8] and shapes["B.shared"] == [8, 32]


def test_float16_local_buffer_builds_without_cl_khr_fp16(opencl):
    """A thread's float16 buffer is ushort storage behind a half pointer (a `half` variable needs
    cl_khr_fp16, which CPU OpenCL devices lack); values round to half on the way in."""
    A = te.placeholder((300,), "float16", name="A")
    B = te.compute((300,), lambda i: A[i] * A[i], name="B")
    C = te.compute((300,), lambda i: B[i] + te.const(1.0, "float16"), name="C")
    s = te.create_schedule(C.op)
    bo, bi = s[C].split(C.op.axis[0], factor=64)
    s[C].bind(bo, te.thread_axis("blockIdx.x"))
    s[C].bind(bi, te.thread_axis("threadIdx.x"))
    s[B].set_scope("local")
    s[B].compute_at(s[C], bi)
    f = tensorforge.build(s, [A, C], target="opencl")
    assert "ushort" in f.source
    a = (np.random.default_rng(0).standard_normal(300) * 3).astype("float16")
    c = np.full(300, np.nan, "float16")
    f(a, c)
    np.testing.assert_array_equal(c, (a * a).astype("float16") + np.float16(1))
