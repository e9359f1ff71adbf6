"""The loop-IR pass list: reading it is reading what happens between loop generation and code
generation.  `TENSORFORGE_DEBUG=passes` prints the program after each pass."""
from __future__ import annotations

import os
import sys
from typing import Callable, Mapping, Sequence

from . import nodes as N
from .passes.flatten_storage import flatten_storage
from .passes.partition_loops import partition_loops
from .passes.simplify import simplify
from .passes.unroll_loops import unroll_loops
from .passes.vectorize_loops import vectorize_loops

PASSES: list[tuple[str, Callable[[N.PrimFunc], N.PrimFunc]]] = [
    ("simplify", simplify),
    ("partition_loops", partition_loops),
    ("simplify", simplify),
    ("flatten_storage", flatten_storage),
    ("simplify", simplify),
    ("vectorize_loops", vectorize_loops),
    ("unroll_loops", unroll_loops),
    ("simplify", simplify),
]


def debug_enabled(topic: str) -> bool:
    return topic in os.environ.get("TENSORFORGE_DEBUG", "").split(",")


# Points in PASSES where a backend may add passes (backends/<device>.py: PASSES_BY_PHASE):
# "lowered" before the list, "flattened" right after flatten_storage, "final" after the list.
PHASES = ("lowered", "flattened", "final")

Pass = tuple[str, Callable[[N.PrimFunc], N.PrimFunc]]


def pass_list(extra_passes: Mapping[str, Sequence[Pass]] | None = None) -> list[Pass]:
    """PASSES with a backend's passes inserted at their phases."""
    extra = dict(extra_passes or {})
    unknown = set(extra) - set(PHASES)
    if unknown:
        raise ValueError(f"unknown loop-IR pass phase(s) {sorted(unknown)}; phases are {PHASES}")
    passes = list(extra.get("lowered", ()))
    for name, fn in PASSES:
        passes.append((name, fn))
        if name == "flatten_storage":
            passes += list(extra.get("flattened", ()))
    return passes + list(extra.get("final", ()))


def run_pipeline(func: N.PrimFunc, extra_passes: Mapping[str, Sequence[Pass]] | None = None) -> N.PrimFunc:
    dump = debug_enabled("passes")
    if dump:
        print(f"# {func.name}: after loop generation\n{func}\n", file=sys.stderr)
    for name, fn in pass_list(extra_passes):
        func = fn(func)
        if dump:
            print(f"# {func.name}: after {name}\n{func}\n", file=sys.stderr)
    return func
