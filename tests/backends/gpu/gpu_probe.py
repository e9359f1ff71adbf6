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
