"""Fold an inference batch_norm into the convolution or dense layer before it.

    y = batch_norm(conv(x, w) [+ b], gamma, beta, mean, var)
      = conv(x, w * s) + (b * s + beta - mean * s),   s = gamma / sqrt(var + eps)

per output channel.  Applies when the weights, bias and statistics are constants and the conv's
output feeds only this chain; the scaled weights are computed once, at compile time.

A batch_norm with constant statistics and no such layer before it (after a concat, an add, an
input) becomes `x * s + shift` with s and shift per channel, computed once: one multiply-add per
element instead of a square root and a division (a standalone one over 64 x 112 x 112 took 1.6-2.4x
ONNX Runtime's time).
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Node, Value
from .rewrite import replace_values

WEIGHTED = ("conv1d", "conv2d", "conv3d", "dense")


def fold_batch_norm(graph: Graph) -> Graph:
    params = dict(graph.params)
    producer = graph.producers()
    users = graph.consumers()
    outputs = set(graph.outputs)
    replace: dict = {}       # node -> replacement node (or None to drop)
    mapping: dict = {}
    for bn in graph.nodes:
        if bn.op != "batch_norm" or bn.attrs.get("axis", 1) != 1:
            continue
        x, gamma, beta, mean, var = bn.inputs
        if not all(v in params for v in (gamma, beta, mean, var)):
            continue
        chain = _weighted_chain(x, producer, users, params, outputs)
        if chain is None:
            if len(bn.outputs) == 1 and x.dtype in ("float32", "float64") and x.ndim >= 2 \
                    and not _stays_transposed(producer.get(x)):
                replace[bn] = _scale_shift(bn, params)
            continue
        layer, bias_node, bias = chain
        w = params[layer.inputs[1]]
        s, shift = scale_and_shift(bn, params)
        if bias is not None:
            shift = shift + params[bias].astype(np.float64).reshape(-1) * s
        w_new = (w.astype(np.float64) * s.reshape((-1,) + (1,) * (w.ndim - 1))).astype(w.dtype)
        w_val = Value(layer.inputs[1].name + "_bnfold", w.shape, w.dtype.name)
        params[w_val] = np.ascontiguousarray(w_new)
        out = x if bias_node is None else layer.outputs[0]
        rank = out.ndim
        b_shape = (-1,) + (1,) * (rank - 2) if layer.op != "dense" else (-1,)
        b_arr = shift.astype(w.dtype).reshape(b_shape)
        b_val = Value(bn.outputs[0].name + "_bnshift", b_arr.shape, b_arr.dtype.name)
        params[b_val] = np.ascontiguousarray(b_arr)
        replace[layer] = Node(layer.op, (layer.inputs[0], w_val) + layer.inputs[2:], layer.outputs, layer.attrs, layer.name)
        new_add = Node("add", (layer.outputs[0], b_val), bn.outputs, {}, bn.name)
        if bias_node is not None:
            replace[bias_node] = None
        replace[bn] = new_add
    if not replace:
        return graph
    nodes = []
    for n in graph.nodes:
        if n in replace:
            got = replace[n]
            if isinstance(got, list):
                nodes.extend(got)
            elif got is not None:
                nodes.append(got)
        else:
            nodes.append(n)
    from .eliminate_dead_code import eliminate_dead_code
    return eliminate_dead_code(replace_values(graph.with_nodes(nodes, params=params), mapping))


def _stays_transposed(node: Node | None) -> bool:
    """A transposed conv with a stride above 1 and a kernel other than its stride: it stays one
    (conv_transpose_as_conv), and alter_layout_conv_transpose folds its batch norm into its
    weights."""
    if node is None or not node.op.startswith("conv_transpose") or len(node.inputs) < 2:
        return False
    strides = tuple(node.attrs.get("strides") or ())
    return any(st > 1 for st in strides) and tuple(node.inputs[1].shape[2:]) != strides


def scale_and_shift(bn: Node, params: dict) -> tuple[np.ndarray, np.ndarray]:
    """(s, shift) in float64 of batch_norm(x, gamma, beta, mean, var) with constant statistics:
    batch_norm(x) = x * s + shift per channel, s = gamma / sqrt(var + eps)."""
    gamma, beta, mean, var = (params[v].astype(np.float64) for v in bn.inputs[1:5])
    s = gamma / np.sqrt(var + float(bn.attrs.get("epsilon", 1e-5)))
    return s, beta - mean * s


def _scale_shift(bn: Node, params: dict) -> list:
    """batch_norm(x, gamma, beta, mean, var) with constant statistics as mul(x, s) then add(shift)."""
    x = bn.inputs[0]
    s, shift = scale_and_shift(bn, params)
    shape = (-1,) + (1,) * (x.ndim - 2)
    values = []
    for arr, tag in ((s, "bnscale"), (shift, "bnshift")):
        a = np.ascontiguousarray(arr.astype(x.dtype).reshape(shape))
        v = Value(f"{bn.outputs[0].name}_{tag}", a.shape, a.dtype.name)
        params[v] = a
        values.append(v)
    scaled = Value(bn.outputs[0].name + "_scaled", x.shape, x.dtype)
    return [Node("mul", (x, values[0]), (scaled,), {}, bn.name + "_scale"),
            Node("add", (scaled, values[1]), bn.outputs, {}, bn.name)]


def _weighted_chain(x: Value, producer: dict, users: dict, params: dict, outputs: set):
    """(layer node, bias add node or None, bias Value or None) when `x` is conv/dense [+ const bias]
    used only by the batch_norm."""
    node = producer.get(x)
    if node is None or len(users.get(x, [])) != 1 or x in outputs:
        return None
    bias_node = bias = None
    if node.op == "add":
        a, b = node.inputs
        if b in params and a in producer and producer[a].op in WEIGHTED:
            bias_node, bias, layer_out = node, b, a
        else:
            return None
        if len(users.get(layer_out, [])) != 1 or layer_out in outputs:
            return None
        node = producer[layer_out]
        if params[bias].size != node.outputs[0].shape[1]:
            return None
    if node.op not in WEIGHTED or node.inputs[1] not in params:
        return None
    if node.op == "dense" and node.outputs[0].ndim != 2:
        return None
    return node, bias_node, bias
