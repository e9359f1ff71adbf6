"""Simplification: drop identity-like nodes (Identity, inference Dropout, a pad of nothing),
fold a zero pad of the spatial axes into the convolutions that read it (exporters of
TensorFlow-style "same" padding write one before each strided conv), merge chains of
reshapes into one, and square and cube by products: `pow(x, 2)` with a constant exponent 2
becomes `mul(x, x)` for floating-point x (the same value: a correctly rounded power of two is the
rounded product), `pow(x, 3)` becomes `(x * x) * x`.  Layer norms exported from opsets before
LayerNormalization square with Pow; as a `pow` call per element it took 25x ONNX Runtime's time
(8 ms on 8 x 128 x 768).  GPT-2's GELU cubes with Pow: 6 layers at sequence 64 took 74 ms with a
`powf` call per element, 60 ms with the products (ONNX Runtime: 71-76 ms).  A float reduction
of a reduction by the same op over other axes, the first read by nothing else, is one
reduction over both (`x.mean(3).mean(2)`, a classifier head that torchvision's MobileNetV2
writes so: two kernels, the second a serial chain per row, 0.030 ms; ONNX Runtime 0.032)."""
from __future__ import annotations

import numpy as np

from ...ir.dtype import is_float
from ..ir import Graph, Node, Value
from .rewrite import replace_values

IDENTITY_OPS = ("identity", "dropout")


def simplify_graph(graph: Graph) -> Graph:
    graph = _fold_pads(graph)
    mapping: dict = {}
    kept = []
    producer: dict[Value, Node] = {}
    outputs = set(graph.outputs)
    readers: dict[Value, int] = {}         # value -> how many inputs of nodes read it
    for n in graph.nodes:
        for v in n.inputs:
            if v is not None:
                readers[v] = readers.get(v, 0) + 1
    changed = False
    for n in graph.nodes:
        if ((n.op in IDENTITY_OPS or _pads_nothing(n)) and n.inputs and n.inputs[0] is not None
                and n.outputs[0] not in outputs
                and not any(v in readers or v in outputs for v in n.outputs[1:])):   # e.g. a dropout mask
            mapping[n.outputs[0]] = n.inputs[0]
            changed = True
            continue
        power = _small_power(n, graph.params)
        if power == 2:
            n = Node("mul", (n.inputs[0], n.inputs[0]), n.outputs, {}, n.name)
            changed = True
        elif power == 3:
            x, y = n.inputs[0], n.outputs[0]
            sq = Value(f"{y.name}_sq", x.shape, x.dtype)
            kept.append(Node("mul", (x, x), (sq,), {}, f"{n.name}_sq"))
            n = Node("mul", (sq, x), n.outputs, {}, n.name)
            changed = True
        merged = _merged_reduction(n, producer, readers, outputs)
        if merged is not None:
            n = merged
            changed = True
        if n.op == "reshape" and n.inputs[0] in producer and producer[n.inputs[0]].op == "reshape":
            first = producer[n.inputs[0]]
            # the merged node gets the literal output shape: attributes such as 0 ("keep this
            # dimension") or -1 referred to the first reshape's output, not to its input
            attrs = dict(n.attrs, shape=tuple(n.outputs[0].shape), allowzero=1)
            n = Node("reshape", (first.inputs[0],), n.outputs, attrs, n.name)
            changed = True
        for v in n.outputs:
            producer[v] = n
        kept.append(n)
    if not changed:
        return graph
    return replace_values(graph, mapping, nodes=kept)


MERGED_REDUCTIONS = ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min")


def _merged_reduction(n: Node, producer: dict, readers: dict, outputs: set) -> Node | None:
    """`n` and the reduction it reads as one node over the axes of both, where both are the same
    float reduction with explicit axes and the same keepdims, and nothing else reads the first
    (it then has no reader left and is dropped as dead code)."""
    first = producer.get(n.inputs[0]) if n.op in MERGED_REDUCTIONS and n.inputs else None
    if first is None or first.op != n.op or readers.get(n.inputs[0], 0) != 1 or n.inputs[0] in outputs:
        return None
    x = first.inputs[0]
    keep = int(n.attrs.get("keepdims", 1))
    if x is None or not is_float(x.dtype) or keep != int(first.attrs.get("keepdims", 1)) \
            or n.attrs.get("axes") is None or first.attrs.get("axes") is None or len(n.inputs) != 1:
        return None
    inner = sorted(a % x.ndim for a in first.attrs["axes"])
    kept = [k for k in range(x.ndim) if keep or k not in inner]
    outer = [kept[a % len(kept)] for a in n.attrs["axes"]]
    return Node(n.op, (x,), n.outputs, {**n.attrs, "axes": tuple(sorted(set(inner) | set(outer)))}, n.name)


def _pads_nothing(n: Node) -> bool:
    """A pad node whose widths are all zero (in any mode): its output is its input."""
    pads = n.attrs.get("pads") if n.op == "pad" else None
    return pads is not None and len(n.inputs) == 1 and not any(pads)


def _small_power(n: Node, params: dict) -> int | None:
    """2 or 3 for pow(x, c) of a floating-point x with a constant c of one element equal to 2 or
    3, that does not broadcast x to a larger shape; else None.  x * x is the correctly rounded
    square; (x * x) * x rounds twice (within about an ulp of the cube), which is what ONNX
    Runtime's Pow computes for an exponent of 3, bit for bit."""
    if n.op != "pow" or len(n.inputs) != 2 or n.inputs[1] not in params:
        return None
    x, c = n.inputs
    value = np.asarray(params[c])
    if not (x.dtype.startswith(("float", "bfloat")) and value.size == 1
            and tuple(n.outputs[0].shape) == tuple(x.shape) and n.outputs[0].dtype == x.dtype):
        return None
    power = float(value.reshape(()))
    return int(power) if power in (2.0, 3.0) else None


def _fold_pads(graph: Graph) -> Graph:
    """conv(pad(x)) -> conv(x) with the pad's widths added to the conv's padding, where the pad
    writes zeros (constant mode, value 0) on spatial axes only and only convolutions read it."""
    readers: dict[Value, list[Node]] = {}
    for n in graph.nodes:
        for v in n.inputs:
            if v is not None:
                readers.setdefault(v, []).append(n)
    outputs = set(graph.outputs)
    folded: dict[Node, Node] = {}     # conv -> the conv reading the pad's input
    dropped = set()
    for n in graph.nodes:
        widths = _spatial_zero_pad(n)
        if widths is None or n.outputs[0] in outputs:
            continue
        rank = len(widths) // 2
        convs = readers.get(n.outputs[0], [])
        if not convs or any(c.op != f"conv{rank}d" or c.inputs[0] is not n.outputs[0]
                            or n.outputs[0] in c.inputs[1:] or c in folded for c in convs):
            continue
        for c in convs:
            padding = tuple(c.attrs.get("padding") or (0,) * (2 * rank))
            attrs = dict(c.attrs, padding=tuple(p + w for p, w in zip(padding, widths)))
            folded[c] = Node(c.op, (n.inputs[0], *c.inputs[1:]), c.outputs, attrs, c.name)
        dropped.add(n)
    if not dropped:
        return graph
    return graph.with_nodes([folded.get(n, n) for n in graph.nodes if n not in dropped])


def _spatial_zero_pad(n: Node) -> tuple | None:
    """The (begin.., end..) widths of a pad node's spatial axes (all but the first two) when it
    writes zeros there and nowhere else, else None."""
    if n.op != "pad" or len(n.inputs) != 1 or n.inputs[0] is None or n.attrs.get("mode", "constant") != "constant":
        return None
    x = n.inputs[0]
    pads = tuple(n.attrs.get("pads") or ())
    if not x.dtype.startswith(("float", "bfloat")) or float(n.attrs.get("value", 0.0) or 0.0) != 0.0 \
            or x.ndim < 3 or len(pads) != 2 * x.ndim or min(pads) < 0 or not any(pads):
        return None
    rank = x.ndim
    if pads[0] or pads[1] or pads[rank] or pads[rank + 1]:
        return None
    return pads[2:rank] + pads[rank + 2:]
