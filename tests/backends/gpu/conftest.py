"""Fixtures of the GPU tests: each skips with the reason when its device or compiler is absent
(gpu_probe.py)."""
from __future__ import annotations

import pytest
from gpu_probe import cuda_device_present, nvrtc_problem, opencl_problem  # noqa: F401


@pytest.fixture
def opencl():
    if opencl_problem():
        pytest.skip(opencl_problem())


@pytest.fixture
def nvrtc():
    if nvrtc_problem():
        pytest.skip(nvrtc_problem())


@pytest.fixture(params=["opencl", "cuda"])
def gpu(request):
    """Each GPU target kind that can run kernels here: OpenCL (PoCL on a CPU suffices) and CUDA
    (an NVIDIA device); the same checks run on both."""
    from gpu_probe import gpu_problem
    if gpu_problem(request.param):
        pytest.skip(gpu_problem(request.param))
    return request.param
