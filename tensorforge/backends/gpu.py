"""What the GPU backends (opencl.py, cuda.py) share: the loop-IR passes they add, by phase, and
the checks a PrimFunc must pass before GPU code generation."""
from __future__ import annotations

from ..ir.functor import post_order_visit
from ..target import Target
from ..tir import nodes as N
from ..tir.passes.inject_virtual_threads import inject_virtual_threads
from ..tir.passes.insert_barriers import insert_barriers
from ..tir.passes.lower_thread_binding import lower_thread_binding
from ..tir.passes.simplify import simplify
from ..tir.passes.unroll_vector_loops import unroll_vector_loops

# Phases of tir/pipeline.py.  Virtual threads are injected on flattened buffers (one index per
# access, so a per-vthread copy is an offset); thread binding runs last, after the loop passes
# that still need the bound loops as loops, and barriers after it, inside each kernel.
PASSES_BY_PHASE = {
    "after_lowering": (("unroll_vector_loops", unroll_vector_loops),),
    "after_flatten": (("inject_virtual_threads", inject_virtual_threads), ("simplify", simplify)),
    "before_codegen": (("lower_thread_binding", lower_thread_binding), ("insert_barriers", insert_barriers),
                       ("simplify", simplify)),
}


def timer(module, name: str, number: int = 10, repeat: int = 3, min_repeat_ms: float = 0):
    """The tuner's clock: `module.time_evaluator` (device time, after synchronizing)."""
    return module.time_evaluator(name, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms)


def no_graph_models(spec, module, params, info=None):
    """Whole graphs need GPU schedule templates (ops/schedules/gpu*.py), not written yet."""
    kind = info["target"].kind if info and "target" in info else "a GPU"
    raise NotImplementedError(f"compiling whole graphs for {kind} is not supported yet (its schedule templates "
                              "are not written); tensorforge.build(schedule, args, target=...) works")


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
