"""Fold quantize / dequantize pairs around a conv, dense or matmul into an integer product with a
requantizing epilogue (the QDQ form that quantization tools write).

    q_y = quantize(relu?(product(dequantize(q_x), dequantize(q_w)) [+ b]), s_y, z_y)
  ->
    q_y = relu?(requantize(product_integer(q_x, q_w, z_x, z_w) [+ round(b / (s_x s_w))], s_x s_w / s_y, z_y))

Exact algebra: (q_x - z_x) s_x * (q_w - z_w) s_w summed is s_x s_w times the int32 sum, so the
float product equals the integer one scaled; the bias, which the tools quantize with scale
s_x s_w, is recovered exactly as an int32; relu commutes with the (monotonic) quantization, so
it becomes max(q, z_y).  The int32 sum, the float32 multiplier s_x s_w / s_y and the rounding
are the arithmetic ONNX Runtime's QLinearConv / QLinearMatMul use.

Applies when the activation scale and zero point are per tensor, the weight is a constant int8 /
uint8 tensor with per-tensor or per-output-channel parameters, all parameters are constants,
and each intermediate value feeds only the next node of the chain.  A matmul of two quantized
activations (attention's Q K^T and P V) folds the same way, both with per-tensor parameters,
where the target runs it on an int8 dot-product unit (alter_layout_int8 packs the right operand
at run time: a uint8 left operand, the same batch axes); elsewhere it stays float, which the
plain integer loops do not beat.  Other QDQ pairs stay float
(fold_constants turns a constant weight's dequantize into a float constant).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...target import Target
from ..ir import Graph, Node, Value
from .alter_layout_int8 import packs_at_run_time, runs_on_int8_unit
from .eliminate_dead_code import eliminate_dead_code

CONVS = ("conv1d", "conv2d", "conv3d")
PRODUCTS = CONVS + ("dense", "matmul")
QUANT = ("int8", "uint8")


class _Index:
    """Producers, users and constants of a graph, for matching chains."""

    def __init__(self, graph: Graph):
        self.params = graph.params
        self.producer = graph.producers()
        self.users = graph.consumers()
        self.outputs = set(graph.outputs)

    def sole_producer(self, v: Value, ops: tuple) -> Node | None:
        """The node of an op in `ops` that makes `v`, when `v` feeds exactly one node."""
        n = self.producer.get(v)
        if n is None or n.op not in ops or len(self.users.get(v, [])) != 1 or v in self.outputs:
            return None
        return n

    def const(self, v: Value | None) -> np.ndarray | None:
        return None if v is None else self.params.get(v)


def _dequantized(ix: _Index, v: Value, weight: bool):
    """(q, scale, zero point or None, axis) when `v` = dequantize_linear(q, const scale, const zp)."""
    n = ix.producer.get(v)
    if n is None or n.op != "dequantize_linear" or n.attrs.get("block_size", 0) or n.inputs[0].dtype not in QUANT:
        return None
    q, s, z = (list(n.inputs) + [None])[:3]
    scale, zp = ix.const(s), ix.const(z)
    if scale is None or (z is not None and zp is None) or (weight and q not in ix.params):
        return None
    if not weight and scale.size != 1:
        return None
    return q, scale.astype(np.float32), zp, int(n.attrs.get("axis", 1))


def _channel_params(scale: np.ndarray, zp: np.ndarray | None, axis: int, w: np.ndarray, out_axis: int):
    """Per-output-channel (scale, zp) vectors (or size-1 arrays), None when the weight's
    parameters run along another axis."""
    if scale.size == 1:
        return scale.reshape(1), (zp.reshape(1) if zp is not None else None)
    if axis % w.ndim != out_axis:
        return None
    return scale.reshape(-1), (zp.reshape(-1) if zp is not None else None)


def fold_qdq(graph: Graph, target: Target | None = None) -> Graph:
    """`graph` with its QDQ products folded; products of two activations only for a `target`
    with an int8 dot-product unit, or for any when `target` is None."""
    activations = target is None or runs_on_int8_unit(target)
    ix = _Index(graph)
    params = dict(graph.params)
    replace: dict = {}
    for q in graph.nodes:
        if q.op != "quantize_linear" or q.attrs.get("block_size", 0):
            continue
        folded = _fold_one(ix, q, params, activations)
        if folded is None:
            continue
        dropped, new_nodes = folded
        for n in dropped:
            replace[n] = None
        replace[q] = new_nodes
    if not replace:
        return graph
    nodes: list = []
    for n in graph.nodes:
        if n not in replace:
            nodes.append(n)
        elif replace[n]:
            nodes.extend(replace[n])
    return eliminate_dead_code(graph.with_nodes(nodes, params=params))


def _fold_one(ix: _Index, q: Node, params: dict, activations_too: bool = True):
    """(nodes to drop, nodes that replace `q`) for the chain that ends at `q`, or None."""
    y, s, z = (list(q.inputs) + [None])[:3]
    sy, zy = ix.const(s), ix.const(z)
    if sy is None or sy.size != 1 or zy is None or zy.size != 1 or q.attrs.get("dtype") not in QUANT:
        return None
    dropped = []
    relu = ix.sole_producer(y, ("relu",))
    if relu is not None:
        dropped.append(relu)
        y = relu.inputs[0]
    bias = None
    add = ix.sole_producer(y, ("add",))
    if add is not None:
        a, b = add.inputs
        bias = ix.const(b)
        if bias is None:
            return None
        dropped.append(add)
        y = a
    prod = ix.sole_producer(y, PRODUCTS)
    if prod is None:
        return None
    dropped.append(prod)
    x_dq = _dequantized(ix, prod.inputs[0], weight=False)
    if x_dq is None:
        return None
    w_dq = _dequantized(ix, prod.inputs[1], weight=True)
    activations = w_dq is None and prod.op == "matmul" and activations_too
    if activations:       # both operands quantized activations (attention's Q K^T and P V)
        w_dq = _dequantized(ix, prod.inputs[1], weight=False)
        if w_dq is None or prod.attrs.get("transpose_a") or prod.attrs.get("transpose_b") \
                or not packs_at_run_time(x_dq[0], w_dq[0]):
            return None
    elif w_dq is None:
        return None
    xq, sx, zx_arr, _ = x_dq
    wq_val, sw, zw_arr, w_axis = w_dq
    wq: Any = params.get(wq_val)          # a constant for a weight; None for an activation
    if wq is None and not activations:
        return None
    op, attrs = prod.op, dict(prod.attrs)
    integer_attrs: dict = {}
    out = y
    if activations:
        out_axis, integer_op = 1, "matmul_integer"
    elif op == "matmul":
        if attrs.get("transpose_a") or wq.ndim != 2 or out.ndim < 2:
            return None
        if attrs.get("transpose_b"):
            wq, w_axis = np.ascontiguousarray(wq.T), 1 - (w_axis % 2)
        out_axis, integer_op = 1, "matmul_integer"
    elif op == "dense":
        wq, w_axis = np.ascontiguousarray(wq.T), 1 - (w_axis % 2)      # (N, K) -> (K, N)
        out_axis, integer_op = 1, "matmul_integer"
    else:
        out_axis, integer_op, integer_attrs = 0, "conv_integer", attrs
    if activations:       # per-tensor parameters (_dequantized checked the scale's size)
        sw_c, zw_c = sw.reshape(1), (zw_arr.reshape(1) if zw_arr is not None else None)
        n_out, w_dtype = out.shape[-1], np.dtype(wq_val.dtype)
    else:
        channels = _channel_params(sw, zw_arr, w_axis, wq, out_axis)
        if channels is None:
            return None
        sw_c, zw_c = channels
        n_out, w_dtype = wq.shape[out_axis], wq.dtype
    rank_after = out.ndim - 2 if op in CONVS else 0          # output axes after the channel axis
    name = prod.name

    def const(arr: np.ndarray, suffix: str) -> Value:
        v = Value(f"{name}_{suffix}", arr.shape, arr.dtype.name)
        params[v] = np.array(arr, order="C")      # (ascontiguousarray would make a 0-d array 1-d)
        return v

    zx = const(np.asarray(zx_arr if zx_arr is not None else 0, xq.dtype).reshape(()), "zx")
    wv = wq_val if activations else const(wq, "wq")
    zw_vec = (zw_c if zw_c is not None else np.zeros(1)).astype(w_dtype)
    zw = const(zw_vec.reshape(-1) if zw_vec.size > 1 else zw_vec.reshape(()), "zw")
    acc = Value(f"{name}_acc", out.shape, "int32")
    new = [Node(integer_op, (xq, wv, zx, zw), (acc,), integer_attrs, f"{name}_int")]
    acc_scale = (sx.reshape(()) * sw_c).astype(np.float32)
    if bias is not None:
        b = bias.astype(np.float32)
        if b.size not in (1, n_out) or not _channel_shaped(b.shape, out.ndim, rank_after):
            return None
        b_int = np.rint(b.reshape(-1) / acc_scale).astype(np.int32)
        b_int = np.broadcast_to(b_int, (n_out,)).reshape((n_out,) + (1,) * rank_after)
        summed = Value(f"{name}_biased", out.shape, "int32")
        new.append(Node("add", (acc, const(b_int, "bq")), (summed,), {}, f"{name}_bias"))
        acc = summed
    mult = (acc_scale / sy.astype(np.float32).reshape(())).astype(np.float32)
    axis = 1 if op in CONVS else -1
    final = q.outputs[0]
    req_out = final if relu is None else Value(f"{name}_req", final.shape, final.dtype)
    new.append(Node("requantize", (acc, const(mult, "mult"), const(zy.reshape(()).astype(final.dtype), "zy")),
                    (req_out,), {"axis": axis if mult.size > 1 else 1, "block_size": 0, "dtype": final.dtype},
                    f"{name}_requant"))
    if relu is not None:
        new.append(Node("maximum", (req_out, const(zy.reshape(()).astype(final.dtype), "floor")), (final,), {},
                        f"{name}_relu"))
    return dropped, new


def _channel_shaped(shape: tuple, ndim: int, rank_after: int) -> bool:
    """Whether a bias of `shape` varies at most along the channel axis of an output of rank `ndim`
    (axis 1 of a conv, the last axis of a matrix product)."""
    if len(shape) > ndim:
        return False
    full = (1,) * (ndim - len(shape)) + tuple(shape)
    channel = ndim - 1 - rank_after
    return all(d == 1 for k, d in enumerate(full) if k != channel)
