"""CUDA: every schedule compiles to a cubin with NVRTC, with or without a GPU; without one,
calling the module says that the device is missing."""
from __future__ import annotations

import numpy as np
import pytest
from gpu_probe import cuda_device_present
from gpu_schedules import injective, matmul_shared_vthread, row_sum

import tensorforge
from tensorforge import te
from tensorforge.runtime.compile import CompileError

TARGET = "cuda -arch=sm_90"


def test_matmul_with_shared_memory_and_vthread_compiles_for_sm_90(nvrtc):
    s, args = matmul_shared_vthread()
    f = tensorforge.build(s, args, target=TARGET)
    assert f.binary[:4] == b"\x7fELF"        # a cubin is an ELF file
    assert "__shared__ float" in f.source and "__syncthreads();" in f.source
    assert 'extern "C" __global__ void main_kernel' in f.source


@pytest.mark.parametrize("fn", [te.exp, te.tanh, te.round, te.sigmoid, lambda x: x % 3.0, te.isnan])
def test_math_intrinsics_compile(nvrtc, fn):
    s, args = injective((50,), 32, fn)
    tensorforge.build(s, args, target=TARGET)


@pytest.mark.parametrize("dtype", ["float16", "float64", "int64", "int8", "bool"])
def test_dtypes_compile(nvrtc, dtype):
    A = te.placeholder((40,), name="A", dtype=dtype)
    B = te.compute((40,), lambda i: A[i] if dtype == "bool" else A[i] * A[i], name="B")
    s = te.create_schedule(B.op)
    o, i = s[B].split(B.op.axis[0], factor=16)
    s[B].bind(o, te.thread_axis("blockIdx.x"))
    s[B].bind(i, te.thread_axis("threadIdx.x"))
    f = tensorforge.build(s, [A, B], target=TARGET)
    if dtype == "float16":
        assert "cvt.rn.f16.f32" in f.source


def test_calling_without_a_device_names_the_missing_device(nvrtc):
    if cuda_device_present():
        pytest.skip("a CUDA device is present")
    s, args = row_sum(10, 10, 4)
    f = tensorforge.build(s, args, target=TARGET)
    with pytest.raises(RuntimeError, match="no CUDA device.*sm_90"):
        f(np.ones((10, 10), "float32"), np.empty(10, "float32"))


def test_runs_on_a_cuda_device(nvrtc):
    if not cuda_device_present():
        pytest.skip("no CUDA device on this machine")
    s, args = matmul_shared_vthread()
    f = tensorforge.build(s, args, target="cuda")
    a = np.random.rand(128, 64).astype("float32")
    b = np.random.rand(64, 96).astype("float32")
    c = np.full((128, 96), np.nan, "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_bad_source_shows_the_nvrtc_log(nvrtc):
    from tensorforge.backends.cuda import compile_cubin
    with pytest.raises(CompileError, match="NVRTC rejected.*sm_90"):
        compile_cubin('extern "C" __global__ void k() { undefined_thing(); }', "sm_90")


def test_missing_arch_without_a_device_asks_for_one(nvrtc):
    if cuda_device_present():
        pytest.skip("a CUDA device is present")
    s, args = row_sum(10, 10, 4)
    with pytest.raises(ValueError, match="-arch=sm_90"):
        tensorforge.build(s, args, target="cuda")


def test_values_bound_in_an_expression_compile(nvrtc):
    """A Let inside an expression (the inliner's shared values: a chain of SiLUs as two nodes
    each and of maximums; a variadic Max's operand) prints as a lambda called in place: NVRTC
    rejects the GNU statement expression the C printer uses."""
    from tensorforge.graph.builder import GraphBuilder
    b = GraphBuilder("bound")
    y = b.input("x", (3, 50), "float32")
    for _ in range(6):
        y = b.add1("mul", [y, b.add1("sigmoid", [y])])
    for _ in range(4):
        y = b.add1("maximum", [y, b.add1("neg", [y])])
    y = b.add1("maximum", [y] + [b.input(f"x{k}", (3, 50), "float32") for k in range(4)])
    model = tensorforge.compile(b.finish([y]), target=TARGET)
    assert "[&]() -> float {" in model.source
    if cuda_device_present():
        x = np.random.default_rng(0).standard_normal((5, 3, 50)).astype(np.float32)
        want = x[0].astype(np.float64)
        for _ in range(6):
            want = want / (1 + np.exp(-want))
        for _ in range(4):
            want = np.maximum(want, -want)
        want = np.max(np.stack([want, *x[1:]]), axis=0)
        np.testing.assert_allclose(model(*x)[0], want, rtol=1e-5, atol=1e-6)
