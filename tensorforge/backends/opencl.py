"""The OpenCL backend: thread-bound PrimFuncs -> OpenCL C (codegen/opencl.py) -> a program built
by the OpenCL driver (pyopencl) -> DeviceModule.

Runs on any OpenCL device: a GPU, or the CPU through PoCL (pocl-binary-distribution), which is
how the tests run without a GPU.  The program is built when the module is first called.
"""
from __future__ import annotations

from typing import Sequence

from ..codegen.analysis import kernel_signature
from ..codegen.c_gpu import GPUSource
from ..codegen.opencl import codegen_opencl
from ..runtime.device_module import DeviceModule
from ..runtime.opencl import OpenCLDevice, import_pyopencl
from ..target import Target
from ..tir import nodes as N
from .gpu import PASSES_BY_PHASE, check_func

KINDS = ("opencl",)
SUPPORTS_SEQUENCES = False
MEMORY_SCOPES = ("global", "shared", "local")
THREAD_AXES = Target.parse("opencl").thread_axes
TEMPLATE_SUFFIX = ".gpu"
__all__ = ["KINDS", "MEMORY_SCOPES", "THREAD_AXES", "PASSES_BY_PHASE", "codegen", "load", "build"]


def codegen(funcs: Sequence[N.PrimFunc], target: Target) -> GPUSource:
    for f in funcs:
        check_func(f, target)
    return codegen_opencl(funcs, target)


def load(source: GPUSource, target: Target) -> OpenCLDevice:
    """Open the target's device and build the program on it."""
    return OpenCLDevice(source.text, target.device)


def build(funcs: Sequence[N.PrimFunc], target: Target | str = "opencl", sequences=(), text_cache=None) -> DeviceModule:
    """A DeviceModule running `funcs` (lowered with PASSES_BY_PHASE) on an OpenCL device."""
    target = Target.parse(target)
    funcs = list(funcs)
    if not funcs:
        raise ValueError("build needs at least one PrimFunc")
    if sequences:
        raise ValueError("the OpenCL backend does not build kernel sequences")
    import_pyopencl()                      # fail now, with the install hint, not at the first call
    source = codegen(funcs, target)
    return DeviceModule([kernel_signature(f) for f in funcs], source.functions, source.text, target,
                        lambda: load(source, target))
