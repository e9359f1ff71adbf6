"""precision="bf16": convolutions and matrix products take bfloat16 operands and accumulate in
float32; everything else stays float32.  (driver.compile runs this before the graph pipeline
when asked; the default precision, "fp32", leaves the graph alone.)

* A dense or matmul with a constant float32 weight (x of rank >= 2, no transpose of x) on a CPU
  with AVX-512 BF16 becomes matmul_bf16(x, the weight rounded to bfloat16 and packed), which the
  template runs on `vdpbf16ps`; x of rank > 2 is reshaped to rows and back.
* Every other conv / dense / matmul on float32 keeps its op and its float32 kernels, with each
  float32 operand rounded to bfloat16 first (cast to bfloat16 and back: the constants fold at
  compile time, the activations' round trip fuses into their producers).  The products of
  bfloat16 values are exact in float32, so this computes what a bfloat16 unit with float32
  accumulation computes, on the float32 FMA units.

`lower_precision_units` also counts the products per unit, for the report compile keeps.
"""
from __future__ import annotations

import numpy as np

from ...ops.x86_bf16 import has_amx_bf16, has_bf16_unit, pack_b_bf16
from ...target import Target
from ..ir import Graph, Node, Value

PRODUCTS = ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
            "depthwise_conv2d", "dense", "matmul")
PRECISIONS = ("fp32", "bf16")
VDPBF16PS = "vdpbf16ps (AVX-512 BF16)"
ROUNDED = "fp32 FMA on bf16-rounded operands"


def lower_precision(graph: Graph, target: Target, precision: str = "fp32") -> Graph:
    return lower_precision_units(graph, target, precision)[0]


def lower_precision_units(graph: Graph, target: Target, precision: str = "fp32") -> tuple[Graph, dict]:
    """(the lowered graph, {unit description: number of products it runs})."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision == "fp32":
        return graph, {}
    use_unit = target.template_suffix == "cpu" and target.mcpu == "native" and (has_bf16_unit() or has_amx_bf16())
    params = dict(graph.params)
    nodes: list = []
    units: dict = {}
    names = _Names(graph)
    for n in graph.nodes:
        if n.op not in PRODUCTS or any(v is not None and v.dtype != "float32" for v in n.inputs[:2]):
            nodes.append(n)
            continue
        packed = _packed(n, params, names) if use_unit else None
        if packed is not None:
            nodes.extend(packed)
            units[VDPBF16PS] = units.get(VDPBF16PS, 0) + 1
            continue
        units[ROUNDED] = units.get(ROUNDED, 0) + 1
        inputs = list(n.inputs)
        for k in (0, 1):
            inputs[k] = _rounded(inputs[k], nodes, params, names)
        nodes.append(Node(n.op, tuple(inputs), n.outputs, n.attrs, n.name))
    return graph.with_nodes(nodes, params=params).validate(), units


class _Names:
    def __init__(self, graph: Graph):
        self.taken = {v.name for n in graph.nodes for v in n.outputs} | {v.name for v in graph.params} \
            | {v.name for v in graph.inputs}

    def __call__(self, base: str) -> str:
        name, k = base, 1
        while name in self.taken:
            name, k = f"{base}_{k}", k + 1
        self.taken.add(name)
        return name


def _rounded(v: Value | None, nodes: list, params: dict, names: _Names) -> Value | None:
    """`v` rounded to bfloat16 values (float32 dtype): a constant converted now, else two casts."""
    if v is None:
        return None
    if v in params:
        from ...ir.dtype import to_numpy
        arr = params[v].astype(to_numpy("bfloat16")).astype(np.float32)
        out = Value(names(f"{v.name}_bf16"), v.shape, "float32")
        params[out] = arr
        return out
    half = Value(names(f"{v.name}_bf16"), v.shape, "bfloat16")
    back = Value(names(f"{v.name}_bf16r"), v.shape, "float32")
    nodes.append(Node("cast", (v,), (half,), {"dtype": "bfloat16"}, half.name))
    nodes.append(Node("cast", (half,), (back,), {"dtype": "float32"}, back.name))
    return back


def _packed(n: Node, params: dict, names: _Names) -> list | None:
    """matmul_bf16 nodes for a dense / matmul with a constant 2-D weight, or None."""
    x, w = n.inputs[0], n.inputs[1]
    if w not in params or w.ndim != 2 or x is None or x.ndim < 2 or len(n.inputs) != 2:
        return None
    if n.op == "dense":
        weight = params[w].T
    elif n.op == "matmul" and not n.attrs.get("transpose_a", False):
        weight = params[w].T if n.attrs.get("transpose_b", False) else params[w]
    else:
        return None
    k, units = weight.shape
    wp = pack_b_bf16(np.ascontiguousarray(weight))
    wv = Value(names(f"{w.name}_bf16p"), wp.shape, "bfloat16")
    params[wv] = wp
    out = n.outputs[0]
    if x.ndim == 2:
        return [Node("matmul_bf16", (x, wv), (out,), {"units": units}, n.name)]
    rows = int(np.prod(x.shape[:-1]))
    flat = Value(names(f"{x.name}_rows"), (rows, k), "float32")
    prod = Value(names(f"{out.name}_rows"), (rows, units), "float32")
    return [Node("reshape", (x,), (flat,), {"shape": (rows, k)}, flat.name),
            Node("matmul_bf16", (flat, wv), (prod,), {"units": units}, n.name),
            Node("reshape", (prod,), (out,), {"shape": tuple(out.shape)}, f"{n.name}_unflatten")]

