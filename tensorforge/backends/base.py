"""The backend protocol: what a device brings to the compiler (the `kernels -> Module` arrow).

A device is a small tuple of functions plus plain facts:

- the facts the compiler needs before it touches the device (target kinds and options, thread
  axes, memory scopes, vector width, template suffix, layout preferences) are a `KindSpec`
  registered in backends/registry.py, so `Target` and the graph passes read them without
  loading the backend;
- the rest is a `Backend` below, defined as `BACKEND` in the backend's module:
  render (the printer dialect: loop programs -> source), compile (source -> a binary),
  load (binary -> a callable `Module`), memory (allocation and copies), timer (the tuner's
  clock), the model runner, the loop-IR passes it adds by phase, and whether consecutive
  kernels can be compiled into one sequence function.

`Backend.build` is the same for every device: check memory scopes, render, compile, load.  The
core (driver, build_module, lowering) asks `backend_for(target)` and never names a device.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ..ir.functor import post_order_visit
from ..runtime.memory import Memory
from ..target import Target
from ..tir import nodes as N

# Where in the loop-IR pass list (tir/pipeline.py) a backend's passes run.
PHASES = ("after_lowering", "after_flatten", "before_codegen")

Pass = Callable[[N.PrimFunc], N.PrimFunc]


@dataclass(frozen=True)
class Backend:
    """One device: the functions that take loop programs to running code, and time it.

    render(funcs, target, sequences, text_cache) -> source: an object with `.text` (the printed
        program) that `compile` understands; `sequences` only when `supports_sequences`.
    compile(source, target) -> artifact: a shared library's path, a cubin, a program binary.
    load(artifact, funcs, source, target) -> Module: kernels callable on arrays.
    memory: allocation and host <-> device copies (runtime/memory.py).
    timer(module, name, number, repeat, min_repeat_ms) -> evaluate(*args) -> [seconds, ...].
    make_model(spec, module, params, info) -> Model: the graph executor for this device.
    passes: {phase: ((name, pass), ...)}, phases from PHASES.
    passes_for: target -> such a mapping, for passes that depend on the device a target names
        (the warp width of tir/passes/select_allreduce.py); used instead of `passes` when given
        a target.
    host_target, place: for a device that runs only some of a graph's kernels (the accelerator):
        the target of the rest, and place(groups, target) -> {group index: step}, the groups it
        takes, each as a callable executor step with a `.step` dict (driver.compile).
    describe, restore: for a device whose built programs stay in the on-disk cache:
        describe(module, target) -> a JSON-able record of what `load` made (None when it cannot
        be restored so), and restore(record, target) -> that Module again, or None when its files
        are gone or were built by another compiler (build_records.py: a warm compile that
        lowers nothing).
    """

    name: str
    dialect: str
    render: Callable[..., Any]
    compile: Callable[[Any, Target], Any]
    load: Callable[..., Any]
    memory: Memory
    timer: Callable[..., Callable[..., list]]
    make_model: Callable[..., Any]
    passes: Mapping[str, tuple[tuple[str, Pass], ...]] = field(default_factory=dict)
    passes_for: Callable[[Target], Mapping[str, tuple[tuple[str, Pass], ...]]] | None = None
    supports_sequences: bool = False
    host_target: str | None = None
    place: Callable[..., dict] | None = None
    describe: Callable[[Any, Target], dict | None] | None = None
    restore: Callable[[dict, Target], Any] | None = None

    def __post_init__(self) -> None:
        unknown = sorted(set(self.passes) - set(PHASES))
        if unknown:
            raise ValueError(f"backend {self.name}: unknown pass phase(s) {unknown}; phases are {', '.join(PHASES)}")

    def passes_at(self, phase: str, target: Target | None = None) -> tuple[tuple[str, Pass], ...]:
        """The loop-IR passes this backend runs at `phase` of the pass list, in order (for
        `target` when given)."""
        passes = self.passes_for(target) if self.passes_for is not None and target is not None else self.passes
        return tuple(passes.get(phase, ()))

    def build(self, funcs: Sequence[N.PrimFunc], target: Target | str, sequences: Sequence = (),
              text_cache: dict | None = None):
        """Compile `funcs` (lowered, flattened PrimFuncs) into one callable Module: all kernels
        into one program, one compiler call.  `sequences` adds functions that call kernels in
        order (backends with `supports_sequences`); `text_cache` keeps printed functions."""
        target = Target.parse(target)
        funcs = list(funcs)
        if not funcs:
            raise ValueError("build needs at least one PrimFunc")
        if sequences and not self.supports_sequences:
            raise ValueError(f"backend {self.name} cannot compile kernel sequences")
        for f in funcs:
            check_scopes(f, target)
        source = self.render(funcs, target, sequences, text_cache)
        artifact = self.compile(source, target)
        return self.load(artifact, funcs, source, target)


def check_scopes(func: N.PrimFunc, target: Target) -> None:
    """ValueError when `func` places a buffer in a memory scope `target` does not have (a
    `cache_read(A, "shared")` meant for a GPU would otherwise build as plain memory on a CPU)."""
    scopes = target.memory_scopes
    bad: dict = {}

    def visit(node) -> None:
        if isinstance(node, N.Allocate) and node.buffer.scope not in scopes:
            bad.setdefault(node.buffer.scope, node.buffer.name)

    post_order_visit(func.body, visit)
    for b in func.params:
        if b.scope not in scopes:
            bad.setdefault(b.scope, b.name)
    if bad:
        scope, name = next(iter(bad.items()))
        raise ValueError(f"{func.name}: buffer {name!r} is in memory scope {scope!r}, which target kind "
                         f"{target.kind!r} does not have (it has {', '.join(scopes)})")
