"""The CPU backend: PrimFuncs -> C source (codegen/c.py) -> shared library -> Module.

Everything specific to running on the host lives here: the target kinds served, the memory
scopes a schedule may use, the compiler flags a Target implies, and `build`.  All kernels given
to one `build` go into one source file and one compiler call.
"""
from __future__ import annotations

import functools
import platform
from typing import Sequence

from ..codegen.analysis import kernel_signature
from ..ir.functor import post_order_visit
from ..codegen.c import codegen_c
from ..runtime.compile import compile_source
from ..runtime.module import Module
from ..target import Target
from ..tir import nodes as N

KINDS = ("c",)
# consecutive kernels can be compiled into one C function that calls them in order
SUPPORTS_SEQUENCES = True
# the memory scopes a schedule may place buffers in on this backend (local: the stack)
MEMORY_SCOPES = ("global", "local")


def compile_flags(target: Target) -> list[str]:
    """Compiler flags for `target`.

    -march (x86) / -mcpu (ARM) selects the instruction set the vector types map to;
    -ffp-contract=fast lets a*b+c become one FMA (results differ from NumPy in the last bit);
    -fopenmp runs parallel loops; gnu11 gives statement expressions and vector extensions.
    """
    target = Target.parse(target)
    if target.kind not in KINDS:
        raise ValueError(f"the CPU backend serves target kinds {KINDS}, not {target.kind!r}")
    machine = platform.machine().lower()
    cpu_flag = "-march" if machine in ("x86_64", "amd64", "i686", "i386") else "-mcpu"
    flags = [f"-O{target.opt_level}", f"{cpu_flag}={target.mcpu}", "-fPIC", "-shared", "-fopenmp",
             "-ffp-contract=fast", "-std=gnu11", "-Wno-psabi"]
    if _has_libmvec():
        flags += ["-DTF_USE_LIBMVEC", "-lmvec"]
    return flags + ["-lm"]


@functools.lru_cache(maxsize=1)
def _has_libmvec() -> bool:
    """glibc's vector math library (x86-64) is there: `omp simd` loops over exp/log/erf/tanh/...
    then call its SIMD variants (codegen/c.py declares them)."""
    import ctypes.util
    return platform.machine().lower() in ("x86_64", "amd64") and ctypes.util.find_library("mvec") is not None


def build(funcs: Sequence[N.PrimFunc], target: Target | str = "c", sequences=(), text_cache=None) -> Module:
    """Compile `funcs` (already lowered, flattened PrimFuncs) into one callable Module;
    `sequences` adds C functions that call them in order, `text_cache` keeps printed functions
    (see codegen_c)."""
    target = Target.parse(target)
    funcs = list(funcs)
    if not funcs:
        raise ValueError("build needs at least one PrimFunc")
    for f in funcs:
        check_scopes(f)
        check_units(f, target)
    # one translation unit per core: the C compiler builds them at the same time
    source = codegen_c(funcs, target, sequences, text_cache, units=target.num_cores)
    lib_path = compile_source(source.text, compile_flags(target), units=source.units)
    return Module([kernel_signature(f) for f in funcs], lib_path, source.text, symbols=source.symbols,
                  target=target)


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


def check_scopes(func: N.PrimFunc) -> None:
    """ValueError when `func` places a buffer in a memory scope this backend does not have
    (a `cache_read(A, "shared")` meant for a GPU would otherwise build as plain memory)."""
    bad: dict = {}

    def visit(node) -> None:
        if isinstance(node, N.Allocate) and node.buffer.scope not in MEMORY_SCOPES:
            bad.setdefault(node.buffer.scope, node.buffer.name)

    post_order_visit(func.body, visit)
    for b in func.params:
        if b.scope not in MEMORY_SCOPES:
            bad.setdefault(b.scope, b.name)
    if bad:
        scope, name = next(iter(bad.items()))
        raise ValueError(f"{func.name}: buffer {name!r} is in memory scope {scope!r}, which target kind "
                         f"'c' does not have (it has {', '.join(MEMORY_SCOPES)})")
