"""The graph pass list: reading it is reading the graph optimizer.  `opt_level` 0 runs only
what correctness needs; `TENSORFORGE_DEBUG=passes` prints the graph after each pass."""
from __future__ import annotations

import sys
from typing import Callable

from .ir import Graph
from .passes.alter_layout import alter_layout
from .passes.alter_layout_conv_transpose import alter_layout_conv_transpose
from .passes.alter_layout_depthwise import alter_layout_depthwise
from .passes.alter_layout_matmul import alter_layout_matmul
from .passes.alter_layout_propagate import alter_layout_propagate
from .passes.alter_layout_rows import alter_layout_rows
from .passes.alter_layout_winograd import alter_layout_winograd
from .passes.eliminate_dead_code import eliminate_dead_code
from .passes.fold_batch_norm import fold_batch_norm
from .passes.fold_constants import fold_constants
from .passes.simplify_graph import simplify_graph

# (name, pass, minimum opt_level)
PASSES: list[tuple[str, Callable[[Graph], Graph], int]] = [
    ("eliminate_dead_code", eliminate_dead_code, 0),
    ("fold_constants", fold_constants, 1),
    ("simplify_graph", simplify_graph, 1),
    ("fold_batch_norm", fold_batch_norm, 1),
    ("alter_layout", alter_layout, 2),
    ("alter_layout_propagate", alter_layout_propagate, 2),
    ("alter_layout_winograd", alter_layout_winograd, 3),
    ("alter_layout_conv_transpose", alter_layout_conv_transpose, 2),
    ("alter_layout_matmul", alter_layout_matmul, 2),
    ("alter_layout_depthwise", alter_layout_depthwise, 2),
    ("alter_layout_rows", alter_layout_rows, 2),
    ("eliminate_dead_code", eliminate_dead_code, 0),
]


def optimize(graph: Graph, opt_level: int = 3) -> Graph:
    from ..tir.pipeline import debug_enabled
    dump = debug_enabled("passes")
    for name, fn, level in PASSES:
        if opt_level < level:
            continue
        graph = fn(graph)
        if dump:
            print(f"# graph after {name}\n{graph}\n", file=sys.stderr)
    return graph.validate()
