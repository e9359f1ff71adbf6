"""The low-level path for one schedule: schedule -> loop program -> loop-IR passes -> backend
module.  `tensorforge.lower` and `tensorforge.build` are these functions; `driver.compile` uses
the same steps for every fused group of a graph."""
from __future__ import annotations

from typing import Sequence

from .backends import backend_for
from .backends.base import PHASES
from .target import Target
from .te.schedule import Schedule
from .te.tensor import Tensor
from .tir import nodes as N
from .tir.build import schedule_to_primfunc
from .tir.pipeline import run_pipeline


def lower(sch: Schedule, args: Sequence[Tensor], name: str = "main", target=None) -> N.PrimFunc:
    """The loop program of `sch` with `args` as its parameters, after all loop-IR passes (with
    `target`, also the passes its backend adds).  `print()` it to read it."""
    if not isinstance(sch, Schedule):
        raise TypeError(f"lower expects a te.Schedule, got {type(sch).__name__}")
    return run_pipeline(schedule_to_primfunc(sch, args, name), backend_passes(target))


def backend_passes(target) -> dict:
    """{phase: ((name, pass), ...)} that `target`'s backend adds to the loop-IR pass list
    (none without a target)."""
    if target is None:
        return {}
    tgt = Target.parse(target)
    backend = backend_for(tgt)
    return {phase: backend.passes_at(phase, tgt) for phase in PHASES}


def build(inputs, args: Sequence[Tensor] | None = None, target="c", name: str = "main"):
    """Compile to a callable Module.

    `inputs` is a Schedule (with `args`), a PrimFunc, or a list of PrimFuncs (several kernels go
    into one library with one compiler call).
    """
    tgt = Target.parse(target)
    backend = backend_for(tgt)
    if isinstance(inputs, Schedule):
        if args is None:
            raise TypeError("build(schedule, args): the argument tensors are required")
        funcs = [lower(inputs, args, name, target=tgt)]
    elif isinstance(inputs, N.PrimFunc):
        funcs = [inputs]
    elif isinstance(inputs, (list, tuple)) and all(isinstance(f, N.PrimFunc) for f in inputs):
        funcs = list(inputs)
        names = [f.name for f in funcs]
        if len(set(names)) != len(names):
            raise ValueError(f"functions in one module need distinct names, got {names}")
    else:
        raise TypeError("build expects a Schedule (with args), a PrimFunc or a list of PrimFuncs")
    return backend.build(funcs, tgt)
