"""The CUDA backend: thread-bound PrimFuncs -> CUDA C++ (codegen/cuda.py) -> a cubin for the
target's architecture, compiled by NVRTC -> loaded and launched through the CUDA driver API.

Compiling needs only NVRTC (the nvidia-cuda-nvrtc wheel, through cuda-bindings), so
`build(..., target="cuda -arch=sm_90")` works on a machine without a GPU; calling the module
there raises a RuntimeError that names the missing device.
"""
from __future__ import annotations

import hashlib
from typing import Sequence

from ..codegen.analysis import kernel_signature
from ..codegen.c_gpu import GPUSource
from ..codegen.cuda import codegen_cuda
from ..errors import MissingDependencyError
from ..runtime.cache_files import DamagedEntry, cache_dir, read_entry, write_entry
from ..runtime.compile import CompileError
from ..runtime.cuda import CUDADevice, device_arch
from ..runtime.device_module import DeviceModule
from ..runtime.memory import HOST
from ..target import Target
from ..tir import nodes as N
from .base import Backend
from .gpu import PASSES_BY_PHASE, check_func, graph_model, passes_for, timer
from .gpu_warp import CUDA_WARP_LOWERING


def codegen(funcs: Sequence[N.PrimFunc], target: Target) -> GPUSource:
    for f in funcs:
        check_func(f, target)
    return codegen_cuda(funcs, target)


def arch_of(target: Target) -> str:
    """The target's -arch, else the architecture of CUDA device 0."""
    if target.arch:
        if not (target.arch.startswith(("sm_", "compute_")) and target.arch.split("_", 1)[1].rstrip("a").isdigit()):
            raise ValueError(f"bad CUDA architecture {target.arch!r}; expected e.g. -arch=sm_90")
        return target.arch
    try:
        return device_arch()
    except RuntimeError as err:
        raise ValueError(f"target {str(target)!r} gives no -arch and none can be read from a device "
                         f"({err}); give one, e.g. 'cuda -arch=sm_90'") from None


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as err:
        raise MissingDependencyError(
            "the CUDA backend compiles with NVRTC: pip install 'tensorforge[cuda]' "
            f"(cuda-bindings and nvidia-cuda-nvrtc) ({err})") from None
    return nvrtc


def compile_cubin(source: str, arch: str) -> bytes:
    """NVRTC: CUDA source -> cubin for `arch` (through the content-addressed cache)."""
    nvrtc = _nvrtc()
    try:
        version = nvrtc.nvrtcVersion()[1:]
    except Exception as err:         # the wheel with libnvrtc is missing
        raise MissingDependencyError(f"NVRTC cannot be loaded: pip install nvidia-cuda-nvrtc ({err})") from None
    options = [f"--gpu-architecture={arch}", "--std=c++17", "-default-device"]
    key = hashlib.sha256("\0".join([source, repr(version)] + options).encode()).hexdigest()
    path = cache_dir() / "cuda" / key[:2] / f"{key}.cubin"
    try:
        cached = read_entry(path)
    except DamagedEntry:
        cached = None
    if cached is not None:
        return cached
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"tensorforge.cu", 0, [], [])
    try:
        (result,) = nvrtc.nvrtcCompileProgram(prog, len(options), [o.encode() for o in options])
        if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log)
            kept = cache_dir() / "cuda" / f"failed-{key[:16]}.cu"
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(source)
            raise CompileError(f"NVRTC rejected the generated CUDA source for {arch} (kept at {kept}):\n"
                               f"{log.decode(errors='replace').strip()}")
        _, size = nvrtc.nvrtcGetCUBINSize(prog)
        cubin = b" " * size
        nvrtc.nvrtcGetCUBIN(prog, cubin)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    try:
        write_entry(path, bytes(cubin))
    except OSError:
        pass                     # a read-only cache only costs time
    return bytes(cubin)


def load(cubin: bytes, arch: str) -> CUDADevice:
    return CUDADevice(cubin, arch)


def render(funcs: Sequence[N.PrimFunc], target: Target, sequences=(), text_cache=None) -> GPUSource:
    return codegen(funcs, target)


def compile(source: GPUSource, target: Target) -> tuple[bytes, str]:  # noqa: A001 - the protocol's name
    """NVRTC compiles now, so a machine without a GPU still checks every kernel."""
    arch = arch_of(target)
    return compile_cubin(source.text, arch), arch


def load_module(artifact: tuple[bytes, str], funcs: Sequence[N.PrimFunc], source: GPUSource,
                target: Target) -> DeviceModule:
    """A DeviceModule that loads the cubin on the device at its first call."""
    cubin, arch = artifact
    return DeviceModule([kernel_signature(f) for f in funcs], source.functions, source.text, target,
                        lambda: load(cubin, arch), binary=cubin)


BACKEND = Backend(name="cuda", dialect="cuda", render=render, compile=compile, load=load_module,
                  memory=HOST, timer=timer, make_model=graph_model("cuda", arch_of), passes=PASSES_BY_PHASE,
                  passes_for=passes_for(lambda target: CUDA_WARP_LOWERING))


def build(funcs: Sequence[N.PrimFunc], target: Target | str = "cuda", sequences=(), text_cache=None) -> DeviceModule:
    """A DeviceModule for `funcs` (lowered with PASSES_BY_PHASE): compiled now, loaded on the
    first call."""
    return BACKEND.build(funcs, target, sequences, text_cache)
