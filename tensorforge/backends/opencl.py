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
from ..runtime.memory import HOST
from ..runtime.opencl import OpenCLDevice, import_pyopencl
from ..target import Target
from ..tir import nodes as N
from .base import Backend
from .gpu import PASSES_BY_PHASE, check_func, graph_model, passes_for, timer
from .gpu_warp import opencl_sub_group_width, sub_group_lowering


def codegen(funcs: Sequence[N.PrimFunc], target: Target) -> GPUSource:
    for f in funcs:
        check_func(f, target)
    return codegen_opencl(funcs, target)


def load(source: GPUSource, target: Target) -> OpenCLDevice:
    """Open the target's device and build the program on it."""
    return OpenCLDevice(source.text, target.device)


def warp_lowering(target: Target):
    """Sub-group reductions when the target's device has cl_khr_subgroups, else None."""
    width = opencl_sub_group_width(target.device)
    return sub_group_lowering(width) if width > 1 else None


def render(funcs: Sequence[N.PrimFunc], target: Target, sequences=(), text_cache=None) -> GPUSource:
    import_pyopencl()                      # fail now, with the install hint, not at the first call
    return codegen(funcs, target)


def compile(source: GPUSource, target: Target) -> GPUSource:  # noqa: A001 - the protocol's name
    """OpenCL programs are built by the driver on the device, at the first call."""
    return source


def load_module(source: GPUSource, funcs: Sequence[N.PrimFunc], _source, target: Target) -> DeviceModule:
    return DeviceModule([kernel_signature(f) for f in funcs], source.functions, source.text, target,
                        lambda: load(source, target))


BACKEND = Backend(name="opencl", dialect="opencl", render=render, compile=compile, load=load_module,
                  memory=HOST, timer=timer, make_model=graph_model("opencl", lambda t: t.device), passes=PASSES_BY_PHASE,
                  passes_for=passes_for(warp_lowering))


def build(funcs: Sequence[N.PrimFunc], target: Target | str = "opencl", sequences=(), text_cache=None) -> DeviceModule:
    """A DeviceModule running `funcs` (lowered with PASSES_BY_PHASE) on an OpenCL device."""
    return BACKEND.build(funcs, target, sequences, text_cache)
