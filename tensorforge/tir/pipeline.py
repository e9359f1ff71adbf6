"""The loop-IR pass list: reading it is reading what happens between loop generation and code
generation.  `TENSORFORGE_DEBUG=passes` prints the program after each pass."""
from __future__ import annotations

import os
import sys
from typing import Callable

from . import nodes as N
from .passes.flatten_storage import flatten_storage
from .passes.partition_loops import partition_loops
from .passes.simplify import simplify
from .passes.unroll_loops import unroll_loops
from .passes.vectorize_loops import vectorize_loops
from .passes.widen_indices import widen_indices

PASSES: list[tuple[str, Callable[[N.PrimFunc], N.PrimFunc]]] = [
    ("widen_indices", widen_indices),
    ("simplify", simplify),
    ("partition_loops", partition_loops),
    ("simplify", simplify),
    ("flatten_storage", flatten_storage),
    ("widen_indices", widen_indices),
    ("simplify", simplify),
    ("vectorize_loops", vectorize_loops),
    ("unroll_loops", unroll_loops),
    ("simplify", simplify),
]


def debug_enabled(topic: str) -> bool:
    return topic in os.environ.get("TENSORFORGE_DEBUG", "").split(",")


def run_pipeline(func: N.PrimFunc) -> N.PrimFunc:
    dump = debug_enabled("passes")
    if dump:
        print(f"# {func.name}: after loop generation\n{func}\n", file=sys.stderr)
    for name, fn in PASSES:
        func = fn(func)
        if dump:
            print(f"# {func.name}: after {name}\n{func}\n", file=sys.stderr)
    return func
