"""The CPU backend: PrimFuncs -> C source (codegen/c.py) -> shared library -> Module.

Everything specific to running on the host lives here, on the protocol of backends/base.py:
the compiler flags a Target implies, rendering (the C dialect of the one C-family printer),
compiling (one compiler call for all kernels, one translation unit per core), loading with
ctypes, host memory (NumPy arrays), the timer and the graph executor of runtime/.  Its kind
("c", aliases "llvm", "cpu") is registered in backends/registry.py.
"""
from __future__ import annotations

import functools
import os
import platform
from typing import Sequence

from ..codegen.analysis import kernel_signature
from ..codegen.c import codegen_c
from ..ir.functor import post_order_visit
from ..runtime.compile import compile_source
from ..runtime.memory import HOST
from ..runtime.model import Model
from ..runtime.module import KernelSignature, Module, ParamSpec
from ..target import Target
from ..tir import nodes as N
from .base import Backend

KINDS = ("c",)


def compile_flags(target: Target) -> list[str]:
    """Compiler flags for `target`.

    -march (x86) / -mcpu (ARM) selects the instruction set the vector types map to;
    -ffp-contract=fast lets a*b+c become one FMA (results differ from NumPy in the last bit);
    -fno-trapping-math: no kernel reads the floating-point exception flags, so GCC may compute
    both sides of a select (`x < 0 ? 0 : x`, the inline erf's range test) and vectorize it;
    without it, only AVX-512's masks let it if-convert such loops, and on AVX2 they stayed
    scalar (GELU after BERT's FFN product 2.2x slower);
    -fno-math-errno: no kernel reads errno, so sqrt is the vector instruction (with errno set
    for negative inputs, GCC called sqrtf for every element: 2.7x ONNX Runtime's time on
    8 x 128 x 768, 0.37x without);
    -fopenmp outlines the parallel loops, which run on tensorforge's thread pool with GCC
    (codegen/c.py POOL_SHIM), so --as-needed leaves libgomp out of the library;
    gnu11 gives statement expressions and vector extensions;
    -fno-predictive-commoning with 16 vector registers (AVX2): GCC's predictive commoning keeps
    the input values a direct conv's next kernel column reuses in registers, which then spills
    accumulators of the register tile to the stack; a conv with 64 kernel columns (the pitch
    estimator's) ran at 48% of the FMA peak, 80% without it; on the six exported workloads the
    change is within noise.  Not measured with 32 registers, where it stays on.
    """
    target = Target.parse(target)
    if target.kind not in KINDS:
        raise ValueError(f"the CPU backend serves target kinds {KINDS}, not {target.kind!r}")
    machine = platform.machine().lower()
    cpu_flag = "-march" if machine in ("x86_64", "amd64", "i686", "i386") else "-mcpu"
    flags = [f"-O{target.opt_level}", f"{cpu_flag}={target.mcpu}", "-fPIC", "-shared", "-fopenmp",
             "-Wl,--as-needed", "-ffp-contract=fast", "-fno-trapping-math", "-fno-math-errno", "-std=gnu11", "-Wno-psabi"]
    if target.vector_registers < 32:
        flags.append("-fno-predictive-commoning")
    if _has_libmvec():
        flags += ["-DTF_USE_LIBMVEC", "-lmvec"]
    return flags + ["-lm"]


@functools.lru_cache(maxsize=1)
def _has_libmvec() -> bool:
    """glibc's vector math library (x86-64) is there: `omp simd` loops over exp/log/erf/tanh/...
    then call its SIMD variants (codegen/c.py declares them)."""
    import ctypes.util
    return platform.machine().lower() in ("x86_64", "amd64") and ctypes.util.find_library("mvec") is not None


def render(funcs: Sequence[N.PrimFunc], target: Target, sequences=(), text_cache=None):
    """All `funcs` printed as C, also split into one translation unit per core (the C compiler
    builds them at the same time); `sequences` adds C functions that call kernels in order."""
    for f in funcs:
        check_units(f, target)
    return codegen_c(list(funcs), target, sequences, text_cache, units=target.num_cores)


def compile(source, target: Target) -> str:  # noqa: A001 - the protocol's name for this step
    """The shared library built from `source` (content-addressed cache: runtime/compile.py)."""
    return compile_source(source.text, compile_flags(target), units=source.units)


def load(lib_path: str, funcs: Sequence[N.PrimFunc], source, target: Target) -> Module:
    return Module([kernel_signature(f) for f in funcs], lib_path, source.text, symbols=source.symbols,
                  target=target)


def describe(module: Module, target: Target) -> dict | None:
    """The record `restore` makes `module` again from: its library's manifest and source file,
    each kernel's signature and C symbol, the compiler flags and the compiler's identity.  None
    for kernels with shape variables (their shapes are expressions, not numbers)."""
    from ..ir.expr import IntImm
    from ..runtime.compile import compiler_identity, library_entry
    kernels = []
    for sig in module.signatures:
        if sig.shape_vars or not all(isinstance(d, IntImm) for p in sig.params for d in p.shape):
            return None
        kernels.append({"name": sig.name, "symbol": module.get_function(sig.name)._cfunc.__name__,
                        "params": [[p.name, p.dtype, [int(d.value) for d in p.shape], bool(p.written)]
                                   for p in sig.params]})
    manifest, source = library_entry(module.lib_path)
    return {"manifest": manifest.name, "source": source.name, "kernels": kernels,
            "flags": compile_flags(target), "compiler": compiler_identity()}


def restore(record: dict, target: Target) -> Module | None:
    """The Module `describe` recorded, when its library and source are still in the cache and
    the same compiler with the same flags would build them; None otherwise."""
    from ..ir.expr import const
    from ..runtime.cache_files import DamagedEntry, cache_dir, verified_library
    from ..runtime.compile import compiler_identity
    if record.get("flags") != compile_flags(target) or record.get("compiler") != compiler_identity():
        return None
    names = (record.get("manifest"), record.get("source"))
    if not all(isinstance(n, str) and n and os.path.basename(n) == n for n in names):
        return None                                  # files of the cache folder only
    directory = cache_dir()
    try:
        lib = verified_library(directory / record["manifest"])
        text = (directory / record["source"]).read_text(encoding="utf-8") if lib is not None else None
    except (DamagedEntry, OSError):
        return None         # the build that follows finds the damage again and reports it
    if lib is None or text is None:
        return None
    signatures = [KernelSignature(k["name"], tuple(ParamSpec(name, dtype, tuple(const(d) for d in shape), written)
                                                   for name, dtype, shape, written in k["params"]))
                  for k in record["kernels"]]
    return Module(signatures, lib, text, symbols={k["name"]: k["symbol"] for k in record["kernels"]}, target=target)


def timer(module: Module, name: str, number: int = 10, repeat: int = 3, min_repeat_ms: float = 0):
    return module.time_evaluator(name, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms)


def check_units(func: N.PrimFunc, target: Target) -> None:
    """RuntimeError when `func` uses a tensor intrinsic whose CPU units the host lacks (a native
    build would crash with an illegal instruction); other -march values are cross builds."""
    from ..ops.x86_intrin import check_features
    needed: dict = {}

    def visit(node) -> None:
        if isinstance(node, N.Tensorized):
            needed.setdefault(node.intrin, node.requires)

    post_order_visit(func.body, visit)
    if target.mcpu == "native":
        for intrin, requires in needed.items():
            check_features(requires, f"{func.name}: tensor intrinsic {intrin}")


def make_model(spec, module: Module | None, params: dict, info: dict | None = None) -> Model:
    """The host graph executor over the model's shared library."""
    return Model(spec, module.lib_path if module else None, params, module.source if module else "", info)


BACKEND = Backend(name="cpu", dialect="c", render=render, compile=compile, load=load, memory=HOST,
                  timer=timer, make_model=make_model, supports_sequences=True, describe=describe, restore=restore)


def build(funcs: Sequence[N.PrimFunc], target: Target | str = "c", sequences=(), text_cache=None) -> Module:
    """Compile `funcs` (already lowered, flattened PrimFuncs) into one callable Module (see
    `Backend.build`)."""
    return BACKEND.build(funcs, target, sequences, text_cache)
