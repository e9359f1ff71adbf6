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
