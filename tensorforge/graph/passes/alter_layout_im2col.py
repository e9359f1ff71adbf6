"""Convolutions that no blocked template serves become one matrix product on their windows,
and so do those alter_layout leaves to it for speed (with 16 vector registers, strided convs
whose output rows fit one register tile: alter_layout._narrow_strided_product).

A conv1d, or a conv2d whose output channels do not fill the target's vectors (alter_layout
leaves those in NCHW), runs on the generic direct template, which is far from the FMA peak for
shapes such as a 256-tap stride-128 conv1d (an STFT as a convolution), a 64x1 kernel over 64
channels or 258 output channels.  Written as

    cols = im2col(x, per_image)             (N, C * KH * KW, OH * OW): each image's windows as columns
    y    = reshape(matmul(W, cols), y's shape)          W: (M, C * KH * KW)

the work is one GEMM per image whose product already is the output in NCHW.  When the output
has fewer positions than channels (M > OH * OW: a 1-D conv with stride 4 down to 63 positions
and 100 channels), the product is turned around so that the longer dimension runs along the
vectors:

    cols = im2col(x)                        (N * OH * OW, C * KH * KW): the windows as rows
    y    = transpose(reshape(matmul(cols, W^T), (N, OH, OW, M)), (0, 3, 1, 2))

on the packed micro-kernel (the weight matrix is re-laid-out once, at compile time, and packed
by alter_layout_matmul), with the reshape and transpose as its epilogue.  (That transpose is a
scattered store per output element: the rows form took 1.7x ONNX Runtime's time on a 3 -> 128
channel 5x3 stride-4 stem over 300x28, the per-image form 1.3x.)  A conv1d is the same with a
height of 1.  Float32, constant weights, one group (or one product per group, where the windows
hold few values: `grouped_product`), and only while the window matrix stays small
(MAX_COLS_BYTES); the graph computes the same values.

A pointwise conv (every kernel size 1, stride 1, no padding: a segmentation head's 64 -> 3
channels, a 1-D model's output projection) needs no windows at all: each image already is the
(C, positions) matrix, so it becomes

    y = reshape(matmul(W, reshape(x, (N, C, positions))), y's shape)

with the reshapes views and the output written in NCHW by the product itself; with G groups,
W is (G, M / G, C / G) and each image (G, C / G, positions), one product per group (a grouped
pointwise conv1d of 4 groups of 64 -> 128 channels over 1024 positions took 3.6x ONNX Runtime's
time on the generic conv, 0.9x so).  (Through im2col
the windows were the image transposed, element by element: a 64 -> 3 head on 256x256 spent 14 of
its 16 ms there.)
"""
from __future__ import annotations

import numpy as np

from ...target import Target
from ..ir import Graph, Node, Value
from .alter_layout import rows_conv
from .alter_layout_propagate import is_elementwise
from .rewrite import rewrite_nodes

MAX_COLS_BYTES = 64 << 20


def alter_layout_im2col(graph: Graph, target: Target) -> Graph:
    if not target.prefers("packed_weights"):
        return graph
    rewritten = rewrite_nodes(graph, lambda n, params: _rewrite(n, params, target))
    if rewritten is graph:
        return graph
    from .eliminate_dead_code import eliminate_dead_code
    return eliminate_dead_code(epilogues_before_reshape(rewritten))


def epilogues_before_reshape(graph: Graph) -> Graph:
    """Elementwise ops after a reshape that splits a product's last axis in two (the (N, M, OH * OW)
    product of a conv as a GEMM, reshaped to (N, M, OH, OW)) run before it, on the product's
    shape: `relu(add(reshape(p), bias))` with a per-channel bias (1, M, 1, 1) becomes
    `reshape(relu(add(p, bias')))` with bias' (1, M, 1).  The product's template then takes them
    as its epilogue, in registers, and the reshape is a view; through the reshape they were a
    kernel of their own that recomputed each element's channel with two divisions.  Only ops
    whose other operands are constants that do not vary along the two split axes move."""
    params = dict(graph.params)
    nodes = list(graph.nodes)
    outputs = set(graph.outputs)
    changed, moved = False, True
    while moved:
        moved = False
        readers: dict = {}
        for n in nodes:
            for v in n.inputs:
                readers.setdefault(v, []).append(n)
        for k, r in enumerate(nodes):
            if r.op != "reshape" or not _splits_last_axis(r.inputs[0], r.outputs[0]):
                continue
            y = r.outputs[0]
            users = readers.get(y, [])
            e = users[0] if len(users) == 1 else None
            # an op whose output is not y's shape is elementwise but cannot move: a slice from
            # index 0 (alter_layout's cut of padded groups), an expand or a broadcasting add
            if e is None or y in outputs or len(e.outputs) != 1 or e.outputs[0].shape != y.shape \
                    or not is_elementwise(e):
                continue
            others = [v for v in e.inputs if v is not y]
            p, z = r.inputs[0], e.outputs[0]
            shapes = {v: _flat_shape(v, p, y) for v in others if v is not None and v in params}
            if len(shapes) != len(others) or any(shape is None for shape in shapes.values()):
                continue
            flat = {}
            for v, shape in shapes.items():
                assert shape is not None
                flat[v] = Value(f"{v.name}_flat", shape, v.dtype)
                params[flat[v]] = np.ascontiguousarray(params[v].reshape(shape))
            z_flat = Value(f"{z.name}_flat", p.shape, z.dtype)
            first = Node(e.op, tuple(p if v is y else flat[v] for v in e.inputs), (z_flat,), e.attrs, e.name)
            back = Node("reshape", (z_flat,), (z,), {"shape": z.shape}, r.name)
            nodes = [n for n in nodes if n is not r and n is not e]
            nodes[k:k] = [first, back]          # where the reshape was: e read only it and constants
            changed = moved = True
            break
    return graph.with_nodes(nodes, params=params) if changed else graph


def _splits_last_axis(p: Value, y: Value) -> bool:
    """Whether reshaping `p` to `y` splits p's last axis into y's last two and keeps the rest,
    or merges some of the rest (a grouped product's (N, G, M / G, positions) to (N, M, OH, OW))."""
    return len(y.shape) >= 3 and len(p.shape) >= 2 and y.shape[-2] * y.shape[-1] == p.shape[-1] \
        and int(np.prod(y.shape[:-2])) == int(np.prod(p.shape[:-1]))


def _flat_shape(v: Value, p: Value, y: Value) -> tuple | None:
    """The shape in which constant `v`, broadcast against `y`, broadcasts against the product
    `p` that `y` reshapes, or None where it varies along y's last two axes or broadcasts over
    some of the axes that p merges."""
    if len(v.shape) > len(y.shape) or any(d != 1 for d in v.shape[-2:]):
        return None
    if len(v.shape) < 2:
        return v.shape
    if y.shape[:-2] == p.shape[:-1]:
        return v.shape[:-2] + (1,)
    lead = (1,) * (len(y.shape) - len(v.shape)) + v.shape[:-2]
    if all(d == 1 for d in lead):
        return (1,) * len(p.shape)
    return p.shape[:-1] + (1,) if lead == y.shape[:-2] else None


def _rewrite(n: Node, params: dict, target: Target) -> list[Node] | None:
    if n.op not in ("conv1d", "conv2d") or len(n.inputs) != 2 or n.inputs[1] not in params:
        return None
    x, w, y = n.inputs[0], n.inputs[1], n.outputs[0]
    rank = 1 if n.op == "conv1d" else 2
    kernel = tuple(w.shape[2:])
    strides = tuple(n.attrs.get("strides") or (1,) * rank)
    dilations = tuple(n.attrs.get("dilations") or (1,) * rank)
    padding = tuple(n.attrs.get("padding") or (0,) * (2 * rank))
    pointwise = all(k == 1 for k in kernel) and all(st == 1 for st in strides) and not any(padding)
    groups = int(n.attrs.get("groups", 1))
    if groups != 1 and not (pointwise or grouped_product(n)) or y.dtype != "float32" or x.dtype != "float32":
        return None
    out_spatial = tuple(y.shape[2:])
    rows, cols = x.shape[0] * int(np.prod(out_spatial)), x.shape[1] * int(np.prod(kernel))
    if rows == 0 or cols == 0:
        return None
    if pointwise:
        return _pointwise(n, params)        # no windows to copy: any size
    if rows * cols * 4 > MAX_COLS_BYTES or rows_conv(n, target):
        return None
    if rank == 1:      # conv1d as a conv2d of height 1
        x4 = Value(f"{x.name}_h1", (x.shape[0], x.shape[1], 1, x.shape[2]), x.dtype)
        pre = [Node("unsqueeze", (x,), (x4,), {"axes": (2,)}, f"{n.name}_h1")]
        kernel, strides, dilations = (1, kernel[0]), (1, strides[0]), (1, dilations[0])
        padding, out_spatial = (0, padding[0], 0, padding[1]), (1, out_spatial[0])
    else:
        x4, pre = x, []
    attrs = {"kernel": kernel, "strides": strides, "padding": padding, "dilations": dilations, "pad_value": 0}
    positions = int(np.prod(out_spatial))
    if positions < w.shape[0] and groups == 1:      # (grouped_product: positions >= M / G)
        return pre + _windows_as_rows(n, params, x4, rows, cols, attrs, out_spatial, rank)
    # (M, C * KH * KW), or per group (G, M / G, C / G * KH * KW): a group's windows are its
    # channels' rows of the window matrix, consecutive, so (N, G, C / G * KH * KW, positions)
    # is a view of it
    per = (groups,) if groups > 1 else ()
    weight = np.ascontiguousarray(params[w].reshape(*per, w.shape[0] // groups, -1))
    wm = Value(f"{w.name}_im2col", weight.shape, weight.dtype.name)
    params[wm] = weight
    windows = Value(f"{y.name}_cols", (x.shape[0], cols, positions), x.dtype)
    product = Value(f"{y.name}_matrix", (x.shape[0], *per, w.shape[0] // groups, positions), y.dtype)
    nodes = [Node("im2col", (x4,), (windows,), {**attrs, "per_image": True}, f"{n.name}_im2col")]
    if groups > 1:
        split = Value(f"{y.name}_cols_groups", (x.shape[0], groups, cols // groups, positions), x.dtype)
        nodes.append(Node("reshape", (windows,), (split,), {"shape": split.shape}, f"{n.name}_groups"))
        windows = split
    return pre + nodes + [
        Node("matmul", (wm, windows), (product,), {}, f"{n.name}_gemm"),
        Node("reshape", (product,), (y,), {"shape": y.shape}, f"{n.name}_nchw"),
    ]


# a grouped conv runs as a product per group where its windows (all groups' together) hold at
# most GROUPED_WINDOW_SHARE times as many values as it has filters: the window matrix then costs
# less to write than the output, which the blocked form cuts group by group in a gather
GROUPED_WINDOW_SHARE = 2


def grouped_product(n: Node) -> bool:
    """Whether `n` is a grouped float32 conv1d/conv2d (not depthwise: its groups hold several
    channels or filters) that runs here as one product per group: non-negative padding, at
    least as many output positions as filters per group (the per-image form), windows of at
    most GROUPED_WINDOW_SHARE values per filter, within MAX_COLS_BYTES.  Between NCHW values
    alter_layout leaves such a conv to this pass: the product writes NCHW as it goes, where
    blocked the output went through a gather that cut each group's padded filters (4 groups of
    3 -> 100 channels, a 1x3 kernel on 300x7: 0.85 ms blocked, 0.09 ms so; ONNX Runtime 0.16),
    or, with few values per window, the tile's NCHW epilogue wrote more than it computed (2
    groups of 1 -> 24 channels, 5 taps over 300x7: 0.099 ms blocked, ONNX Runtime 0.025).
    (2 groups of 32 -> 100 channels with a 64x1 kernel, 4096 values per window: 22.6 ms as
    products, 18.6 ms for ONNX Runtime; 2 groups of 8 -> 100 with a 3x5 kernel, 240 values:
    0.055 ms so, 0.089 ms blocked, 0.069 ms for ONNX Runtime.)"""
    if n.op not in ("conv1d", "conv2d") or len(n.inputs) != 2 or n.inputs[1] is None:
        return False
    x, w, y = n.inputs[0], n.inputs[1], n.outputs[0]
    groups = int(n.attrs.get("groups", 1))
    if groups < 2 or (x.shape[1] == groups and y.shape[1] == groups) or y.dtype != "float32" \
            or any(p < 0 for p in n.attrs.get("padding") or (0,)):
        return False
    positions = int(np.prod(y.shape[2:]))
    window = int(np.prod(w.shape[1:])) * groups
    return positions >= y.shape[1] // groups and window <= GROUPED_WINDOW_SHARE * y.shape[1] \
        and 4 * x.shape[0] * positions * window <= MAX_COLS_BYTES


def _windows_as_rows(n: Node, params: dict, x4: Value, rows: int, cols: int, attrs: dict, out_spatial: tuple,
                     rank: int) -> list[Node]:
    """The product with the windows as its left operand's rows and the weights transposed as
    the right one (N * OH * OW, M), transposed to NCHW as its epilogue."""
    x, w, y = n.inputs[0], n.inputs[1], n.outputs[0]
    weight = np.ascontiguousarray(params[w].reshape(w.shape[0], -1).T)       # (C * KH * KW, M)
    wt = Value(f"{w.name}_im2col_T", weight.shape, weight.dtype.name)
    params[wt] = weight
    m = w.shape[0]
    windows = Value(f"{y.name}_cols", (rows, cols), x.dtype)
    product = Value(f"{y.name}_gemm", (rows, m), y.dtype)
    nhwc = Value(f"{y.name}_nhwc", (x.shape[0], *out_spatial, m), y.dtype)
    if rank == 1:
        back = [Node("transpose", (nhwc,), (Value(f"{y.name}_nch1w", (x.shape[0], m, 1, out_spatial[1]), y.dtype),),
                     {"perm": (0, 3, 1, 2)}, f"{n.name}_nchw")]
        back.append(Node("squeeze", back[0].outputs, (y,), {"axes": (2,)}, f"{n.name}_squeeze"))
    else:
        back = [Node("transpose", (nhwc,), (y,), {"perm": (0, 3, 1, 2)}, f"{n.name}_nchw")]
    return [
        Node("im2col", (x4,), (windows,), attrs, f"{n.name}_im2col"),
        Node("matmul", (windows, wt), (product,), {}, f"{n.name}_gemm"),
        Node("reshape", (product,), (nhwc,), {"shape": nhwc.shape}, f"{n.name}_nhwc"),
    ] + back


def _pointwise(n: Node, params: dict) -> list[Node]:
    """A 1x1, stride-1, unpadded conv as W (M, C) times each image's (C, positions) matrix; with
    G groups, W (G, M / G, C / G) times each image's (G, C / G, positions) matrices."""
    x, w, y = n.inputs[0], n.inputs[1], n.outputs[0]
    groups = int(n.attrs.get("groups", 1))
    batch, channels, m = x.shape[0], x.shape[1], w.shape[0]
    positions = int(np.prod(x.shape[2:]))
    per = (groups,) if groups > 1 else ()
    weight = np.ascontiguousarray(params[w].reshape(*per, m // groups, channels // groups))
    wm = Value(f"{w.name}_matrix", weight.shape, weight.dtype.name)
    params[wm] = weight
    matrix = Value(f"{x.name}_matrix", (batch, *per, channels // groups, positions), x.dtype)
    product = Value(f"{y.name}_matrix", (batch, *per, m // groups, positions), y.dtype)
    return [Node("reshape", (x,), (matrix,), {"shape": matrix.shape}, f"{n.name}_matrix"),
            Node("matmul", (wm, matrix), (product,), {}, f"{n.name}_gemm"),
            Node("reshape", (product,), (y,), {"shape": y.shape}, f"{n.name}_nchw")]
