"""The graph pass list: reading it is reading the graph optimizer.  Every pass receives the
Target: layout rewrites ask it which layouts its backend prefers and how wide its vectors are.
`opt_level` 0 runs only what correctness needs; `TENSORFORGE_DEBUG=passes` prints the graph
after each pass."""
from __future__ import annotations

import sys
from typing import Callable

from ..target import Target
from .ir import Graph
from .passes.alter_layout import alter_layout
from .passes.alter_layout_column_conv import alter_layout_column_conv
from .passes.alter_layout_conv_transpose import alter_layout_conv_transpose
from .passes.alter_layout_half_blocks import alter_layout_half_blocks
from .passes.alter_layout_im2col import alter_layout_im2col
from .passes.alter_layout_int8 import alter_layout_int8
from .passes.alter_layout_matmul import alter_layout_matmul
from .passes.alter_layout_ops import alter_layout_ops
from .passes.alter_layout_propagate import alter_layout_propagate
from .passes.alter_layout_rnn import alter_layout_rnn
from .passes.alter_layout_winograd import alter_layout_winograd
from .passes.alter_layout_winograd_nchw import alter_layout_winograd_nchw
from .passes.conv3d_as_conv2d import conv3d_as_conv2d
from .passes.conv_as_tap_planes import conv_as_tap_planes
from .passes.conv_transpose_as_conv import conv_transpose_as_conv
from .passes.dilated_conv_as_phases import dilated_conv_as_phases
from .passes.einsum_as_matmul import einsum_as_matmul
from .passes.eliminate_dead_code import eliminate_dead_code
from .passes.fold_batch_norm import fold_batch_norm
from .passes.fold_constants import fold_constants
from .passes.fold_qdq import fold_qdq
from .passes.fold_qdq_gather import fold_qdq_gather
from .passes.fold_qdq_tables import fold_qdq_tables
from .passes.share_equal_params import share_equal_params
from .passes.simplify_graph import simplify_graph
from .passes.trim_conv_taps import trim_conv_taps
from .passes.unique_names import unique_names


def _any_target(fn: Callable[[Graph], Graph]) -> Callable[[Graph, Target], Graph]:
    """A pass that computes the same graph for every target, on the list's signature."""
    def run(graph: Graph, target: Target) -> Graph:
        return fn(graph)
    run.__name__ = fn.__name__
    return run


# (name, pass(graph, target), minimum opt_level)
PASSES: list[tuple[str, Callable[[Graph, Target], Graph], int]] = [
    ("eliminate_dead_code", _any_target(eliminate_dead_code), 0),
    ("fold_qdq", fold_qdq, 1),                        # before fold_constants dequantizes the weights
    ("fold_qdq_gather", _any_target(fold_qdq_gather), 1),   # ... and the embedding tables
    ("fold_constants", _any_target(fold_constants), 1),
    ("simplify_graph", _any_target(simplify_graph), 1),
    ("fold_qdq_tables", _any_target(fold_qdq_tables), 1),   # 8-bit -> 8-bit elementwise chains: lookups
    ("fold_batch_norm", _any_target(fold_batch_norm), 1),
    ("share_equal_params", _any_target(share_equal_params), 1),   # a weight reused: one value to pack
    ("einsum_as_matmul", einsum_as_matmul, 2),        # batched matrix products: the GEMM paths
    ("conv_transpose_as_conv", conv_transpose_as_conv, 2),      # stride 1: a conv with the kernel flipped
    ("conv3d_as_conv2d", conv3d_as_conv2d, 2),          # depth taps stacked as channels: the 2-D paths
    ("dilated_conv_as_phases", dilated_conv_as_phases, 3),   # atrous 3x3 convs: undilated on each phase
    ("trim_conv_taps", trim_conv_taps, 2),              # taps that only read padding
    ("alter_layout_column_conv", alter_layout_column_conv, 2),   # (k, 1) convs on width-1 data run along rows
    ("conv_as_tap_planes", conv_as_tap_planes, 2),   # few filters, many taps: a GEMM per tap, then a sum
    ("alter_layout", alter_layout, 2),
    ("alter_layout_im2col", alter_layout_im2col, 2),  # convs no blocked template serves: one GEMM
    ("alter_layout_propagate", alter_layout_propagate, 2),
    ("alter_layout_winograd", alter_layout_winograd, 3),
    ("alter_layout_winograd_nchw", alter_layout_winograd_nchw, 3),   # GPUs: NCHW Winograd convs
    ("alter_layout_half_blocks", alter_layout_half_blocks, 2),   # pointwise convs: whole-vector tiles
    ("alter_layout_conv_transpose", alter_layout_conv_transpose, 2),
    ("alter_layout_matmul", alter_layout_matmul, 2),
    ("alter_layout_rnn", alter_layout_rnn, 2),
    ("alter_layout_int8", alter_layout_int8, 2),      # int8 products on the CPU's dot-product unit
    ("alter_layout_ops", alter_layout_ops, 2),        # each op's own alter_layout rule
    ("share_equal_params", _any_target(share_equal_params), 1),   # equal copies passes derived per node
    ("eliminate_dead_code", _any_target(eliminate_dead_code), 0),
    ("unique_names", _any_target(unique_names), 0),   # values derived twice from a shared one
]


def optimize(graph: Graph, target: Target | str, opt_level: int = 3) -> Graph:
    """`graph` after the passes of `opt_level` and below, for `target`."""
    from ..tir.pipeline import debug_enabled
    target = Target.parse(target)
    dump = debug_enabled("passes")
    for name, fn, level in PASSES:
        if opt_level < level:
            continue
        graph = fn(graph, target)
        if dump:
            print(f"# graph after {name}\n{graph}\n", file=sys.stderr)
    return graph.validate()
