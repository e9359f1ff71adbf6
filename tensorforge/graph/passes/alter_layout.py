"""Layout changes that suit the CPU: weights are re-laid-out once, at compile time.

- dense(x, W) with a constant W (units, in) becomes matmul(x, W^T): the kernel then walks the
  output units contiguously, so they vectorize, instead of a scalar dot product per unit.  With a
  run-time W (ONNX Gemm with transB on an input) it becomes matmul(x, W, transpose_b), which
  alter_layout_matmul turns into a transpose node and the GEMM.
- conv2d(x, W) with a constant W and output channels per group that split into SIMD blocks
  (whole vectors, or half vectors: MobileNetV2's 24 channels) becomes
  conv2d_nchwc(x, W packed as OIHW[B]o) -> nchwc_to_nchw: the kernel accumulates B output
  channels per vector (see ops/nn_conv_nchwc.py).  B is chosen per layer from the
  output channels and the target's vector width (`block_for`); the pass after this one,
  alter_layout_propagate, keeps the blocked result where its readers can take it.
  Grouped convs too (each output block lies in one group); depthwise convs with one filter per
  channel are alter_layout_propagate's.
- A conv whose filters per group do not fill half a vector (1, 4, 7, 33 filters) takes the
  same path with zero filters padded into each group up to the next block, the padding cut off
  by a slice: always when it has several groups, and with one group when its windows overlap
  enough (at least PAD_MIN_OVERLAP taps per output position and stride: a tall kernel such as 64x1
  over 512 rows; with fewer than FEW_FILTERS filters at least FEW_MIN_OVERLAP: a 3x1 kernel, a
  3x3 kernel at stride 2).  Otherwise alter_layout_im2col makes it one GEMM on its windows, which
  copies each input value taps / strides times; the copies cost about as much as 16 / filters
  of the product's multiply-adds, so they pay for many filters or barely overlapping windows (a
  2x2 kernel at stride 2, 3x3 at stride 4, an STFT's 258 filters at 2 taps per stride).
- A conv with at most ROW_FILTERS filters per group over output rows of two vectors or more
  stays NCHW on the generic template, which vectorizes the rows (`rows_conv`).
  (Stride-1 convs of one group with few filters and enough input channels for them reach this
  pass as a 1x1 conv and a tap_sum: conv_as_tap_planes, which runs before it.)
- Where no blocked conv reads a conv's output (it goes to NCHW: a model output, a reshape),
  filters that would run in blocks of half a vector (24, 40 with AVX-512) are padded to whole
  vectors instead: twice the lanes per multiply-add for at most 1.5x the filters (`_whole_vectors`).
- A conv1d takes the same path as a conv2d of height 1 (unsqueeze, blocked conv, squeeze), except
  a pointwise one, which im2col makes a plain GEMM.
- With 16 vector registers, a strided conv whose output row fits one register tile (7 columns of
  two vectors) stays NCHW too, for alter_layout_im2col's GEMM (`_narrow_strided_product`).
- A pointwise conv2d (1x1, stride 1, no padding, at least 64 positions) whose input
  will not be blocked (a graph input, or the output of an op that needs NCHW: a reshape, or a
  resize or concat of values not all blocked) and whose output no blocked conv reads stays NCHW as well:
  alter_layout_im2col makes it W times the image, read and written in NCHW.  The blocked conv
  would broadcast each input value from a channel plane of its own and write NCHW back element
  by element (72 -> 72 channels on 45x45, alone in a graph: 1.64x ONNX Runtime's time blocked,
  0.82x as the product; 64 -> 256 on 56x56 1.31x and 0.82x).  `_LayoutGuess` tells which
  values alter_layout_propagate will keep blocked, following that pass's rules.
"""
from __future__ import annotations

import numpy as np

from ...ops.nn_conv_nchwc import pack_weight
from ...target import Target
from ..ir import Graph, Node, Value
from .alter_layout_propagate import (
    GLOBAL_POOLS,
    WINDOW_POOLS,
    blocked_concat,
    dcr_depth_to_space,
    is_elementwise,
    plane_resize,
    plane_slice,
)


def alter_layout(graph: Graph, target: Target) -> Graph:
    """Both rewrites where the target's backend prefers packed weights / blocked data."""
    packs, blocks = target.prefers("packed_weights"), target.prefers("NCHWc")
    if not (packs or blocks):
        return graph
    params = dict(graph.params)
    nodes = []
    changed = False
    transposed: dict = {}
    guess = _LayoutGuess(graph, params, target)
    for n in graph.nodes:
        if packs and n.op == "dense" and len(n.inputs) == 2 and n.inputs[1] in params and n.inputs[1].ndim == 2:
            w = n.inputs[1]
            wt = transposed.get(w)
            if wt is None:
                arr = np.ascontiguousarray(params[w].T)
                wt = Value(w.name + "_T", arr.shape, arr.dtype.name)
                params[wt] = arr
                transposed[w] = wt
            nodes.append(Node("matmul", (n.inputs[0], wt), n.outputs, {}, n.name))
            changed = True
        elif packs and n.op == "dense" and len(n.inputs) == 2 and n.inputs[1] is not None and n.inputs[1].ndim == 2:
            nodes.append(Node("matmul", n.inputs, n.outputs, {"transpose_b": True}, n.name))
            changed = True
        elif blocks and _blockable(n, params, target) and not guess.stays_nchw(n):
            nodes += _blocked_conv(n, params, target, whole_vectors=not guess.read_blocked(n.outputs[0]))
            changed = True
        else:
            nodes.append(n)
    if not changed:
        return graph
    from .eliminate_dead_code import eliminate_dead_code
    return eliminate_dead_code(graph.with_nodes(nodes, params=params))


def block_for(channels: int, dtype, target: Target) -> int:
    """The channel block of NCHW[b]c data: two of the target's vectors when the channels fill
    them, else one, else half a vector (24 channels with 16-lane vectors: blocks of 8)."""
    lanes = target.simd_lanes(np.dtype(dtype).name)
    if channels % (2 * lanes) == 0:
        return 2 * lanes
    return lanes if channels % lanes == 0 else lanes // 2


# taps per output position and stride from which padding output channels beats im2col's copies
PAD_MIN_OVERLAP = 4
# and below FEW_FILTERS filters from FEW_MIN_OVERLAP: a 96 -> 7 conv with a 3x1 kernel on 300x56
# took 5.8 ms through im2col, whose window matrix of 19 MB went through memory twice, and 1.5 ms
# blocked on 8 filters (ONNX Runtime 2.1 ms); blocked also won for 3x3 stride-2 and 1x3
# stride-1x2 kernels with 1-18 filters, by 10-45%.  im2col kept winning for a 2x2 stride-2 patch
# conv (1.6x) and 3x3 at stride 4 (1.3x), and for an STFT's 514 filters at 3 taps per stride (8%)
FEW_FILTERS = 32
FEW_MIN_OVERLAP = 1.5


# the narrowest vector a block of more filters than half a vector may use: 8 float32 lanes (256
# bits); AVX-512's half vectors qualify (MobileNetV2's 24 channels in blocks of 8), AVX2's do not
MIN_HALF_BLOCK_LANES = 8


def _filter_step(channels: int, target: Target) -> int:
    """The multiple that a conv's filters per group are kept at or padded to: half a vector for
    at most half a vector of filters, or where half a vector is at least MIN_HALF_BLOCK_LANES
    wide; else a whole vector.  With AVX2, blocks of 4 ran at SSE width: a 256-channel,
    4-group conv with 100 filters per group took 1.8x ONNX Runtime's time in blocks of 4 (padding
    each group to 104 filters costs 4% more multiply-adds)."""
    half = max(target.simd_lanes("float32") // 2, 1)
    return half if channels <= half or half >= MIN_HALF_BLOCK_LANES else 2 * half


def _whole_vectors(channels: int, target: Target) -> int:
    """`channels` filters per group, or, where they would run in blocks of half a vector (more
    than half a vector of filters that whole vectors do not divide: 24, 40, 56 with AVX-512),
    rounded up to whole vectors.  Half-vector multiply-adds do half the work each, so the padded
    filters cost less than they waste (a 64 -> 24 conv with a 64x1 kernel on 512x14: 12.4 -> 8.0
    ms, ONNX Runtime 8.6; 48 -> 48 in two groups, 16 taps over 4000: 1.37 -> 0.97 ms).  Only
    where no blocked conv reads the output: the padding is sliced off on the way to NCHW, while
    a blocked reader would take it as input channels (MobileNetV2's 24-channel layers padded so
    took 1.6x as long)."""
    lanes = target.simd_lanes("float32")
    if channels <= lanes // 2 or channels % lanes == 0 or block_for(channels, "float32", target) >= lanes:
        return channels
    return -(-channels // lanes) * lanes


def _padded_channels(channels: int, target: Target) -> int:
    """`channels` rounded up to half a vector (up to half a vector) or to a whole one."""
    half = max(target.simd_lanes("float32") // 2, 1)
    step = half if channels <= half else 2 * half
    return -(-channels // step) * step


def _blockable(n: Node, params: dict, target: Target) -> bool:
    """A float32 conv1d/conv2d (not a depthwise conv with one filter per channel, which
    alter_layout_propagate blocks) that runs blocked: its filters per group fill half a vector,
    or, with a constant weight, its windows overlap enough to pad them (module docstring)."""
    if n.op not in ("conv1d", "conv2d") or len(n.inputs) != 2 or n.inputs[1] is None:
        return False
    w, y = n.inputs[1], n.outputs[0]
    groups = int(n.attrs.get("groups", 1))
    if y.dtype != "float32" or w.dtype != "float32" or groups < 1:
        return False
    if _depthwise(n):
        return False
    if any(p < 0 for p in n.attrs.get("padding") or (0,)):
        return False
    if _narrow_strided_product(n, target):
        return False
    per_group = y.shape[1] // groups
    if per_group % _filter_step(per_group, target) == 0:
        # a conv1d pointwise with a constant weight is a GEMM (alter_layout_im2col)
        return n.op == "conv2d" or int(np.prod(w.shape[2:])) > 1 or w not in params
    if w not in params:
        return False            # a run-time weight is packed by nodes: whole blocks of filters only
    if rows_conv(n, target):
        return False
    if groups > 1:
        return True             # im2col takes one group only: the alternative is the generic conv
    taps = int(np.prod(w.shape[2:]))
    strides = n.attrs.get("strides") or (1,) * (w.ndim - 2)
    overlap = PAD_MIN_OVERLAP if per_group >= FEW_FILTERS else FEW_MIN_OVERLAP
    return taps >= overlap * int(np.prod(strides))


# filters up to which a conv of one group over rows of at least two vectors runs on the generic
# NCHW template (`rows_conv`)
ROW_FILTERS = 3


def rows_conv(n: Node, target: Target) -> bool:
    """A float32 conv1d/conv2d (not depthwise) with at most ROW_FILTERS filters per group whose
    output rows span two vectors or more: it stays in NCHW on the generic template, which
    vectorizes along the output row, each input value read once per tap and filter.  Padded to
    a block of 8 filters it wasted 7 of 8 lanes, and im2col copies every window (64 -> 1
    channels, 3x3 on 224x224: 4.4 ms blocked, 1.4 ms so, ONNX Runtime 5.5; 2 filters 4.3 -> 2.4;
    3 filters on 256x256 2.7 -> 2.2; a 1-D 8 -> 1 conv over 4000 samples 0.033 -> 0.011;
    192 -> 4 channels in 4 groups, 5 taps over 1024: 0.165 -> 0.054; 4 filters no faster, 7
    slower).  Alter_layout leaves it to alter_layout_im2col, which leaves it too."""
    groups = int(n.attrs.get("groups", 1))
    if n.op not in ("conv1d", "conv2d") or groups < 1 or _depthwise(n):
        return False
    y = n.outputs[0]
    per_group = y.shape[1] // groups
    return y.dtype == "float32" and 0 < per_group <= ROW_FILTERS and y.shape[-1] >= 2 * target.simd_lanes("float32")


# the fewest positions per image for which a pointwise conv may run as W times the image: the
# product's columns are its positions (a squeeze-and-excitation block's 1x1 maps ran 15% slower
# as products of one column than blocked)
POINTWISE_GEMM_MIN_POSITIONS = 64


def _pointwise(n: Node) -> bool:
    """A 1x1, stride-1, unpadded conv2d over at least POINTWISE_GEMM_MIN_POSITIONS positions
    (with groups: one product per group, alter_layout_im2col; 4 groups of 64 -> 128 channels on
    32x32 took 1.13x ONNX Runtime's time blocked and 0.82x so, 2 groups of 6 -> 6 on 56x56 1.65x
    and 0.67x)."""
    return n.op == "conv2d" and n.inputs[1].shape[2:] == (1, 1) \
        and all(s == 1 for s in (n.attrs.get("strides") or (1, 1))) and not any(n.attrs.get("padding") or (0,)) \
        and int(np.prod(n.inputs[0].shape[2:])) >= POINTWISE_GEMM_MIN_POSITIONS


# a conv of one group over at most SMALL_WINDOW_CHANNELS input channels (a conv1d: windows of at
# most SMALL_WINDOW values, channels x taps) whose window matrix takes at most SMALL_WINDOWS_BYTES,
# with SMALL_WINDOW_MIN_FILTERS filters or more
SMALL_WINDOW_CHANNELS = 2
SMALL_WINDOW = 64
SMALL_WINDOWS_BYTES = 2 << 20
SMALL_WINDOW_MIN_FILTERS = 16


def _small_windows(n: Node) -> bool:
    """A conv whose output is mostly writing: few values per window (a 1- or 2-channel image, a
    conv1d over a few channels) against many filters.  Between NCHW values it runs better as
    alter_layout_im2col's W times its windows, which writes NCHW rows whole, than blocked, whose
    NCHW epilogue writes each tile channel by channel: 2 -> 64 channels, 3 taps on 4000
    positions took 0.26 ms blocked, 0.10 ms as the product (ONNX Runtime 0.11); 1 -> 32 channels
    3x3 on 128x128 0.41 and 0.19 ms (0.29); a conv1d 16 -> 64 with 3 taps 0.13 and 0.10 ms.
    3-channel 3x3 stems were as fast or faster blocked (on 225x225, whose window matrix of 5.4 MB
    goes through memory: 3.1 ms, 4.4 as the product)."""
    if n.op not in ("conv1d", "conv2d") or int(n.attrs.get("groups", 1)) != 1:
        return False
    x, w, y = n.inputs[0], n.inputs[1], n.outputs[0]
    window = int(np.prod(w.shape[1:]))
    positions = int(np.prod(y.shape[2:])) * y.shape[0]
    few = x.shape[1] <= SMALL_WINDOW_CHANNELS or (n.op == "conv1d" and window <= SMALL_WINDOW)
    return few and y.shape[1] >= SMALL_WINDOW_MIN_FILTERS and 4 * window * positions <= SMALL_WINDOWS_BYTES \
        and x.dtype == "float32"


# ops whose blocked input alter_layout_propagate keeps blocked (besides elementwise ops and
# depthwise convs)
KEEPS_BLOCKS = (*WINDOW_POOLS, *GLOBAL_POOLS, "batch_norm")


class _LayoutGuess:
    """Which values alter_layout_propagate will hand on in the blocked layout: those that come
    from a blocked conv through elementwise ops, pools, depthwise convs and concats of such
    values only (`fed_blocked`), and
    those that such a path leads into a blocked or depthwise conv (`read_blocked`); a layout
    transform already in the graph counts as its blocked side (the pass cancels a pair).  A
    guess that follows that pass's rules, cached per value."""

    def __init__(self, graph: Graph, params: dict, target: Target):
        self.params, self.target = params, target
        self.producers = {v: n for n in graph.nodes for v in n.outputs}
        self.readers: dict = {}
        for n in graph.nodes:
            for v in n.inputs:
                self.readers.setdefault(v, []).append(n)
        self._fed: dict = {}
        self._read: dict = {}

    def stays_nchw(self, n: Node) -> bool:
        """A pointwise conv, one with small windows (`_small_windows`) or a grouped one with few
        values per window (alter_layout_im2col's `grouped_product`), that neither reads nor
        writes a value kept blocked, with a constant weight (the GEMM forms of
        alter_layout_im2col pack it at compile time)."""
        from .alter_layout_im2col import grouped_product  # (that module imports this one)
        return (_pointwise(n) or _small_windows(n) or grouped_product(n)) and n.inputs[1] in self.params \
            and not self.fed_blocked(n.inputs[0]) and not self.read_blocked(n.outputs[0])

    def _keeps_layout(self, n: Node, v: Value) -> bool:
        """Whether `n` (a reader or the producer of `v`) runs in the layout `v` comes in."""
        return n.op in KEEPS_BLOCKS or _depthwise(n) or plane_resize(n) or plane_slice(n) or dcr_depth_to_space(n) \
            or (len(n.outputs) == 1 and n.outputs[0].shape == v.shape and is_elementwise(n))

    def fed_blocked(self, v: Value) -> bool:
        if v not in self._fed:
            self._fed[v] = False            # a cycle cannot occur; this only stops a repeat
            node = self.producers.get(v)
            found = False
            if node is not None and node.op == "nchwc_to_nchw":
                found = True                # the transform pair cancels: the blocked value is read
            elif node is not None and node.op in ("conv1d", "conv2d") and not _depthwise(node):
                found = _blockable(node, self.params, self.target) and not self.stays_nchw(node)
            elif node is not None and blocked_concat(node):
                found = all(self.fed_blocked(u) for u in node.inputs)
            elif node is not None and self._keeps_layout(node, v):
                found = any(self.fed_blocked(u) for u in node.inputs if u is not None and u not in self.params)
            self._fed[v] = found
        return self._fed[v]

    def read_blocked(self, v: Value) -> bool:
        if v not in self._read:
            self._read[v] = False
            found = False
            for r in self.readers.get(v, ()):
                if r.op == "nchw_to_nchwc":
                    found = True
                elif r.op in ("conv1d", "conv2d") and r.inputs[0] is v:
                    found = _depthwise(r) or _blockable(r, self.params, self.target)
                elif blocked_concat(r):
                    found = self.fed_blocked(r.outputs[0]) and self.read_blocked(r.outputs[0])
                elif self._keeps_layout(r, v):
                    found = self.read_blocked(r.outputs[0])
                if found:
                    break
            self._read[v] = found
        return self._read[v]


def _depthwise(n: Node) -> bool:
    groups = int(n.attrs.get("groups", 1))
    return n.op in ("conv1d", "conv2d") and groups > 1 and groups == n.inputs[0].shape[1] == n.outputs[0].shape[1]


def _narrow_strided_product(n: Node, target: Target) -> bool:
    """With 16 vector registers, a strided float32 conv2d of one group whose output row fits
    one register tile of the direct conv (7 columns of two vectors: ResNet-18's 3x3 stride-2
    256 -> 512 conv on 14x14) runs as alter_layout_im2col's GEMM on its windows: the direct
    conv's short rows leave its taps and channels to loops around a 7-column tile (72% of the
    FMA peak on AVX2), the packed GEMM streams its 4.7 MB of weights once, in order (86%, with
    the window copy).  Only while the window matrix stays within MAX_COLS_BYTES."""
    from ...ops.schedules import gemm_kernel
    from ...ops.schedules.cpu_conv2d_nchwc import TILE_VECTORS
    from .alter_layout_im2col import MAX_COLS_BYTES

    x, w, y = n.inputs[0], n.inputs[1], n.outputs[0]
    lanes = target.simd_lanes("float32")
    if n.op != "conv2d" or int(n.attrs.get("groups", 1)) != 1 or not gemm_kernel.narrow_register_file(lanes):
        return False
    strides = tuple(n.attrs.get("strides") or (1, 1))
    if max(strides) < 2 or int(np.prod(w.shape[2:])) < 2 or x.dtype != "float32":
        return False
    block = block_for(y.shape[1], "float32", target)
    if y.shape[1] % block or block < lanes:
        return False
    columns = gemm_kernel.accumulators(lanes, TILE_VECTORS) // (block // lanes)
    windows = y.shape[0] * y.shape[2] * y.shape[3] * int(np.prod(w.shape[1:]))
    return y.shape[3] <= columns and 4 * windows <= MAX_COLS_BYTES


def _blocked_conv(n: Node, params: dict, target: Target, whole_vectors: bool = False) -> list[Node]:
    """conv2d_nchwc -> nchwc_to_nchw for conv node `n` (a conv1d as a conv2d of height 1), its
    filters padded per group to whole blocks and the padding sliced off; with `whole_vectors`
    (no blocked conv reads the output) to whole vectors (`_whole_vectors`).  A constant weight is
    packed OIHW -> OIHW[B]o here; a run-time one (a dynamic filter, whole blocks of filters) by a
    reshape and a transpose in the graph, a pass over the weight per call (on the generic conv
    template, a 64 -> 64 3x3 conv over 56x56 with its weight as an input took 2.9x ONNX
    Runtime's time)."""
    x, wv0, y = n.inputs[0], n.inputs[1], n.outputs[0]
    w = params.get(wv0)
    groups = int(n.attrs.get("groups", 1))
    attrs: dict = {k: tuple(n.attrs[k]) for k in ("strides", "padding", "dilations") if n.attrs.get(k) is not None}
    pre: list[Node] = []
    post: list[Node] = []
    if n.op == "conv1d":
        x4 = Value(f"{x.name}_h1", (x.shape[0], x.shape[1], 1, x.shape[2]), x.dtype)
        pre.append(Node("unsqueeze", (x,), (x4,), {"axes": (2,)}, f"{n.name}_h1"))
        if w is None:
            w4 = Value(f"{wv0.name}_h1", (wv0.shape[0], wv0.shape[1], 1, wv0.shape[2]), wv0.dtype)
            pre.append(Node("unsqueeze", (wv0,), (w4,), {"axes": (2,)}, f"{n.name}_w_h1"))
            wv0 = w4
        else:
            w = w[:, :, None, :]
        attrs = {"strides": (1, *attrs.get("strides", (1,))), "dilations": (1, *attrs.get("dilations", (1,))),
                 "padding": (0, attrs.get("padding", (0, 0))[0], 0, attrs.get("padding", (0, 0))[1])}
        y4 = Value(f"{y.name}_h1", (y.shape[0], y.shape[1], 1, y.shape[2]), y.dtype)
        post.append(Node("squeeze", (y4,), (y,), {"axes": (2,)}, f"{n.name}_1d"))
        x, y = x4, y4
    f = y.shape[1]
    per_group = f // groups
    padded = per_group if per_group % _filter_step(per_group, target) == 0 else _padded_channels(per_group, target)
    if whole_vectors and w is not None:
        padded = _whole_vectors(padded, target)
    if w is None:                                                # _blockable: whole blocks
        block = block_for(per_group, wv0.dtype, target)
        _, c, kh, kw = wv0.shape
        split = Value(f"{wv0.name}_blocks", (f // block, block, c, kh, kw), wv0.dtype)
        wv = Value(f"{wv0.name}_oihw{block}o", (f // block, c, kh, kw, block), wv0.dtype)
        pre += [Node("reshape", (wv0,), (split,), {"shape": split.shape}, f"{n.name}_w_blocks"),
                Node("transpose", (split,), (wv,), {"perm": (0, 2, 3, 4, 1)}, f"{n.name}_w_pack")]
    else:
        if padded != per_group:
            w = w.reshape(groups, per_group, *w.shape[1:])
            w = np.concatenate([w, np.zeros((groups, padded - per_group, *w.shape[2:]), w.dtype)], axis=1)
            w = w.reshape(groups * padded, *w.shape[2:])
        block = block_for(padded, w.dtype, target)               # blocks do not straddle groups
        wp = pack_weight(np.ascontiguousarray(w), block)
        wv = Value(wv0.name + f"_oihw{block}o", wp.shape, wp.dtype.name)
        params[wv] = wp
    total = groups * padded
    mid = Value(y.name + "_nchwc", (y.shape[0], total // block, y.shape[2], y.shape[3], block), y.dtype)
    if groups > 1:
        attrs["groups"] = groups
    nodes = [*pre, Node("conv2d_nchwc", (x, wv), (mid,), attrs, n.name)]
    if padded == per_group:
        nodes.append(Node("nchwc_to_nchw", (mid,), (y,), {}, n.name + "_nchw"))
        return nodes + post
    full = Value(y.name + "_padded", (y.shape[0], total, *y.shape[2:]), y.dtype)
    nodes.append(Node("nchwc_to_nchw", (mid,), (full,), {}, n.name + "_nchw"))
    if groups == 1:
        nodes.append(Node("slice", (full,), (y,), {"starts": (0,), "ends": (f,), "axes": (1,)}, n.name + "_channels"))
        return nodes + post
    # (N, G * P, H, W) -> (N, G, P, H, W) -> the first F / G of each group's P -> (N, F, H, W)
    split = Value(y.name + "_groups", (y.shape[0], groups, padded, *y.shape[2:]), y.dtype)
    kept = Value(y.name + "_kept", (y.shape[0], groups, per_group, *y.shape[2:]), y.dtype)
    nodes += [Node("reshape", (full,), (split,), {"shape": split.shape}, n.name + "_groups"),
              Node("slice", (split,), (kept,), {"starts": (0,), "ends": (per_group,), "axes": (2,)},
                   n.name + "_channels"),
              Node("reshape", (kept,), (y,), {"shape": y.shape}, n.name + "_merged")]
    return nodes + post
