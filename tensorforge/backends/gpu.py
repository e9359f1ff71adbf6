"""What the GPU backends (opencl.py, cuda.py) share: the loop-IR passes they add, by phase, the
checks a PrimFunc must pass before GPU code generation, and the graph model they make
(runtime/device_model.py: each kernel step's launches written down as plain data)."""
from __future__ import annotations

import functools
import math
from typing import Callable, Mapping

from ..ir import dtype as dt
from ..ir.expr import IntImm
from ..ir.functor import post_order_visit
from ..runtime.device_model import DeviceModel
from ..target import Target
from ..tir import nodes as N
from ..tir.passes.inject_virtual_threads import inject_virtual_threads
from ..tir.passes.insert_barriers import insert_barriers
from ..tir.passes.lower_thread_binding import lower_thread_binding
from ..tir.passes.select_allreduce import WarpLowering, select_allreduce
from ..tir.passes.simplify import simplify
from ..tir.passes.storage_rewrite import storage_rewrite
from ..tir.passes.unroll_vector_loops import unroll_vector_loops

# Phases of tir/pipeline.py.  Each cross-thread reduction's form is chosen first (without a
# target: the shared-memory tree; see passes_for for the warp forms).  Virtual threads are injected on flattened buffers (one index per
# access, so a per-vthread copy is an offset); thread binding runs last, after the loop passes
# that still need the bound loops as loops, then shared-memory reuse inside each kernel, and
# barriers after it (they see which buffers now share memory).
PASSES_BY_PHASE = {
    "after_lowering": (("select_allreduce", select_allreduce), ("unroll_vector_loops", unroll_vector_loops)),
    "after_flatten": (("inject_virtual_threads", inject_virtual_threads), ("simplify", simplify)),
    "before_codegen": (("lower_thread_binding", lower_thread_binding), ("storage_rewrite", storage_rewrite),
                       ("insert_barriers", insert_barriers), ("simplify", simplify)),
}


def passes_for(warp_of: Callable[[Target], WarpLowering | None]) -> Callable[[Target], Mapping]:
    """The backend's `passes_for`: PASSES_BY_PHASE with select_allreduce given the warp
    lowering of the target's device (None: keep the shared-memory trees)."""
    def passes(target: Target) -> Mapping:
        warp = warp_of(target)
        if warp is None:
            return PASSES_BY_PHASE
        select = functools.partial(select_allreduce, warp=warp)
        first = PASSES_BY_PHASE["after_lowering"]
        return {**PASSES_BY_PHASE, "after_lowering": (("select_allreduce", select),) + first[1:]}
    return passes


def timer(module, name: str, number: int = 10, repeat: int = 3, min_repeat_ms: float = 0):
    """The tuner's clock: `module.time_evaluator` (device time, after synchronizing)."""
    return module.time_evaluator(name, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms)


def graph_model(runtime: str, option_of: Callable[[Target], str]):
    """The backend's `make_model`: a DeviceModel (runtime/device_model.py) over the module's
    program, each kernel step's launches and workspaces written down as plain data."""
    def make_model(spec, module, params: dict, info: dict | None = None) -> DeviceModel:
        kernels: dict = {}
        for step in spec.steps:
            if step["kind"] == "kernel" and step["symbol"] not in kernels:
                kernels[step["symbol"]] = launch_record(module.get_function(step["symbol"]).plan)
        target = (info or {}).get("target") or (module.target if module is not None else None)
        device = {"runtime": runtime, "option": option_of(target) if target is not None else "",
                  "kernels": kernels}
        if module is None:
            program: str | bytes = ""
        else:
            program = module.binary if module.binary is not None else module.source
        return DeviceModel(spec, device, program, params, module.source if module else "", info)
    return make_model


def launch_record(plan) -> dict:
    """A kernel's launches ([entry, grid, block]) and workspace sizes in bytes, as plain ints
    (a graph's shapes are static)."""
    def value(e) -> int:
        if isinstance(e, int):
            return e
        if isinstance(e, IntImm):
            return int(e.value)
        raise ValueError(f"kernel {plan.name}: launch extent {e} is not a constant")
    launches = [[lk.symbol, [value(g) for g in lk.grid], [value(b) for b in lk.block]] for lk in plan.launches]
    workspaces = [math.prod(value(d) for d in shape) * dt.itemsize(dtype) for _name, dtype, shape in plan.workspaces]
    return {"launches": launches, "workspaces": workspaces}


def check_func(func: N.PrimFunc, target: Target) -> None:
    """ValueError when `func` uses a memory scope or thread axis that `target` does not have."""
    scopes, axes = target.memory_scopes, target.thread_axes
    problems: list[str] = []

    def visit(node) -> None:
        if isinstance(node, N.Allocate) and node.buffer.scope not in scopes:
            problems.append(f"buffer {node.buffer.name!r} is in memory scope {node.buffer.scope!r}, which "
                            f"target kind {target.kind!r} does not have (it has {', '.join(scopes)})")
        if isinstance(node, N.For) and node.kind == N.THREAD_BINDING and node.thread_tag not in axes:
            problems.append(f"loop {node.loop_var.name} is bound to {node.thread_tag!r}, which target kind "
                            f"{target.kind!r} does not have")

    post_order_visit(func.body, visit)
    for b in func.params:
        if b.scope != N.GLOBAL:
            problems.append(f"parameter {b.name!r} is in memory scope {b.scope!r}; arguments live in global memory")
    if problems:
        raise ValueError(f"{func.name}: {problems[0]}")
