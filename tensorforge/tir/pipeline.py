"""The loop-IR pass list: reading it is reading what happens between loop generation and code
generation.  `TENSORFORGE_DEBUG=passes` prints the program after each pass.

A bare string in the list is a phase: there the passes the target's backend adds for that phase
run, in its order (a GPU backend binds threads, injects virtual threads, inserts barriers; the
CPU backend adds none).  The caller passes them in (build_module.backend_passes), so this layer
never imports a backend.
"""
from __future__ import annotations

import os
import sys
from typing import Callable, Mapping, Sequence

from . import nodes as N
from .passes.flatten_storage import flatten_storage
from .passes.partition_loops import partition_loops
from .passes.simplify import simplify
from .passes.unroll_loops import unroll_loops
from .passes.unswitch_selects import unswitch_selects
from .passes.vectorize_loops import vectorize_loops
from .passes.widen_indices import widen_indices

Pass = Callable[[N.PrimFunc], N.PrimFunc]

PASSES: list = [
    ("widen_indices", widen_indices),
    "after_lowering",
    ("simplify", simplify),
    ("partition_loops", partition_loops),
    ("simplify", simplify),
    ("flatten_storage", flatten_storage),
    ("widen_indices", widen_indices),
    "after_flatten",
    ("simplify", simplify),
    ("unswitch_selects", unswitch_selects),
    ("vectorize_loops", vectorize_loops),
    ("unroll_loops", unroll_loops),
    ("simplify", simplify),
    "before_codegen",
]

PHASES = tuple(p for p in PASSES if isinstance(p, str))


def debug_enabled(topic: str) -> bool:
    return topic in os.environ.get("TENSORFORGE_DEBUG", "").split(",")


def pass_list(extra: Mapping[str, Sequence[tuple[str, Pass]]] | None = None) -> list[tuple[str, Pass]]:
    """The passes in the order they run, with `extra` ({phase: ((name, pass), ...)}, a
    backend's passes) in place of its phases."""
    extra = extra or {}
    unknown = sorted(set(extra) - set(PHASES))
    if unknown:
        raise ValueError(f"unknown loop-IR pass phase(s) {unknown}; phases are {', '.join(PHASES)}")
    out: list[tuple[str, Pass]] = []
    for item in PASSES:
        if isinstance(item, str):
            out.extend(extra.get(item, ()))
        else:
            out.append(item)
    return out


def run_pipeline(func: N.PrimFunc, extra: Mapping[str, Sequence[tuple[str, Pass]]] | None = None) -> N.PrimFunc:
    """Run the pass list on `func`; `extra`: a backend's passes by phase (see `pass_list`)."""
    dump = debug_enabled("passes")
    if dump:
        print(f"# {func.name}: after loop generation\n{func}\n", file=sys.stderr)
    for name, fn in pass_list(extra):
        func = fn(func)
        if dump:
            print(f"# {func.name}: after {name}\n{func}\n", file=sys.stderr)
    return func
