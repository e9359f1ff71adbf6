"""A model's floating-point work, counted on the tensorforge graph the frontend produces (before
optimization, so every conv, dense and matmul is still one node with its logical shapes).

Counted: 2 flops per multiply-add of the dense linear algebra, which is where a model's time
goes and what an FMA peak bounds: conv1d/2d/3d and depthwise conv2d (output elements x the
weight's reduction size), transposed convs (input elements x the weight's per-input fan-out),
dense (the frontend's Gemm and nn.Linear, and the per-step GEMMs of an unrolled LSTM/GRU),
matmul (batched, with its transpose flags) and an LSTM step's recurrent product (lstm_cell:
batch x 4 hidden x hidden).  Element-wise ops, normalizations, softmax and
pooling are left out.  A conv counts its direct multiply-adds whatever algorithm runs it, so a
model whose 3x3 convs run as Winograd convs (ResNet-18) can show more than 100% of the peak.
"""
from __future__ import annotations

import math

CONVS = ("conv1d", "conv2d", "conv3d", "depthwise_conv2d")
CONV_TRANSPOSES = ("conv_transpose1d", "conv_transpose2d", "conv_transpose3d")


def node_flops(node) -> float:
    """2 x the multiply-adds of one frontend graph node (0 for ops that are not counted)."""
    out = node.outputs[0].shape
    if node.op in CONVS:
        return 2.0 * math.prod(out) * math.prod(node.inputs[1].shape[1:])
    if node.op in CONV_TRANSPOSES:
        return 2.0 * math.prod(node.inputs[0].shape) * math.prod(node.inputs[1].shape[1:])
    if node.op == "dense":
        return 2.0 * math.prod(out) * node.inputs[0].shape[-1]
    if node.op == "matmul":
        a = node.inputs[0].shape
        k = a[-2] if node.attrs.get("transpose_a") and len(a) >= 2 else a[-1]
        return 2.0 * math.prod(out) * k
    if node.op in ("lstm_cell", "lstm_cell_packed"):
        batch, _, hidden = out
        return 2.0 * batch * 4 * hidden * hidden
    return 0.0


def graph_flops(graph) -> float:
    """The counted flops of one run of a tensorforge Graph (from tensorforge.frontend.from_onnx)."""
    return sum(node_flops(n) for n in graph.nodes)
