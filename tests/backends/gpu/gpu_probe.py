"""Which GPU paths this machine can run: OpenCL (any device, PoCL on a CPU) and the CUDA compiler
(NVRTC; running CUDA kernels also needs an NVIDIA device).  Absent ones skip with the reason.
(A module of its own, not conftest: several test folders have a conftest.py, and `import
conftest` would find whichever was imported first.)"""
from __future__ import annotations

import functools


@functools.lru_cache(maxsize=1)
def opencl_problem() -> str:
    try:
        import pyopencl as cl
    except ImportError:
        return "pyopencl is not installed (pip install 'tensorforge[opencl]')"
    try:
        from tensorforge.runtime.opencl import pick_device
        dev = pick_device()
        ctx = cl.Context([dev])
        cl.Program(ctx, "__kernel void k(__global float* a) { a[get_global_id(0)] += 1.0f; }").build()
    except Exception as err:  # no platform, or its compiler cannot build for this CPU
        return f"no usable OpenCL device: {str(err).strip().splitlines()[-1] if str(err).strip() else err}"
    return ""


@functools.lru_cache(maxsize=1)
def nvrtc_problem() -> str:
    try:
        from cuda.bindings import nvrtc
        nvrtc.nvrtcVersion()
    except Exception as err:
        return f"NVRTC is not available (pip install cuda-bindings nvidia-cuda-nvrtc): {err}"
    return ""


@functools.lru_cache(maxsize=1)
def cuda_device_present() -> bool:
    try:
        from tensorforge.runtime.cuda import open_context
        open_context()
    except Exception:
        return False
    return True


def gpu_problem(kind: str) -> str:
    """Why the GPU target kind ("opencl" or "cuda") cannot run kernels here ("" when it can)."""
    if kind == "opencl":
        return opencl_problem()
    if nvrtc_problem():
        return nvrtc_problem()
    return "" if cuda_device_present() else "no CUDA device on this machine"


# what each dialect prints for a kernel, a shared buffer and a block-wide barrier
SPELLING = {
    "opencl": {"kernel": "__kernel void", "shared": "__local", "barrier": "barrier(CLK_LOCAL_MEM_FENCE);"},
    "cuda": {"kernel": "__global__ void", "shared": "__shared__", "barrier": "__syncthreads();"},
}
