"""matmul_integer(a, B) with a uint8 2-D `a`, a constant int8 B and B's zero point 0 becomes
matmul_integer_vnni(a, B packed for the int8 dot-product unit, za * column sums of B) on a CPU
that has such a unit (AVX-512 VNNI, AVX-VNNI, AMX).

    sum_k (a[i, k] - za) * B[k, j] = sum_k a[i, k] B[k, j] - za * sum_k B[k, j]

so the unit's u8 x s8 products give the result and the correction is a constant per column,
computed here once.  A conv_integer of the same kind (2-D, one group, constant int8 weight with
zero point 0) becomes the same product on im2col(x) (its windows as rows, padded with x's zero
point).  The packing (ops/schedules/cpu_matmul_int8.pack_b_vnni) is the unit's operand layout.
A matmul_integer of two activations (attention's Q K^T and P V: uint8 a, 8-bit b of the same
batch axes, per-tensor zero points) becomes pack_act_vnni(b) and matmul_act_vnni: b packed at
run time, moved to int8, and the zero points applied as row and column sums
(ops/quant_act_vnni.py).  Runs only for a native CPU target (the units are the host's); other
products (signed activations, per-row or nonzero weight zero points) stay as they are.

Rows layout.  A conv's product comes out as rows: (N * OH * OW, M), one pixel per row, channels
along it (NHWC order).  Instead of transposing it back to (N, M, OH, OW) after every conv, the
pass keeps the NCHW value's data in that form (its "rows twin") as far as the graph allows:

  - an elementwise op (the bias add, requantize, relu as maximum, the dequantize / add /
    quantize of a residual connection) whose non-constant inputs all have twins runs on the
    twins, its per-channel constants reshaped to (C,) and its axis moved to the rows' channel
    axis 1; so the conv's epilogue runs on the product's register tiles;
  - the next int8 conv reads the twin: a 1x1 stride-1 conv multiplies it as it is, any other
    window takes im2col over the rows image (columns in (kh, kw, c) order, the weight's
    columns permuted to match);
  - a depthwise conv (one filter per channel) runs on the twin as depthwise_integer_rows
    (ops/quant_depthwise_rows.py), its result the output's twin; so does a max pool between a
    dequantize and a quantize of the same parameters, as max_pool_rows on the 8-bit twin
    (ops/quant_pool_rows.py);
  - the other operand of a rows op (a residual connection's) gets a twin too: the narrow value
    it was dequantized from, transposed to rows, then the dequantize on the rows;
  - any other consumer (average pooling, a graph output) gets the NCHW value back, made once
    just before its first such consumer: the narrow value it was dequantized from, reshaped
    and transposed from its twin, then the dequantize in NCHW.

Every value is computed exactly as before, only stored in another order.
"""
from __future__ import annotations

import numpy as np

from ...ir import dtype as dt
from ...ops import x86_intrin as X
from ...ops.quant_act_vnni import act_packed_shape
from ...ops.quant_depthwise_rows import MAX_TAPS
from ...ops.schedules.cpu_matmul_int8 import k_align, pack_b_vnni
from ...target import Target
from ..ir import Graph, Node, Value


def runs_on_int8_unit(target: Target) -> bool:
    """Whether this pass puts int8 products on a dot-product unit for `target` (a native CPU
    target on a CPU that has one)."""
    return target.template_suffix == "cpu" and target.mcpu == "native" and X.int8_unit() is not None


def alter_layout_int8(graph: Graph, target: Target) -> Graph:
    unit = X.int8_unit()
    if unit is None or not runs_on_int8_unit(target):
        return graph
    lanes = X.LANES[unit]
    align = k_align(unit)
    params = dict(graph.params)
    rows = _Rows(graph.producers(), params)
    users = graph.consumers()
    nodes, changed = [], False
    skip: set = set()
    for n in graph.nodes:
        if n in skip:
            continue
        rewritten = _rewrite(n, params, (lanes, align), rows)
        if rewritten is None and n.op == "max_pool2d":
            rewritten = _rewrite_max_pool(n, params, rows, users, skip)
        if rewritten is None or n.op == "matmul_integer":
            for v in n.inputs:
                nodes.extend(rows.materialize(v))
        if rewritten is None:
            nodes.append(n)
        else:
            nodes.extend(rewritten)
            changed = True
    for v in graph.outputs:
        nodes.extend(rows.materialize(v))
    if not changed:
        return graph
    from .eliminate_dead_code import eliminate_dead_code
    return eliminate_dead_code(graph.with_nodes(nodes, params=params))


# elementwise ops that run on rows twins as they are (per-channel parameters along axis 1)
ROWWISE = ("add", "sub", "mul", "maximum", "minimum", "relu", "requantize", "quantize_linear",
           "dequantize_linear")
_AXIS_OPS = ("requantize", "quantize_linear", "dequantize_linear")


class _Rows:
    """NCHW values whose data the rewritten graph holds as rows (N * H * W, C), and which of
    them it has made again in NCHW."""

    def __init__(self, producer: dict, params: dict):
        self.twin: dict = {}
        self.made: set = set()
        self.producer, self.params = producer, params     # of the graph as it was

    def add(self, v: Value, rows: Value) -> None:
        self.twin[v] = rows

    def _narrow_source(self, v: Value) -> tuple:
        """(the original node making v, its one non-constant input u) when u has v's shape and
        fewer bytes per element (v = dequantize(u): moving u between layouts is cheaper)."""
        n = self.producer.get(v)
        if n is None or n.op not in ROWWISE:
            return None, None
        free = [u for u in n.inputs if u is not None and u not in self.params]
        if len(free) != 1 or tuple(free[0].shape) != tuple(v.shape) or \
                dt.itemsize(free[0].dtype) >= dt.itemsize(v.dtype):
            return None, None
        return n, free[0]

    def materialize(self, v: Value | None) -> list:
        """The nodes that make `v` from its twin, the first time `v` is needed in NCHW ([]
        otherwise): the node that made v from a narrower value, on that value in NCHW, or the
        twin reshaped to NHWC and transposed to NCHW."""
        if v is None or v not in self.twin or v in self.made:
            return []
        self.made.add(v)
        node, narrow = self._narrow_source(v)
        if node is not None and narrow in self.twin:
            return self.materialize(narrow) + [node]
        n, c, h, w = v.shape
        nhwc = Value(f"{v.name}_nhwc", (n, h, w, c), v.dtype)
        return [Node("reshape", (self.twin[v],), (nhwc,), {"shape": (n, h, w, c)}, f"{v.name}_to_nhwc"),
                Node("transpose", (nhwc,), (v,), {"perm": (0, 3, 1, 2)}, f"{v.name}_to_nchw")]


    def rowify(self, v: Value) -> list:
        """Nodes giving the NCHW value `v` a rows twin: the node that made it from a narrower
        value, run on that value's twin, or v transposed to NHWC and reshaped to rows."""
        if v in self.twin:
            return []
        self.made.add(v)                   # v stays computed in NCHW as well
        node, narrow = self._narrow_source(v)
        if node is not None:
            pre = self.rowify(narrow)
            again = _rowwise(node, self.params, self)
            if again is not None:
                return pre + again
        n, c, h, w = v.shape
        nhwc = Value(f"{v.name}_as_nhwc", (n, h, w, c), v.dtype)
        r = Value(f"{v.name}_as_rows", (n * h * w, c), v.dtype)
        self.add(v, r)
        return [Node("transpose", (v,), (nhwc,), {"perm": (0, 2, 3, 1)}, f"{v.name}_to_nhwc"),
                Node("reshape", (nhwc,), (r,), {"shape": (n * h * w, c)}, f"{v.name}_to_rows")]


def rows_shape(shape: tuple) -> tuple:
    """(N * H * W, C) of an NCHW shape."""
    n, c, h, w = shape
    return (n * h * w, c)


def _rewrite(n: Node, params: dict, packing: tuple, rows: _Rows) -> list | None:
    if n.op == "conv_integer":
        return _rewrite_conv(n, params, packing, rows)
    if n.op in ROWWISE:
        return _rowwise(n, params, rows)
    if n.op != "matmul_integer":
        return None
    a, b, za, zb = (list(n.inputs) + [None] * 4)[:4]
    if b not in params:
        return _activation_product(n, params, packing[0])
    if a.dtype != "uint8" or a.ndim < 2 or b.dtype != "int8" or b.ndim != 2:
        return None
    if zb is not None and (zb not in params or np.any(params[zb] != 0)):
        return None
    if za is not None and (za not in params or params[za].size != 1):
        return None
    za_value = int(params[za].reshape(())) if za is not None else 0
    out = n.outputs[0]
    if a.ndim == 2:
        return [_packed_product(a, params[b], za_value, out, params, packing, n.name)]
    count = int(np.prod(a.shape[:-1]))      # batched rows: one product over all of them
    flat = Value(f"{n.name}_a_rows", (count, a.shape[-1]), a.dtype)
    prod = Value(f"{n.name}_rows", (count, out.shape[-1]), "int32")
    return [Node("reshape", (a,), (flat,), {"shape": flat.shape}, f"{n.name}_flatten"),
            _packed_product(flat, params[b], za_value, prod, params, packing, n.name),
            Node("reshape", (prod,), (out,), {"shape": tuple(out.shape)}, f"{n.name}_unflatten")]


def packs_at_run_time(a: Value, b: Value) -> bool:
    """Whether a product of activations a x b runs on the unit: uint8 a, 8-bit b, both of
    rank 2 or more with the same batch axes (the zero points are checked on the node)."""
    return a.dtype == "uint8" and b.dtype in ("uint8", "int8") and a.ndim >= 2 and a.ndim == b.ndim \
        and tuple(a.shape[:-2]) == tuple(b.shape[:-2])


def _activation_product(n: Node, params: dict, lanes: int) -> list | None:
    """matmul_integer(a, b) of two activations (uint8 a, 8-bit b, the same batch axes, constant
    per-tensor zero points) as pack_act_vnni(b) and matmul_act_vnni (ops/quant_act_vnni.py); else
    None."""
    a, b, za, zb = (list(n.inputs) + [None] * 4)[:4]
    if not packs_at_run_time(a, b):
        return None
    zero = []
    for z in (za, zb):
        if z is not None and (z not in params or params[z].size != 1):
            return None
        zero.append(int(params[z].reshape(())) if z is not None else 0)
    shift = 128 if b.dtype == "uint8" else 0
    out = n.outputs[0]
    packed = Value(f"{n.name}_b_vnni{lanes}", act_packed_shape(tuple(b.shape), lanes), "int8")
    return [Node("pack_act_vnni", (b,), (packed,), {"lanes": lanes, "shift": shift}, f"{n.name}_pack"),
            Node("matmul_act_vnni", (a, packed), (out,),
                 {"units": int(out.shape[-1]), "za": zero[0], "zb": zero[1], "shift": shift}, n.name)]


def _packed_product(a: Value, w: np.ndarray, za: int, out: Value, params: dict, packing: tuple, name: str) -> Node:
    """matmul_integer_vnni(a, w packed, za * column sums of w) -> out, w (K, N) int8; `packing`
    is the unit's (lanes, k alignment)."""
    lanes, align = packing
    corr = (za * w.astype(np.int64).sum(axis=0)).astype(np.int32)
    bp = pack_b_vnni(np.ascontiguousarray(w), lanes, align)
    bp_val = Value(f"{name}_w_vnni{lanes}", bp.shape, "int8")
    corr_val = Value(f"{name}_corr", corr.shape, "int32")
    params[bp_val], params[corr_val] = bp, corr
    return Node("matmul_integer_vnni", (a, bp_val, corr_val), (out,), {"units": int(w.shape[1])}, name)


def _rowwise(n: Node, params: dict, rows: _Rows) -> list | None:
    """`n` on the rows of its inputs, when one of them has a twin and the others are constants
    or values of the output's shape (given a twin here); else None."""
    out = n.outputs[0]
    if len(n.outputs) != 1 or out.ndim != 4 or not any(v in rows.twin for v in n.inputs):
        return None
    channels = out.shape[1]
    axis_op = n.op in _AXIS_OPS
    if axis_op and int(n.attrs.get("axis", 1)) % 4 != 1 and any(
            params[v].size > 1 for v in n.inputs[1:] if v is not None and v in params):
        return None
    consts: dict = {}
    for k, v in enumerate(n.inputs):
        if v is None or (v in params and axis_op and k > 0):
            continue                # scale / zero point: per tensor, or per channel along axis 1
        if v in params:
            consts[k] = _channel_const(params[v], channels)
            if consts[k] is None:
                return None
        elif tuple(v.shape) != tuple(out.shape):
            return None
    pre: list = []
    args: list = []
    for k, v in enumerate(n.inputs):
        if k in consts and consts[k].shape != params[v].shape:
            cv = Value(f"{out.name}_in{k}_rows", consts[k].shape, consts[k].dtype.name)
            params[cv] = consts[k]
            args.append(cv)
        elif v is None or v in params:
            args.append(v)
        else:
            pre += rows.rowify(v)       # the other operand of a residual add, say: no-op for a twin
            args.append(rows.twin[v])
    new_out = Value(f"{out.name}_rows", rows_shape(out.shape), out.dtype)
    rows.add(out, new_out)
    return pre + [Node(n.op, tuple(args), (new_out,), dict(n.attrs), f"{n.name}_rows")]


def _channel_const(arr: np.ndarray, channels: int) -> np.ndarray | None:
    """A constant broadcast against an NCHW value, as the same constant broadcast against its rows
    (a scalar, or (C,) for one value per channel); None when it varies along other axes."""
    if arr.ndim > 4:
        return None
    full = (1,) * (4 - arr.ndim) + arr.shape
    if any(d != 1 for k, d in enumerate(full) if k != 1):
        return None
    if arr.size == 1:
        return arr.reshape(())
    return np.ascontiguousarray(arr.reshape(channels)) if full[1] == channels else None


def _rewrite_conv(n: Node, params: dict, packing: tuple, rows: _Rows) -> list | None:
    x, w, zx, zw = (list(n.inputs) + [None] * 4)[:4]
    if n.attrs.get("groups", 1) != 1:
        return _rewrite_depthwise(n, params, rows)
    if x.dtype != "uint8" or x.ndim != 4 or w not in params or w.dtype != "int8":
        return None
    if zw is not None and (zw not in params or np.any(params[zw] != 0)):
        return None
    if zx is not None and (zx not in params or params[zx].size != 1):
        return None
    za = int(params[zx].reshape(())) if zx is not None else 0
    weight = params[w]
    m = weight.shape[0]
    out = n.outputs[0]
    batch, _, oh, ow = out.shape
    prod = Value(f"{out.name}_rows", (batch * oh * ow, m), "int32")     # twins are named by their value
    attrs = {"kernel": tuple(weight.shape[2:]), "strides": n.attrs.get("strides"), "padding": n.attrs.get("padding"),
             "dilations": n.attrs.get("dilations"), "pad_value": za}
    new: list = []
    width = int(np.prod(weight.shape[1:]))
    ncols = -(-width // packing[1]) * packing[1]      # im2col pads the depth: no padded copy of it
    if x in rows.twin:
        src = rows.twin[x]
        wmat = weight.transpose(0, 2, 3, 1).reshape(m, -1)           # columns in (kh, kw, c) order
        if _pointwise(weight.shape, attrs):
            cols = src
        else:
            cols = Value(f"{out.name}_cols", (batch * oh * ow, ncols), "uint8")
            new.append(Node("im2col", (src,), (cols,), {**attrs, "image": (x.shape[0],) + tuple(x.shape[2:]),
                                                         **_columns_attr(width, ncols)}, f"{n.name}_im2col"))
    else:
        wmat = weight.reshape(m, -1)
        cols = Value(f"{out.name}_cols", (batch * oh * ow, ncols), "uint8")
        new.append(Node("im2col", (x,), (cols,), {**attrs, **_columns_attr(width, ncols)}, f"{n.name}_im2col"))
    new.append(_packed_product(cols, wmat.T, za, prod, params, packing, n.name))
    rows.add(out, prod)
    return new


def _columns_attr(width: int, ncols: int) -> dict:
    """im2col's `columns` attribute when the depth is padded past the window's `width`."""
    return {"columns": ncols} if ncols != width else {}


def _rewrite_depthwise(n: Node, params: dict, rows: _Rows) -> list | None:
    """A depthwise conv_integer (one filter per channel) whose input has a rows twin becomes
    depthwise_integer_rows on the twin; the result is the output's twin."""
    x, w, zx, zw = (list(n.inputs) + [None] * 4)[:4]
    if x not in rows.twin or x.dtype != "uint8" or w not in params or w.dtype != "int8":
        return None
    weight = params[w]
    channels = x.shape[1]
    if n.attrs.get("groups") != channels or weight.shape[:2] != (channels, 1) or weight.ndim != 4:
        return None
    if zw is not None and (zw not in params or np.any(params[zw] != 0)):
        return None
    if zx is not None and (zx not in params or params[zx].size != 1):
        return None
    kh, kw = weight.shape[2:]
    if kh * kw > MAX_TAPS:
        return None
    za = int(params[zx].reshape(())) if zx is not None else 0
    taps = np.ascontiguousarray(weight.reshape(channels, kh * kw).T)           # (KH * KW, C)
    corr = (za * taps.astype(np.int64).sum(axis=0)).astype(np.int32)
    wv = Value(f"{n.name}_w_taps", taps.shape, "float32")
    cv = Value(f"{n.name}_corr", corr.shape, "int32")
    params[wv], params[cv] = taps.astype(np.float32), corr
    out = n.outputs[0]
    prod = Value(f"{out.name}_rows", rows_shape(out.shape), "int32")
    attrs = {"image": (x.shape[0],) + tuple(x.shape[2:]), "kernel": (kh, kw), "strides": n.attrs.get("strides"),
             "padding": n.attrs.get("padding"), "dilations": n.attrs.get("dilations"), "pad_value": za}
    rows.add(out, prod)
    return [Node("depthwise_integer_rows", (rows.twin[x], wv, cv), (prod,), attrs, n.name)]


def _rewrite_max_pool(n: Node, params: dict, rows: _Rows, users: dict, skip: set) -> list | None:
    """quantize(max_pool2d(dequantize(x))) with one per-tensor scale and zero point, x with a
    rows twin: max_pool_rows on the twin, its result the quantized output's twin (the
    quantize node is dropped)."""
    d = n.inputs[0]
    dq = rows.producer.get(d)
    after = users.get(n.outputs[0], [])
    if dq is None or dq.op != "dequantize_linear" or len(after) != 1 or after[0].op != "quantize_linear":
        return None
    q = after[0]
    x = dq.inputs[0]
    if x not in rows.twin or q.attrs.get("dtype") != x.dtype or n.attrs.get("ceil_mode") or d.ndim != 4:
        return None
    if not (_same_scalar(params, dq.inputs[1], q.inputs[1]) and _same_scalar(params, _at(dq.inputs, 2), _at(q.inputs, 2))):
        return None
    out = q.outputs[0]
    prod = Value(f"{out.name}_rows", rows_shape(out.shape), out.dtype)
    attrs = {"image": (x.shape[0],) + tuple(x.shape[2:]), "kernel": tuple(n.attrs["kernel"]),
             "strides": n.attrs.get("strides"), "padding": n.attrs.get("padding"), "dilations": n.attrs.get("dilations")}
    rows.add(out, prod)
    skip.add(q)
    return [Node("max_pool_rows", (rows.twin[x],), (prod,), attrs, n.name)]


def _at(values: tuple, k: int):
    return values[k] if k < len(values) else None


def _same_scalar(params: dict, a: Value | None, b: Value | None) -> bool:
    """Both absent, or both one-element constants of equal value and dtype."""
    if a is None or b is None:
        return a is None and b is None
    if a not in params or b not in params:
        return False
    pa, pb = params[a], params[b]
    return pa.size == 1 and pb.size == 1 and pa.dtype == pb.dtype and pa.reshape(()) == pb.reshape(())


def _pointwise(wshape: tuple, attrs: dict) -> bool:
    """A 1x1 window with stride 1 and no padding: the image rows are the im2col rows."""
    return (tuple(wshape[2:]) == (1, 1) and all(s == 1 for s in attrs["strides"] or (1, 1))
            and not any(attrs["padding"] or ()))
