"""matmul(x, W) with a constant float32 W becomes matmul_packed(x, W packed into column panels),
or, with fewer columns than half a vector, dense(x, W^T): dot products of rows (`_dot_rows`).

The panels (N / nr, K, nr) let the CPU template stream the weight with unit stride while an
(mr x nr) output tile accumulates in registers (see ops/nn_dense_packed.py and
ops/schedules/cpu_matmul.py).  The panel width nr depends on the shape (a wider panel for single
rows); the weight is packed once per (weight, nr), at compile time.  Runs after `alter_layout`,
which has already turned dense layers with constant weights into such matmuls.

A batched left operand x (B..., M, K) times a 2-D constant weight is one GEMM of B*M rows: x is
reshaped to (B*M, K), multiplied, and the (B*M, N) result reshaped back.  Without this, each of
the B batches would run its own M-row product and stream the whole weight again: a decoder
x[35, 1, 650] x W[650, 10000], as `torch.onnx.export` writes an nn.Linear over a sequence, would
read the 26 MB weight 35 times as 35 single-row products instead of once.  When the product's
only reader adds a constant bias along the last axis (the Linear's bias, broadcast over the batch
axes), the bias is added to the rows before the reshape back: add(reshape(y2), b) ==
reshape(add(y2, b)), and the add then fuses into the GEMM's epilogue instead of running as a
second pass over the re-indexed result.

A weight whose (K x nr) panel outgrows half of L2, in a product of many rows, is cut along K
into chunks packed on their own (`reduction_chunks`): partial products over x's columns in place
(`k_offset`) summed in order, the last one with the epilogue.

A product of two run-time operands (attention's scores and context) whose right operand's
columns leave part of a vector gets them padded with zeros to whole vectors and the extra
columns sliced off (`_padded_columns`).

A run-time operand that the product reads transposed (ONNX Gemm's transB on an input, the
Attention op's Q K^T) is transposed by a node of its own first (`_explicit_transposes`): the
transpose runs in register-transposed blocks and the product on the GEMM path.  Read in place,
column by column, B^T's strided loads took Gemm(512x768, 1024x768, transB) 551 ms against ONNX
Runtime's 8.5 ms.
"""
from __future__ import annotations

import numpy as np

from ...ops.nn_dense_packed import pack_columns
from ...ops.schedules.cpu_matmul import panel_width
from ...target import Target
from ..ir import Graph, NameGen, Node, Value


def alter_layout_matmul(graph: Graph, target: Target) -> Graph:
    """The panel width is a multiple of one of the target's vectors."""
    if not target.prefers("packed_weights"):
        return graph
    params = dict(graph.params)
    names = NameGen(v.name for v in _values(graph))
    nodes = []
    packed: dict = {}
    readers = graph.consumers()
    hoisted: set = set()             # bias adds moved before the reshape back
    changed = False
    for n in graph.nodes:
        if id(n) in hoisted:
            continue
        if not _packable(n, params):
            explicit = _explicit_transposes(n, params, names)
            if explicit:
                nodes += explicit[:-1]
                n = explicit[-1]
            padded = _padded_columns(n, params, target, names)
            nodes += padded or [n]
            changed = changed or bool(padded) or bool(explicit)
            continue
        x, w = n.inputs
        y = n.outputs[0]
        arr = params[w].T if n.attrs.get("transpose_b", False) else params[w]
        k, units = arr.shape
        rows = int(np.prod(x.shape[:-1], dtype=np.int64))
        lanes = target.simd_lanes(arr.dtype.name)
        narrow = _dot_rows(k, units, lanes)
        folded = x.ndim > 2 and (rows > x.shape[-2] or narrow)
        nr = 0 if narrow else panel_width(rows if folded else x.shape[-2], units, lanes)
        cuts = [] if narrow else reduction_chunks(k, nr, rows, target)
        key = (w, bool(n.attrs.get("transpose_b", False)), nr)
        wp = packed.get(key)
        if wp is None and not cuts:
            data = np.ascontiguousarray(arr.T) if narrow else pack_columns(np.ascontiguousarray(arr), nr)
            wp = Value(f"{w.name}_rows" if narrow else f"{w.name}_p{nr}", data.shape, data.dtype.name)
            params[wp] = data
            packed[key] = wp
        product = "dense" if narrow else "matmul_packed"
        product_attrs = {} if narrow else {"units": units}
        if folded:
            x2 = Value(names(f"{x.name}_rows"), (rows, k), x.dtype)
            y2 = Value(names(f"{y.name}_rows"), (rows, units), y.dtype)
            nodes.append(Node("reshape", (x,), (x2,), {"shape": x2.shape}, f"{n.name}_rows"))
            if cuts:
                nodes += _chunked(n, x2, y2, arr, cuts, nr, units, params, names, packed, key)
            else:
                nodes.append(Node(product, (x2, wp), (y2,), product_attrs, n.name))
            add = _bias_add(y, readers, params, graph.outputs)
            if add is not None:
                hoisted.add(id(add))
                bias = add.inputs[1] if add.inputs[0] is y else add.inputs[0]
                b1 = Value(names(f"{bias.name}_row"), (units,), bias.dtype)
                params[b1] = np.ascontiguousarray(params[bias].reshape(units))
                z2 = Value(names(f"{add.outputs[0].name}_rows"), (rows, units), y.dtype)
                nodes.append(Node("add", (y2, b1), (z2,), {}, add.name))
                y2, y = z2, add.outputs[0]
            nodes.append(Node("reshape", (y2,), (y,), {"shape": y.shape}, f"{n.name}_unrows"))
        elif cuts:
            nodes += _chunked(n, x, y, arr, cuts, nr, units, params, names, packed, key)
        else:
            nodes.append(Node(product, (x, wp), n.outputs, product_attrs, n.name))
        changed = True
    if not changed:
        return graph
    from .eliminate_dead_code import eliminate_dead_code
    return eliminate_dead_code(graph.with_nodes(nodes, params=params))


# a weight whose (K x nr) panel takes more than this share of the L2 cache is cut along K
PANEL_L2_SHARE = 0.5
# ... when the product has at least this many rows (with fewer a panel serves few row tiles,
# and its reuse from L2 is what the chunks keep)
CHUNK_MIN_ROWS = 64


def reduction_chunks(k: int, nr: int, rows: int, target: Target) -> list[int]:
    """Where to cut the reduction of a (rows x k) x (k x N) product with panels of nr columns,
    [] for none.  The micro-kernel reads a whole (K x nr) panel for every row tile, from L2
    while the panel and the row tile's stream of the left operand fit there; past about half
    the L2 cache the stream evicts the panel, which then comes from L3 for every row tile.  An
    AST's 1214 x 3072 x 768 feed-forward product ran at 66% of the FMA peak whole and at 95% in
    two chunks of 1536 (1024 KiB of L2, 2 FMA units), about as the 768-deep one beside it."""
    panel = 4 * k * nr
    budget = PANEL_L2_SHARE * target.l2_cache_bytes
    if rows < CHUNK_MIN_ROWS or panel <= budget:
        return []
    count = int(-(-panel // budget))
    step = -(-k // count)
    step += -step % 8                      # chunks of whole 32-byte runs of the left operand's rows
    return list(range(step, k, step))


def _chunked(n: Node, x: Value, y: Value, arr, cuts: list[int], nr: int, units: int, params: dict,
             names: NameGen, packed: dict, key: tuple) -> list[Node]:
    """x @ arr as partial products over the chunks of K between `cuts`, each packed on its own
    (once per weight, in `packed` under `key` and the chunk), summed in order into y: the last
    chunk's product, its add of the others' sum and whatever follows fuse into one kernel."""
    nodes: list[Node] = []
    total = None
    bounds = [0, *cuts, arr.shape[0]]
    for i, (k0, k1) in enumerate(zip(bounds, bounds[1:])):
        wp = packed.get(key + (k0, k1))
        if wp is None:
            data = pack_columns(np.ascontiguousarray(arr[k0:k1]), nr)
            wp = packed[key + (k0, k1)] = Value(names(f"{n.inputs[1].name}_p{nr}_k{k0}"), data.shape, data.dtype.name)
            params[wp] = data
        part = Value(names(f"{y.name}_k{k0}"), y.shape, y.dtype)
        nodes.append(Node("matmul_packed", (x, wp), (part,), {"units": units, "k_offset": k0}, names(f"{n.name}_k{k0}")))
        if total is not None:
            summed = y if i == len(bounds) - 2 else Value(names(f"{y.name}_sum{k0}"), y.shape, y.dtype)
            nodes.append(Node("add", (part, total), (summed,), {}, names(f"{n.name}_sum{k0}")))
            part = summed
        total = part
    return nodes


def _explicit_transposes(n: Node, params: dict, names: NameGen) -> list[Node] | None:
    """matmul(a, b, transpose_a/transpose_b) where a transposed operand is a run-time value of
    rank >= 2: transpose nodes swapping its last two axes, then the matmul without that flag (the
    last node of the list).  A constant operand keeps its flag: the weight packing reads it."""
    if n.op != "matmul" or len(n.inputs) != 2:
        return None
    inputs = list(n.inputs)
    attrs = dict(n.attrs)
    nodes: list[Node] = []
    for i, flag in ((0, "transpose_a"), (1, "transpose_b")):
        v = inputs[i]
        if not attrs.get(flag, False) or v is None or v in params or v.ndim < 2:
            continue
        perm = tuple(range(v.ndim - 2)) + (v.ndim - 1, v.ndim - 2)
        t = Value(names(f"{v.name}_T"), tuple(v.shape[p] for p in perm), v.dtype)
        nodes.append(Node("transpose", (v,), (t,), {"perm": perm}, f"{n.name}_{flag[-1]}T"))
        inputs[i] = t
        attrs[flag] = False
    if not nodes:
        return None
    return nodes + [Node(n.op, tuple(inputs), n.outputs, attrs, n.name)]


def _dot_rows(k: int, units: int, lanes: int) -> bool:
    """A product with fewer columns than half a vector, over a reduction of at least two whole
    vectors: each output a dot product of two contiguous rows (`dense` with the weight
    transposed, ops/schedules/cpu.py dense_rows).  Packed panels pad the columns to a vector: a
    scoring head 4x512x1024 @ 1024x1 took 2.46 ms as a GEMM of 16 columns, 0.16 ms as dot products
    (ONNX Runtime 0.93); 12x200x1024 @ 1024x5: 2.98 and 1.16 ms (1.39)."""
    return 2 * units <= lanes and k >= 2 * lanes and k % lanes == 0


# a product of two run-time operands with at least this many rows has its right operand's
# columns padded to whole vectors (`_padded_columns`)
PAD_MIN_ROWS = 8


def _padded_columns(n: Node, params: dict, target: Target, names: NameGen) -> list[Node] | None:
    """matmul(a, b) of two run-time float32 operands whose N columns leave part of a vector:
    b padded with zero columns to whole vectors, the product's extra columns sliced off (the
    slice is the product's epilogue).  The template's tiles then hold whole vectors: attention's
    scores over 7 tokens, 197x197 @ 197x7, took 0.039 ms with 7-wide tiles, 0.018 ms over 8
    columns (ONNX Runtime 0.022); 197x64 @ 64x50: 0.028 -> 0.023 ms.  The copy of b costs
    1/M of the product, so only products of PAD_MIN_ROWS rows or more."""
    if n.op != "matmul" or len(n.inputs) != 2 or n.attrs.get("transpose_a") or n.attrs.get("transpose_b"):
        return None
    a, b = n.inputs
    y = n.outputs[0]
    if a is None or b is None or b in params or a.ndim < 2 or b.ndim < 2 or y.ndim < 2:
        return None
    if a.dtype != "float32" or b.dtype != "float32" or y.dtype != "float32":
        return None
    lanes = target.simd_lanes("float32")
    cols, rows = b.shape[-1], a.shape[-2]
    if lanes < 2 or cols % lanes == 0 or rows < PAD_MIN_ROWS or not all(d > 0 for d in a.shape + b.shape):
        return None
    wide = -(-cols // lanes) * lanes
    bp = Value(names(f"{b.name}_cols{wide}"), b.shape[:-1] + (wide,), b.dtype)
    yp = Value(names(f"{y.name}_cols{wide}"), y.shape[:-1] + (wide,), y.dtype)
    pads = (0,) * b.ndim + (0,) * (b.ndim - 1) + (wide - cols,)
    return [Node("pad", (b,), (bp,), {"pads": pads}, f"{n.name}_cols"),
            Node("matmul", (a, bp), (yp,), dict(n.attrs), n.name),
            Node("slice", (yp,), (y,), {"starts": (0,), "ends": (cols,), "axes": (y.ndim - 1,)}, f"{n.name}_keep")]


def _values(graph: Graph):
    yield from graph.inputs
    yield from graph.params
    for n in graph.nodes:
        yield from (v for v in n.outputs if v is not None)


def _bias_add(y: Value, readers: dict, params: dict, outputs) -> Node | None:
    """The node add(y, b) when it is y's only reader and b a constant that varies along the last
    axis only (shape (N,) or (1, ..., 1, N)), so that it adds the same row to every row of y."""
    users = readers.get(y, [])
    if len(users) != 1 or y in outputs or users[0].op != "add" or len(users[0].inputs) != 2:
        return None
    add = users[0]
    a, b = add.inputs
    bias = b if a is y else a
    if bias is y or bias not in params or bias.dtype != y.dtype:
        return None
    shape = tuple(bias.shape)
    if (len(shape) > y.ndim or len(shape) == 0 or shape[-1] != y.shape[-1]
            or any(d != 1 for d in shape[:-1]) or add.outputs[0].shape != y.shape):
        return None
    return add


def _packable(n: Node, params: dict) -> bool:
    if n.op != "matmul" or len(n.inputs) != 2 or n.inputs[1] not in params:
        return False
    x, w = n.inputs
    return (x is not None and x.ndim >= 2 and w.ndim == 2 and x.dtype == "float32" and w.dtype == "float32"
            and not n.attrs.get("transpose_a", False) and all(d > 0 for d in x.shape + w.shape))
