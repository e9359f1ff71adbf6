"""Keep values in the blocked layout NCHW[b]c between convolutions, so layout transforms remain
only where the layout really changes.

`alter_layout` leaves every packed convolution as conv2d_nchwc -> nchwc_to_nchw: blocked
inside the kernel, NCHW between kernels.  This pass walks the graph in order and keeps, for
each NCHW value, the blocked twin it has (if any).  A node whose input has a blocked twin runs in
the blocked layout when it can:

- conv2d_nchwc reads the twin (attribute data_layout="NCHW<b>c"): its reduction over input
  channels then walks contiguous memory;
- elementwise ops (found by looking at their TE compute: one stage that reads every input at
  the output's index, up to broadcasting) run on the twins when every other operand with all
  the channels is blocked the same way, and the rest have one element, are constants (re-laid
  out here, at compile time: a per-channel bias (C, 1, 1) becomes (1, C/b, 1, 1, b)), or are
  NCHW values of the output's shape (they get an nchw_to_nchwc);
- max_pool2d / avg_pool2d, global_avg_pool / global_max_pool and depthwise conv2d (groups ==
  channels, constant float32 weights) become their NCHW[b]c ops (ops/nn_pool_nchwc.py,
  ops/nn_depthwise_nchwc.py), which keep the block; so do reduce_mean / reduce_max over both
  spatial axes, which are the global pools;
- batch_norm over channels with constant statistics becomes a blocked multiply and add by
  per-channel constants;
- a concat of values whose twins share a block concatenates the twins (over channels: along
  the block axis), a slice of the planes slices the twin's, a resize of the planes resizes the
  twin's, and a depth-to-space in DCR order whose output channels are whole blocks moves the
  twin's blocks, where one of their readers takes the result blocked;
- a group norm as torch.onnx.export writes nn.GroupNorm (reshape to (N, G, -1), an
  instance_norm over each group, reshape back) whose groups are whole blocks reads the twin
  through a reshape: a group's elements are the same set in either memory order, and the
  normalization is elementwise once its statistics are known, so only the reshape back knows
  the order (PoolFormer's GroupNorm(1) layers went NCHW and back four times per block).

A depthwise conv whose NCHW input is a transposed view of channels-last data (SegFormer's and
other vision transformers' Mix-FFN: [B, H*W, C] -> transpose -> reshape to [B, C, H, W]) reads that
data as NCHW[C]c, one block of all the channels, through a reshape: the transpose goes.  A chain
of transposes, reshapes and layout transforms whose result has its source's memory order (the
way back to channels-last after such a conv) becomes one reshape.  Both are decided by replaying
the chain on the source's element numbers, so no case analysis of permutations is needed.

Any other reader of a blocked value, and every graph output, gets the NCHW value back through one
nchwc_to_nchw (made once per value, where first needed; it keeps the value's name and identity).
The block is the one `alter_layout` chose from the channel count and the SIMD width; ops that
keep the channel count keep it.  Finally `cancel_layout_transforms` removes
nchw_to_nchwc(nchwc_to_nchw(x)) with equal blocks (and the reverse pair), whatever made them.

Invariant: each node reads every input in the layout its op expects, and the graph computes the
same values as before (only the summation order of blocked-input convolutions differs).
"""
from __future__ import annotations

import numpy as np

from ...ops import registry
from ...ops.nn_conv_nchwc import blocked_layout, layout_block, pack_weight, to_nchw, to_nchwc
from ...ops.registry import INJECTIVE
from ...target import Target
from ..ir import Graph, Node, Value
from .eliminate_dead_code import eliminate_dead_code
from .rewrite import replace_values

TRANSFORMS = ("nchwc_to_nchw", "nchw_to_nchwc")
WINDOW_POOLS = {"max_pool2d": "max_pool2d_nchwc", "avg_pool2d": "avg_pool2d_nchwc"}
GLOBAL_POOLS = {"global_avg_pool": "global_avg_pool_nchwc", "global_max_pool": "global_max_pool_nchwc"}
SPATIAL_REDUCES = {"reduce_mean": "global_avg_pool_nchwc", "reduce_max": "global_max_pool_nchwc"}
POOL_ATTRS = ("kernel", "strides", "padding", "dilations", "ceil_mode", "count_include_pad")


def alter_layout_propagate(graph: Graph, target: Target) -> Graph:
    """Blocked values stay blocked (the blocks are those alter_layout chose for `target`)."""
    if not target.prefers("NCHWc") or not any(n.op in ("nchwc_to_nchw", "conv2d") for n in graph.nodes):
        return graph
    lanes = target.simd_lanes("float32")
    return fold_memory_order_chains(cancel_layout_transforms(_Propagation(graph, lanes).run()))


def count_layout_transforms(graph: Graph) -> int:
    """The number of nchwc_to_nchw and nchw_to_nchwc nodes in `graph`."""
    return sum(n.op in TRANSFORMS for n in graph.nodes)


def cancel_layout_transforms(graph: Graph) -> Graph:
    """nchw_to_nchwc(nchwc_to_nchw(x)) with x's block, and nchwc_to_nchw(nchw_to_nchwc(x)),
    read x instead (the pair is an identity); the transforms nothing reads any more go."""
    producer = {v: n for n in graph.nodes for v in n.outputs}
    outputs = set(graph.outputs)
    mapping = {}
    for n in graph.nodes:
        if n.op not in TRANSFORMS or n.outputs[0] in outputs:
            continue
        src = producer.get(n.inputs[0])
        if src is None or src.op not in TRANSFORMS or src.op == n.op:
            continue
        x = src.inputs[0]
        if n.op == "nchw_to_nchwc" and x.shape[4] != int(n.attrs.get("block", 16)):
            continue
        mapping[n.outputs[0]] = x
    if not mapping:
        return graph
    return eliminate_dead_code(replace_values(graph, mapping))


class _Propagation:
    """One walk over the graph in order, building the new node list (see the module docstring)."""

    def __init__(self, graph: Graph, lanes: int = 16):
        self.graph, self.lanes = graph, lanes
        self.producer = {v: n for n in graph.nodes for v in n.outputs}
        self.params = dict(graph.params)
        self.nodes: list[Node] = []
        self.blocked: dict[Value, Value] = {}      # NCHW value -> its NCHW[b]c twin
        self.squeezed: dict[Value, Value] = {}     # [N, C, W] value -> [N, C, 1, W] value (a conv1d's)
        self.plain: set = set(graph.inputs) | set(graph.params)   # NCHW values already defined
        self.relaid: dict = {}                      # (constant, block) -> re-laid constant
        self.readers = graph.consumers()            # value -> the nodes that read it
        self.done: set = set()                      # nodes already emitted with an earlier one

    def run(self) -> Graph:
        for n in self.graph.nodes:
            if n in self.done:
                continue
            if n.op == "nchwc_to_nchw":
                self.blocked[n.outputs[0]] = n.inputs[0]      # emitted later, if something needs it
            elif not self._blocked_form(n):
                self._emit(Node(n.op, tuple(self._plain(v) for v in n.inputs), n.outputs, n.attrs, n.name))
        for v in self.graph.outputs:
            self._plain(v)
        return eliminate_dead_code(self.graph.with_nodes(self.nodes, params=self.params))

    # -- values in either layout ---------------------------------------------------------------
    def _emit(self, node: Node) -> None:
        """Append `node`; its outputs are defined in the layout its op writes."""
        self.nodes.append(node)
        self.plain.update(node.outputs)

    def _plain(self, v: Value | None) -> Value | None:
        """`v` in NCHW, converting its blocked twin back the first time it is needed."""
        if v is None or v in self.plain:
            return v
        if v in self.squeezed:
            self.nodes.append(Node("reshape", (self._plain(self.squeezed[v]),), (v,), {"shape": v.shape}, v.name + "_1d"))
        elif v in self.blocked:
            self.nodes.append(Node("nchwc_to_nchw", (self.blocked[v],), (v,), {}, v.name + "_nchw"))
        else:
            return v
        self.plain.add(v)
        return v

    def _twin(self, v: Value | None, block: int | None = None) -> Value | None:
        """The blocked twin of `v` (with `block`, when given), or None."""
        t = self.blocked.get(v) if v is not None else None
        return t if t is not None and (block is None or t.shape[4] == block) else None

    def _to_blocked(self, v: Value, block: int) -> Value:
        """`v` (an NCHW value without a twin of this block) converted by an nchw_to_nchwc."""
        n, c, h, w = v.shape
        t = Value(v.name + f"_nchw{block}c", (n, c // block, h, w, block), v.dtype)
        self.nodes.append(Node("nchw_to_nchwc", (self._plain(v),), (t,), {"block": block}, t.name))
        self.blocked.setdefault(v, t)
        return t

    def _new_twin(self, v: Value, block: int) -> Value:
        t = self.blocked[v] = _blocked(v, block)
        return t

    def _relaid(self, p: Value, out_shape: tuple, block: int) -> Value | None:
        """The constant `p` (broadcast against NCHW `out_shape`) re-laid out for NCHW[b]c, or None."""
        key = (p, block)
        if key in self.relaid:
            return self.relaid[key]
        arr = self.params[p]
        if arr.ndim > 4:
            return None
        a4 = arr.reshape((1,) * (4 - arr.ndim) + arr.shape)
        n, c, h, w = a4.shape
        if c == out_shape[1]:
            blocked = a4.reshape(n, c // block, block, h, w).transpose(0, 1, 3, 4, 2)
        elif c == 1:
            blocked = a4.reshape(n, 1, h, w, 1)
        else:
            return None
        blocked = np.ascontiguousarray(blocked)
        v = Value(p.name + f"_nchw{block}c", blocked.shape, p.dtype)
        self.params[v] = blocked
        self.relaid[key] = v
        return v

    # -- the blocked forms of ops --------------------------------------------------------------
    def _blocked_form(self, n: Node) -> bool:
        """Emit `n` in the blocked layout when its inputs allow; False when it stays NCHW."""
        if n.op == "conv2d_nchwc":
            return self._conv(n)
        if n.op in WINDOW_POOLS or n.op in GLOBAL_POOLS:
            return self._pool(n)
        if n.op in SPATIAL_REDUCES:
            return self._spatial_reduce(n)
        if n.op == "conv2d":
            return self._depthwise(n)
        if n.op == "batch_norm":
            return self._batch_norm(n)
        # (each of these may still be elementwise where its own form does not apply: a slice
        # that cuts padded filters off the channels)
        if n.op == "concat" and self._concat(n):
            return True
        if n.op == "resize" and self._resize(n):
            return True
        if n.op == "depth_to_space" and self._depth_to_space(n):
            return True
        if n.op == "slice" and self._slice(n):
            return True
        if n.op in ("squeeze", "reshape") and self._height_squeeze(n):
            return True
        if n.op == "reshape" and self._group_norm(n):
            return True
        if n.op in ("unsqueeze", "reshape") and self._height_unsqueeze(n):
            return True
        if n.outputs and n.outputs[0].ndim == 3 and any(v in self.squeezed for v in n.inputs):
            return self._elementwise_1d(n)
        return self._elementwise(n)

    def _height_squeeze(self, n: Node) -> bool:
        """[N, C, 1, W] -> [N, C, W] of a value with a blocked twin (a conv1d run as a conv2d of
        height 1): nothing is emitted until an op needs the 3-D value, so that elementwise ops
        after it (the conv1d's bias and activation) run on the twin."""
        x, y = n.inputs[0], n.outputs[0]
        if self._twin(x) is None or x.shape[2] != 1 or y.shape != (x.shape[0], x.shape[1], x.shape[3]):
            return False
        self.squeezed[y] = x
        return True

    def _group_norm(self, n: Node) -> bool:
        """reshape(x, (N, G, L)) -> instance_norm -> reshape(x.shape) on a value with a blocked
        twin whose groups are whole blocks: the same three nodes on the twin (a group's elements
        in the twin's order, which the normalization does not see), the result the twin of the
        last reshape's output."""
        x, r = n.inputs[0], n.outputs[0]
        t = self._twin(x)
        if t is None or x.ndim != 4 or r.ndim != 3 or r.shape[0] != x.shape[0] or not r.shape[1]:
            return False
        groups, block = r.shape[1], t.shape[4]
        if x.shape[1] % groups or (x.shape[1] // groups) % block:
            return False
        outputs = set(self.graph.outputs)
        (norm, *more) = self.readers.get(r, [None])
        if more or norm is None or norm.op != "instance_norm" or norm.inputs[0] is not r or r in outputs:
            return False
        # emitted here, so the scale and shift must be defined by now (constants, as exported)
        if any(v is not None and v not in self.params and v not in self.plain for v in norm.inputs[1:]):
            return False
        z = norm.outputs[0]
        (back, *more) = self.readers.get(z, [None])
        if more or back is None or back.op != "reshape" or back.outputs[0].shape != x.shape or z in outputs:
            return False
        rt = Value(r.name + f"_nchw{block}c", r.shape, r.dtype)
        zt = Value(z.name + f"_nchw{block}c", z.shape, z.dtype)
        self._emit(Node("reshape", (t,), (rt,), {"shape": r.shape}, n.name))
        self._emit(Node("instance_norm", (rt, *norm.inputs[1:]), (zt,), norm.attrs, norm.name))
        yt = self._new_twin(back.outputs[0], block)
        self._emit(Node("reshape", (zt,), (yt,), {"shape": yt.shape}, back.name))
        self.done.update((norm, back))
        return True

    def _height_unsqueeze(self, n: Node) -> bool:
        """[N, C, W] -> [N, C, 1, W] of a squeezed value (the input of the next conv1d of a stack,
        as wav2vec 2.0 and HuBERT stack seven): the value it was squeezed from, so that the next
        conv reads its blocked twin.  Read in NCHW instead, the input's 512 channel rows were 512
        streams 6 KiB apart, and a 512 -> 512 conv over 1599 columns ran at half the speed.  Equal
        shapes mean equal memory orders: only unit axes differ."""
        x4 = self.squeezed.get(n.inputs[0])
        t = self._twin(x4)
        if x4 is None or t is None or n.outputs[0].shape != x4.shape:
            return False
        self.blocked[n.outputs[0]] = t
        return True

    def _elementwise_1d(self, n: Node) -> bool:
        """An elementwise op on [N, C, W] values of which one is a squeezed [N, C, 1, W] value:
        the op on [N, C, 1, W] values, blocked when `_elementwise` can."""
        y = n.outputs[0]
        inputs: list[Value | None] = []
        for v in n.inputs:
            if v is None:
                inputs.append(None)
            elif v in self.squeezed:
                inputs.append(self.squeezed[v])
            elif v in self.params and v.ndim <= 3:
                arr = self.params[v].reshape((1,) * (3 - v.ndim) + v.shape)
                arr = np.ascontiguousarray(arr[:, :, None, :])
                v4 = Value(v.name + "_h1", arr.shape, v.dtype)
                self.params[v4] = arr
                inputs.append(v4)
            elif v.size == 1:
                inputs.append(v)
            elif v.shape == y.shape and v.dtype == y.dtype and self._feeds_conv(y):
                # a plain operand of the output's shape (a TCN block's residual input) where a
                # conv reads the result: viewed as [N, C, 1, W], which _elementwise converts to
                # blocks once the op goes blocked (a reshape nothing reads is dropped with the
                # dead code); before a graph output, converting it would cost a pass more
                v4 = Value(v.name + "_h1", (v.shape[0], v.shape[1], 1, v.shape[2]), v.dtype)
                self._emit(Node("reshape", (self._plain(v),), (v4,), {"shape": v4.shape}, v4.name))
                inputs.append(v4)
            else:
                return False
        y4 = Value(y.name + "_h1", (y.shape[0], y.shape[1], 1, y.shape[2]), y.dtype)
        if not self._elementwise(Node(n.op, tuple(inputs), (y4,), n.attrs, n.name)):
            return False
        self.squeezed[y] = y4
        return True

    def _concat(self, n: Node) -> bool:
        """A concat over channels of values whose twins have one block (Inception's branches,
        DenseNet's growth, a U-Net's skip and up-sampled halves) concatenates the twins along the
        block axis: the NCHW[b]c layout of the concatenation is the blocks of its inputs in
        order.  Over rows or columns (trim_conv_taps' bands), along the same axis of the twins.
        Only where a reader of the result takes the twin (`_reads_twin`); a concat only NCHW
        readers read (ShuffleNet's channel shuffle) stays in NCHW, its inputs' transforms fused
        into their producers."""
        y = n.outputs[0]
        if not blocked_concat(n):
            return False
        twins = [t for t in map(self._twin, n.inputs) if t is not None]
        if len(twins) != len(n.inputs) or len({t.shape[4] for t in twins}) != 1:
            return False
        if not any(self._reads_twin(r, y) for r in self.readers.get(y, ())):
            return False
        self._emit(Node("concat", tuple(twins), (self._new_twin(y, twins[0].shape[4]),),
                        {"axis": int(n.attrs.get("axis", 0)) % 4}, n.name))
        return True

    def _slice(self, n: Node) -> bool:
        """A slice of the planes (trim_conv_taps' regions of a banded atrous conv) slices the twin's
        planes, where a reader takes the result blocked."""
        x, y = n.inputs[0], n.outputs[0]
        t = self._twin(x)
        if t is None or len(n.inputs) != 1 or x.ndim != 4 or not plane_slice(n):
            return False
        if not any(self._reads_twin(r, y) for r in self.readers.get(y, ())):
            return False
        self._emit(Node("slice", (t,), (self._new_twin(y, t.shape[4]),), n.attrs, n.name))
        return True

    def _resize(self, n: Node) -> bool:
        """A resize of the planes only (the up-sampling of a U-Net, a YOLO neck, an FPN) on a value
        with a twin resizes the twin's planes, where a reader takes the result blocked: its
        vector lanes are then channels, and every tap a contiguous load of one block instead of
        a lane-by-lane gather of a plane's positions."""
        x, y = n.inputs[0], n.outputs[0]
        t = self._twin(x)
        if t is None or len(n.inputs) != 1 or not plane_resize(n) or not y.dtype.startswith("float"):
            return False
        if not any(self._reads_twin(r, y) for r in self.readers.get(y, ())):
            return False
        sizes, scales = n.attrs["sizes"], n.attrs["scales"]
        block = t.shape[4]
        attrs = dict(n.attrs, sizes=(sizes[0], sizes[1] // block, sizes[2], sizes[3], block),
                     scales=(1.0, 1.0, float(scales[2]), float(scales[3]), 1.0))
        self._emit(Node("resize", (t,), (self._new_twin(y, block),), attrs, n.name))
        return True

    def _depth_to_space(self, n: Node) -> bool:
        """A depth-to-space in DCR order (conv_transpose_as_conv's U-Net up-sampling) whose output
        channels are whole blocks of its input's twin moves whole blocks: cell offset k's output
        channel block cb is the twin's block k * C/b + cb (ops/transform_space.py), so it reads
        the twin, where a reader takes the result blocked.  In NCHW the conv's output went back
        from blocks, then every output lane was gathered."""
        x, y = n.inputs[0], n.outputs[0]
        t = self._twin(x)
        if t is None or not dcr_depth_to_space(n) or y.shape[1] % t.shape[4]:
            return False
        if not any(self._reads_twin(r, y) for r in self.readers.get(y, ())):
            return False
        self._emit(Node("depth_to_space", (t,), (self._new_twin(y, t.shape[4]),), n.attrs, n.name))
        return True

    def _reads_twin(self, r: Node, v: Value) -> bool:
        """Whether `r`, a reader of `v`, will read `v`'s blocked twin: a blocked conv, a pool, a
        spatial reduction, a depthwise conv, a batch norm, another such concat, or an
        elementwise op on `v`'s shape (the guess of alter_layout's `_LayoutGuess`)."""
        if r.op == "conv2d_nchwc":
            return r.inputs[0] is v and not layout_block(r.attrs.get("data_layout", "NCHW"))
        if r.op in WINDOW_POOLS or r.op in GLOBAL_POOLS or r.op in SPATIAL_REDUCES or r.op in ("batch_norm", "concat",
                                                                                              "resize", "slice"):
            return True
        if r.op == "conv2d":
            return int(r.attrs.get("groups", 1)) == v.shape[1] > 1
        return len(r.outputs) == 1 and r.outputs[0].shape == v.shape and is_elementwise(r)

    def _feeds_conv(self, v: Value, depth: int = 4) -> bool:
        """Whether a blocked conv reads `v`, directly, through the unsqueeze of a conv1d, or after
        at most `depth` elementwise ops of its shape."""
        for r in self.readers.get(v, ()):
            if r.op == "conv2d_nchwc" or (r.op in ("unsqueeze", "reshape") and any(
                    c.op == "conv2d_nchwc" for c in self.readers.get(r.outputs[0], ()))):
                return True
            if depth and len(r.outputs) == 1 and r.outputs[0].shape == v.shape and is_elementwise(r) \
                    and self._feeds_conv(r.outputs[0], depth - 1):
                return True
        return False

    def _conv(self, n: Node) -> bool:
        x = n.inputs[0]
        t = self._twin(x)
        if t is None or layout_block(n.attrs.get("data_layout", "NCHW")):
            return False
        if (x.shape[1] // int(n.attrs.get("groups", 1))) % t.shape[4]:
            return False        # an input block would straddle two groups
        attrs = dict(n.attrs, data_layout=blocked_layout(t.shape[4]))
        self._emit(Node(n.op, (t, *n.inputs[1:]), n.outputs, attrs, n.name))
        return True

    def _pool(self, n: Node) -> bool:
        x, y = n.inputs[0], n.outputs[0]
        t = self._twin(x)
        if t is None or len(n.outputs) != 1 or y.ndim != 4 or not y.dtype.startswith("float"):
            return False
        op = WINDOW_POOLS.get(n.op) or GLOBAL_POOLS[n.op]
        attrs = {k: v for k, v in n.attrs.items() if k in POOL_ATTRS}
        self._emit(Node(op, (t,), (self._new_twin(y, t.shape[4]),), attrs, n.name))
        return True

    def _spatial_reduce(self, n: Node) -> bool:
        """A mean or max over both spatial axes (what `torch.mean(x, (2, 3))` exports) is the
        global pool: it reads the blocked twin, and the pooled values convert back (a few
        elements) instead of the whole input."""
        x, y = n.inputs[0], n.outputs[0]
        t = self._twin(x)
        if t is None or len(n.inputs) != 1 or x.ndim != 4 or not y.dtype.startswith("float"):
            return False
        if sorted(a % 4 for a in n.attrs.get("axes") or ()) != [2, 3]:
            return False
        pooled = y if n.attrs.get("keepdims", 1) else Value(y.name + "_pooled", (*y.shape, 1, 1), y.dtype)
        self._emit(Node(SPATIAL_REDUCES[n.op], (t,), (self._new_twin(pooled, t.shape[4]),), {}, n.name))
        if pooled is not y:
            self._emit(Node("reshape", (self._plain(pooled),), (y,), {"shape": y.shape}, n.name + "_flat"))
        return True

    def _depthwise(self, n: Node) -> bool:
        if len(n.inputs) != 2 or n.inputs[1] not in self.params:
            return False
        x, w = n.inputs
        attrs = n.attrs
        if x.dtype != "float32" or w.dtype != "float32" or w.ndim != 4 or x.ndim != 4:
            return False
        c = x.shape[1]
        t = self._twin(x)
        if t is None and attrs.get("groups", 1) == c and c % self.lanes == 0:
            t = self._channels_last_twin(x)
        if t is None:
            return False
        if attrs.get("groups", 1) != c or w.shape[:2] != (c, 1) or any(p < 0 for p in attrs.get("padding") or (0,)):
            return False
        block = t.shape[4]
        wp = pack_weight(self.params[w], block)
        wv = Value(w.name + f"_dw{block}c", wp.shape, w.dtype)
        self.params[wv] = wp
        kept = {k: attrs[k] for k in ("strides", "padding", "dilations") if attrs.get(k) is not None}
        self._emit(Node("depthwise_conv2d_nchwc", (t, wv), (self._new_twin(n.outputs[0], block),), kept, n.name))
        return True

    def _channels_last_twin(self, x: Value) -> Value | None:
        """NCHW `x` as NCHW[C]c (N, 1, H, W, C) by a reshape of the channels-last value it is
        a transposed view of, or None when it is no such view."""
        chain: list[Node] = []
        v = x
        while len(chain) < MAX_CHAIN and v in self.producer and self.producer[v].op in ("transpose", "reshape"):
            chain.insert(0, self.producer[v])
            v = chain[0].inputs[0]
            if chain[0].op == "transpose" and same_memory_order(v, chain, lambda a: to_nchwc(a, x.shape[1])):
                n, c, h, w = x.shape
                twin = Value(x.name + f"_nchw{c}c", (n, 1, h, w, c), x.dtype)
                self.nodes.append(Node("reshape", (self._plain(v),), (twin,), {"shape": twin.shape}, twin.name))
                self.blocked[x] = twin
                return twin
        return None

    def _batch_norm(self, n: Node) -> bool:
        """y = x * s + (beta - mean * s), s = gamma / sqrt(var + eps), per channel, blocked."""
        x, *stats = n.inputs
        t = self._twin(x)
        if t is None or len(n.outputs) != 1 or n.attrs.get("axis", 1) != 1 or len(stats) != 4 \
                or not all(v in self.params for v in stats):
            return False
        gamma, beta, mean, var = (self.params[v].astype(np.float64) for v in stats)
        scale = gamma / np.sqrt(var + float(n.attrs.get("epsilon", 1e-5)))
        shift = beta - mean * scale
        block, y = t.shape[4], n.outputs[0]
        consts = []
        for name, arr in (("scale", scale), ("shift", shift)):
            blocked = np.ascontiguousarray(arr.astype(x.dtype).reshape(-1, 1, 1, block))
            v = Value(f"{n.name or y.name}_{name}_nchw{block}c", blocked.shape, x.dtype)
            self.params[v] = blocked
            consts.append(v)
        scaled = Value(y.name + "_scaled_nchwc", t.shape, x.dtype)
        self._emit(Node("mul", (t, consts[0]), (scaled,), {}, n.name + "_scale"))
        self._emit(Node("add", (scaled, consts[1]), (self._new_twin(y, block),), {}, n.name))
        return True

    def _elementwise(self, n: Node) -> bool:
        if len(n.outputs) != 1 or n.outputs[0].ndim != 4 or not n.inputs:
            return False
        y = n.outputs[0]
        # an operand with a twin has all of y's channels (its other axes broadcast in 5-D
        # exactly as in 4-D: N, H and W stay axes of their own)
        found = [self._twin(v) for v in n.inputs if v is not None and v.ndim == 4 and v.shape[1] == y.shape[1]]
        twins = [t for t in found if t is not None]
        if not twins or not is_elementwise(n):
            return False
        block = twins[0].shape[4]
        inputs: list[Value | None] = []
        for v in n.inputs:
            if v is None:                               # an absent optional input stays absent
                inputs.append(None)
            elif v.ndim == 4 and v.shape[1] == y.shape[1] and self._twin(v, block) is not None:
                inputs.append(self._twin(v, block))
            elif v.size == 1 and v.ndim <= 5:           # broadcasts against any layout
                inputs.append(self._plain(v))
            elif v in self.params:
                inputs.append(self._relaid(v, y.shape, block))
                if inputs[-1] is None:
                    return False
            elif v.shape == y.shape and self._twin(v) is None:
                inputs.append(None)                     # converted below, once the op goes blocked
            else:
                return False
        # an op whose attributes name axes (a pad's or a slice's lists, a transpose's order) can
        # be elementwise at rank 4 and mean something else at rank 5: it must be elementwise there
        blocked = [t if t is not None or v is None else _blocked(v, block) for v, t in zip(n.inputs, inputs)]
        if not is_elementwise(Node(n.op, tuple(blocked), (_blocked(y, block),), n.attrs, n.name)):
            return False
        inputs = [self._to_blocked(v, block) if t is None and v is not None else t for v, t in zip(n.inputs, inputs)]
        self._emit(Node(n.op, tuple(inputs), (self._new_twin(y, block),), n.attrs, n.name))
        return True


MAX_CHAIN = 6                 # transposes, reshapes and layout transforms followed back
MAX_REPLAYED = 1 << 22        # elements of a chain's source replayed to compare memory orders
LAYOUT_OPS = ("transpose", "reshape", "nchwc_to_nchw", "nchw_to_nchwc")


def _replay(n: Node, a: np.ndarray) -> np.ndarray:
    if n.op == "transpose":
        return a.transpose(n.attrs.get("perm"))
    if n.op == "reshape":
        return a.reshape(n.outputs[0].shape)
    if n.op == "nchwc_to_nchw":
        return to_nchw(a)
    return to_nchwc(a, int(n.attrs.get("block", 16)))


def same_memory_order(source: Value, chain: list, last=None) -> bool:
    """Whether the layout ops `chain` (in order, the first reading `source`), then `last`
    (a NumPy function, if given), leave `source`'s elements in their order in memory: then the
    result is a reshape of `source`."""
    if source.size > MAX_REPLAYED:
        return False
    a = np.arange(source.size, dtype=np.int32).reshape(source.shape)
    for n in chain:
        a = _replay(n, a)
    if last is not None:
        a = last(a)
    return bool(np.array_equal(a.ravel(), np.arange(a.size, dtype=np.int32)))


def fold_memory_order_chains(graph: Graph) -> Graph:
    """A transpose or layout transform that ends a chain of layout ops whose result keeps its
    source's memory order becomes a reshape of the source (the chain's other nodes go when
    nothing else reads them)."""
    producer = {v: n for n in graph.nodes for v in n.outputs}
    nodes, changed = [], False
    for n in graph.nodes:
        if n.op in LAYOUT_OPS and n.op != "reshape":
            chain, v, source = [n], n.inputs[0], None
            while True:
                if same_memory_order(v, chain):
                    source = v
                p = producer.get(v)
                if p is None or p.op not in LAYOUT_OPS or len(chain) >= MAX_CHAIN:
                    break
                chain.insert(0, p)
                v = p.inputs[0]
            if source is not None:
                y = n.outputs[0]
                n = Node("reshape", (source,), (y,), {"shape": y.shape}, n.name)
                changed = True
        nodes.append(n)
    return eliminate_dead_code(graph.with_nodes(nodes)) if changed else graph


def blocked_concat(n: Node) -> bool:
    """Whether `n` is a concat of 4-D values over channels, rows or columns (not the batch), which
    runs on blocked twins where all its inputs have them of one block."""
    return n.op == "concat" and n.outputs[0].ndim == 4 and int(n.attrs.get("axis", 0)) % 4 != 0 \
        and all(v is not None for v in n.inputs)


def dcr_depth_to_space(n: Node) -> bool:
    """Whether `n` is a depth-to-space of a 4-D value in DCR order, which moves whole blocks of a
    twin whose blocks its output channels fill."""
    return n.op == "depth_to_space" and n.inputs[0].ndim == 4 and n.attrs.get("mode", "DCR") == "DCR"


def plane_resize(n: Node) -> bool:
    """Whether `n` is a resize of a 4-D value's planes only (no crop-and-resize region)."""
    x = n.inputs[0] if n.inputs else None
    if n.op != "resize" or x is None or x.ndim != 4:
        return False
    sizes, scales = tuple(n.attrs.get("sizes") or ()), tuple(n.attrs.get("scales") or ())
    return len(sizes) == 4 and len(scales) == 4 and sizes[:2] == x.shape[:2] and all(s == 1.0 for s in scales[:2]) \
        and n.attrs.get("roi") is None and n.attrs.get("coordinate_transformation_mode") != "tf_crop_and_resize"


def plane_slice(n: Node) -> bool:
    """Whether `n` is a slice of a 4-D value's rows or columns only, with steps of 1."""
    x = n.inputs[0]
    if n.op != "slice" or x is None or x.ndim != 4:
        return False
    starts = tuple(n.attrs.get("starts") or ())
    axes = tuple(n.attrs.get("axes") or range(len(starts)))
    steps = tuple(n.attrs.get("steps") or (1,) * len(starts))
    return all(a % 4 in (2, 3) for a in axes) and all(s == 1 for s in steps)


def _blocked(v: Value, block: int) -> Value:
    """A value for NCHW `v` in NCHW[block]c."""
    n, c, h, w = v.shape
    return Value(v.name + "_nchwc", (n, c // block, h, w, block), v.dtype)


def is_elementwise(n: Node) -> bool:
    """Whether `n`'s op reads every input only at the output's index (up to broadcasting), in a
    single stage: then it computes the same values in any layout that all operands share.  (A
    slice from index 0 or an expand is such an op too, though its output's shape is not its
    input's: a caller that moves the op to another shape checks the shapes.)"""
    from ... import te
    from ...arith import simplify, structural_equal
    from ...ir.expr import IntImm, TensorLoad
    from ...ir.functor import post_order_visit
    from ...te.tensor import ComputeOp, PlaceholderOp

    opdef = registry.get(n.op)
    if opdef.pattern != INJECTIVE or opdef.is_opaque_kernel:
        return False
    y = n.outputs[0]
    placeholders = [te.placeholder(v.shape, v.dtype, name=f"in{k}") if v is not None else None
                    for k, v in enumerate(n.inputs)]
    try:
        outs = opdef.build_compute(placeholders, n.attrs)
    except Exception:      # an op that cannot build here is simply not treated as elementwise
        return False
    if len(outs) != 1 or not isinstance(outs[0].op, ComputeOp) or outs[0].op.reduce_axis \
            or tuple(int(d.value) for d in outs[0].shape) != y.shape:
        return False
    op = outs[0].op
    if any(not isinstance(t.op, PlaceholderOp) for t in op.input_tensors()):
        return False
    axes = [iv.var for iv in op.axis]
    ok = []

    def at(index, want) -> bool:
        if isinstance(want, int):
            index = simplify(index)
            return isinstance(index, IntImm) and index.value == want
        return index is want or structural_equal(simplify(index), want)

    def check(node) -> None:
        if isinstance(node, TensorLoad):
            shape = tuple(int(d.value) for d in node.tensor.shape)
            offset = len(y.shape) - len(shape)
            if offset < 0:          # an input of higher rank than the output (a squeeze)
                ok.append(False)
                return
            want = [0 if d == 1 and y.shape[offset + k] != 1 else axes[offset + k] for k, d in enumerate(shape)]
            ok.append(len(node.indices) == len(want) and all(at(i, w) for i, w in zip(node.indices, want)))

    for body in op.body:
        post_order_visit(body, check)
    return bool(ok) and all(ok)
