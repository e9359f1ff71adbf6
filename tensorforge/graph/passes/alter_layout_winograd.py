"""3x3 stride-1 convolutions on blocked data become Winograd convolutions (opt_level 3).

Runs after alter_layout_propagate: a conv2d_nchwc with a constant packed 3x3 weight, stride 1,
dilation 1 and float32 values (grouped too, on blocked data whose blocks each group's channels
fill) becomes conv2d_winograd_nchwc with the weight transform G g G^T
computed here, once (see ops/nn_conv_winograd.py).  Output layout, name and readers stay the
same, so the fused epilogue and the layout propagation around it do not change.  The Winograd
conv reads blocked data: a conv that reads NCHW data (the first conv after an op that needs
NCHW, or a one-conv graph) gets an nchw_to_nchwc before it when its channels fill blocks.

`winograd_tile` decides per layer, unless a tile chooser is set (`choosing_tiles`).  The product stage does 4x (m = 4) or 2.25x (m = 2) fewer
multiply-adds than the direct conv, but reads a transformed weight 4x (m = 4) or 1.8x (m = 2)
the size of the 3x3 one and pays for the input and output transforms.  On ResNet-18's layers
m = 4 wins on maps of 8x8 and larger; on 7x7 maps, where 4x4 tiles waste a third of their
outputs, m = 2 is chosen (benchmarks/ops.py measures both against the direct conv).  Layers
with few input channels keep the direct conv: their product is too short to hide the
transforms.  That floor is 16 channels with 32 vector registers (AVX-512, where it was
measured) and 8 with 16 (AVX2, one 8-lane block): there 8 -> 32 channels on 56x56 took 0.21 ms
direct and 0.18 ms as Winograd (ONNX Runtime 0.18), 8 -> 96 on 96x28 0.53 and 0.45 (0.42-0.45).

The rule is one machine's: on a CPU with two FMA units per core the product is cheap beside the
transformed weight's reads, and a 256-channel 14x14 layer took 1.33 ms with m = 4 and 1.16 ms
with m = 2.  So the choice can come from tuning: while a chooser is set (`choosing_tiles`),
each 3x3 stride-1 conv on blocked data offers it its candidate forms (the direct conv, and the
Winograd conv of each tile size, as the op, input shapes and attributes of their kernels) with
the rule's pick as the default, and runs as the form it returns.  `driver.compile` sets one
from tuning records (autotune/algorithms.py); `tensorforge tune` forces each form in turn to
find the kernels it can choose between.
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator

import numpy as np

from ...ops.nn_conv_nchwc import blocked_layout
from ...ops.nn_conv_winograd import TILES, transform_weight, transformed_shape
from ...target import Target
from ..ir import Graph, Node, Value
from .alter_layout import block_for

MIN_CHANNELS = 16
# the input-channel floor with 16 vector registers (AVX2)
MIN_CHANNELS_16_REGISTERS = 8

# (candidates, default) -> tile size; candidates maps each tile size (0: the direct conv) to the
# (op, [(shape, dtype) per input], attributes) of the kernel that form runs as
TileChooser = Callable[[dict, int], int]
TILE_CHOICE: ContextVar[TileChooser | None] = ContextVar("tensorforge_winograd_tile_choice", default=None)


@contextmanager
def choosing_tiles(chooser: TileChooser | None) -> Iterator[None]:
    """Graphs optimized inside take each eligible conv's form from `chooser` (None: the rule)."""
    token = TILE_CHOICE.set(chooser)
    try:
        yield
    finally:
        TILE_CHOICE.reset(token)


def winograd_tile(c: int, k: int, oh: int, ow: int, min_channels: int = MIN_CHANNELS) -> int:
    """The Winograd tile size m for a 3x3 stride-1 conv of c -> k channels with an oh x ow
    output, or 0 to keep the direct conv (fewer than `min_channels` input channels, or fewer
    than MIN_CHANNELS output channels)."""
    if c < min_channels or k < MIN_CHANNELS:
        return 0
    return 4 if min(oh, ow) >= 8 else 2


def channel_floor(target: Target) -> int:
    """The input-channel floor of `winograd_tile` on this target's register file."""
    return MIN_CHANNELS if target.vector_registers >= 32 else MIN_CHANNELS_16_REGISTERS


def alter_layout_winograd(graph: Graph, target: Target) -> Graph:
    if not target.prefers("winograd"):
        return graph

    def emit(n: Node, u: Value, m: int) -> list[Node]:
        nodes = []
        data, layout = n.inputs[0], n.attrs.get("data_layout", "NCHW")
        if layout == "NCHW":
            block = block_for(data.shape[1], data.dtype, target)
            layout = blocked_layout(block)
            blocked = Value(f"{n.name}_{layout}", (data.shape[0], data.shape[1] // block, *data.shape[2:], block),
                            data.dtype)
            nodes.append(Node("nchw_to_nchwc", (data,), (blocked,), {"block": block}, f"{n.name}_in"))
            data = blocked
        return nodes + [Node("conv2d_winograd_nchwc", (data, u), n.outputs, _winograd_attrs(n, m, layout), n.name)]

    floor = channel_floor(target)
    return rewrite_winograd(graph, lambda n, params: _tile_for(n, params, floor), transform_weight, emit)


def rewrite_winograd(graph: Graph, tile_for: Callable, transform: Callable, emit: Callable) -> Graph:
    """Each conv node with a tile size m = tile_for(node, params) > 0 replaced by emit(node, U,
    m), U = transform(weight, m) its transformed weight (made once per weight and tile size); the
    shared walk of this pass and of alter_layout_winograd_nchw (the GPUs')."""
    params = dict(graph.params)
    nodes: list[Node] = []
    changed = False
    done: dict = {}
    for n in graph.nodes:
        m = tile_for(n, params)
        if not m:
            nodes.append(n)
            continue
        w = n.inputs[1]
        u = done.get((w, m))
        if u is None:
            arr = transform(params[w], m)
            u = Value(f"{w.name}_wino{m}", arr.shape, arr.dtype.name)
            params[u] = arr
            done[(w, m)] = u
        nodes += emit(n, u, m)
        changed = True
    if not changed:
        return graph
    from .eliminate_dead_code import eliminate_dead_code
    return eliminate_dead_code(graph.with_nodes(nodes, params=params))


def _tile_for(n: Node, params: dict, min_channels: int) -> int:
    if n.op != "conv2d_nchwc" or len(n.inputs) != 2 or n.inputs[1] not in params:
        return 0
    layout = n.attrs.get("data_layout", "NCHW")
    if n.outputs[0].dtype != "float32" or (layout == "NCHW" and n.inputs[0].shape[1] % min_channels):
        return 0
    if tuple(n.attrs.get("strides", (1, 1))) != (1, 1) or tuple(n.attrs.get("dilations", (1, 1))) != (1, 1):
        return 0
    w = params[n.inputs[1]]
    if w.ndim != 5 or tuple(w.shape[2:4]) != (3, 3) or w.dtype != np.float32:
        return 0
    groups = int(n.attrs.get("groups", 1))
    # a grouped conv: each group's channels whole blocks of the blocked data and output
    if groups != 1 and (layout == "NCHW" or w.shape[0] % groups or w.shape[1] % n.inputs[0].shape[4]):
        return 0
    y = n.outputs[0]
    m = winograd_tile(w.shape[1], w.shape[0] * w.shape[4] // groups, y.shape[2], y.shape[3], min_channels)
    chooser = TILE_CHOICE.get()
    if chooser is None or layout == "NCHW":     # NCHW data: a Winograd form adds a layout change
        return m
    return chooser(_forms(n, w.shape, layout), m)


def _forms(n: Node, w: tuple, layout: str) -> dict:
    """{tile size (0: direct): (op, input specs, attributes)} of the kernels a conv can run as:
    the attributes as `emit` writes them, the transformed weight as `transform_weight` shapes it."""
    data = (n.inputs[0].shape, n.inputs[0].dtype)
    forms = {0: (n.op, [data, (w, "float32")], dict(n.attrs))}
    for m in TILES:
        forms[m] = ("conv2d_winograd_nchwc", [data, (transformed_shape(w, m), "float32")],
                    _winograd_attrs(n, m, layout))
    return forms


def _winograd_attrs(n: Node, m: int, layout: str) -> dict:
    """The attributes of the Winograd conv with tile size `m` that replaces the conv node `n`."""
    attrs = {"tile": m, "padding": tuple(n.attrs.get("padding", (0, 0, 0, 0))), "data_layout": layout}
    if int(n.attrs.get("groups", 1)) != 1:
        attrs["groups"] = int(n.attrs["groups"])
    return attrs
