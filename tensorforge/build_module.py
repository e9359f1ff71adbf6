"""The low-level path for one schedule: schedule -> loop program -> loop-IR passes -> backend
module.  `tensorforge.lower` and `tensorforge.build` are these functions; `driver.compile` uses
the same steps for every fused group of a graph."""
from __future__ import annotations

from typing import Sequence

from .backends import backend_for
from .target import Target
from .te.schedule import Schedule
from .te.tensor import Tensor
from .tir import nodes as N
from .tir.build import schedule_to_primfunc
from .tir.pipeline import run_pipeline


def lower(sch: Schedule, args: Sequence[Tensor], name: str = "main", target=None) -> N.PrimFunc:
    """The loop program of `sch` with `args` as its parameters, after all loop-IR passes
    (with `target`, also the passes its backend adds, e.g. thread binding on GPUs).
    `print()` it to read it."""
    if not isinstance(sch, Schedule):
        raise TypeError(f"lower expects a te.Schedule, got {type(sch).__name__}")
    extra = getattr(backend_for(Target.parse(target)), "PASSES_BY_PHASE", None) if target is not None else None
    return run_pipeline(schedule_to_primfunc(sch, args, name), extra)


def build(inputs, args: Sequence[Tensor] | None = None, target="c", name: str = "main"):
    """Compile to a callable Module.

    `inputs` is a Schedule (with `args`), a PrimFunc, or a list of PrimFuncs (several kernels go
    into one library with one compiler call).
    """
    tgt = Target.parse(target)
    if isinstance(inputs, Schedule):
        if args is None:
            raise TypeError("build(schedule, args): the argument tensors are required")
        funcs = [lower(inputs, args, name, tgt)]
    elif isinstance(inputs, N.PrimFunc):
        funcs = [inputs]
    elif isinstance(inputs, (list, tuple)) and all(isinstance(f, N.PrimFunc) for f in inputs):
        funcs = list(inputs)
        names = [f.name for f in funcs]
        if len(set(names)) != len(names):
            raise ValueError(f"functions in one module need distinct names, got {names}")
    else:
        raise TypeError("build expects a Schedule (with args), a PrimFunc or a list of PrimFuncs")
    return backend_for(tgt).build(funcs, tgt)
