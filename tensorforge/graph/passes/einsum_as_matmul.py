"""An einsum of two operands that is a batched matrix product becomes transposes, reshapes and
one matmul.

Each label of "X,Y->Z" plays one role: batch (in X, Y and Z), contracted (in X and Y, not Z),
a row of X (in X and Z only) or a column of Y (in Y and Z only).  Then

    Z = transpose(reshape(matmul(X as (batch, rows, contracted), Y as (batch, contracted, cols))))

where each operand is brought to that order by a transpose (none when it already is), the
groups merged by a reshape, and the product's axes split and moved to Z's order.  (The matmul's
transpose_b on a run-time operand read it column by column: 1.5 ms on the score product below,
0.31 ms with the transpose as a node of its own.)  The product then takes the GEMM paths (packed weights for a constant operand, the
register-tiled kernel for two run-time ones): as einsum's generic reduction, an attention score
product "bhqd,bhkd->bhqk" took 6.3x ONNX Runtime's time.

Applies to float operands (their products accumulate as matmul's do: float32 for 16-bit
floats) with labels that appear at most once per operand, that have one size wherever they
appear, and that all reach Z or are contracted between X and Y (a label summed away within one
operand keeps the einsum), and to explicit outputs ("->").  The graph computes the same values.
"""
from __future__ import annotations

import math

from ...ops.reduce_einsum import parse_einsum
from ...target import Target
from ..ir import Graph, Node, Value
from .rewrite import rewrite_nodes

FLOATS = ("float32", "float64", "float16", "bfloat16")


def einsum_as_matmul(graph: Graph, target: Target) -> Graph:
    return rewrite_nodes(graph, _rewrite)


def _rewrite(n: Node, params: dict) -> list[Node] | None:
    if n.op != "einsum" or len(n.inputs) != 2 or "->" not in n.attrs.get("equation", ""):
        return None
    x, y = n.inputs
    z = n.outputs[0]
    if x is None or y is None or x.dtype not in FLOATS or y.dtype != x.dtype:
        return None
    try:
        (lx, ly), lz, sizes = parse_einsum(n.attrs["equation"], [x.shape, y.shape])
    except Exception:       # noqa: BLE001 - a malformed equation is the op's to report
        return None
    if len(set(lx)) != len(lx) or len(set(ly)) != len(ly):
        return None
    for labels, shape in ((lx, x.shape), (ly, y.shape)):
        if any(int(d) != sizes[lab] for lab, d in zip(labels, shape)):
            return None      # a broadcast size-1 axis
    batch = [lab for lab in lz if lab in lx and lab in ly]
    rows = [lab for lab in lz if lab in lx and lab not in ly]
    cols = [lab for lab in lz if lab in ly and lab not in lx]
    contracted = [lab for lab in lx if lab in ly and lab not in lz]
    if set(lx) != set(batch + rows + contracted) or set(ly) != set(batch + contracted + cols):
        return None
    name = n.name or z.name
    nodes: list[Node] = []

    def size(labels) -> int:
        return math.prod(sizes[lab] for lab in labels)

    def operand(v: Value, labels: list, first: list, second: list, tag: str) -> Value:
        """v as (batch, first, second), merged."""
        order = batch + first + second
        cur = v
        if labels != order:
            perm = tuple(labels.index(lab) for lab in order)
            cur = Value(f"{v.name}_{tag}_t", tuple(sizes[lab] for lab in order), v.dtype)
            nodes.append(Node("transpose", (v,), (cur,), {"perm": perm}, f"{name}_{tag}_t"))
        dims = ((size(batch),) if batch else ()) + (size(first), size(second))
        if tuple(cur.shape) != dims:
            flat = Value(f"{v.name}_{tag}_m", dims, v.dtype)
            nodes.append(Node("reshape", (cur,), (flat,), {"shape": dims}, f"{name}_{tag}_m"))
            cur = flat
        return cur

    a = operand(x, lx, rows, contracted, "a")
    b = operand(y, ly, contracted, cols, "b")
    prod_dims = ((size(batch),) if batch else ()) + (size(rows), size(cols))
    natural = batch + rows + cols
    natural_shape = tuple(sizes[lab] for lab in natural)
    last = z if natural == lz and prod_dims == natural_shape else Value(f"{z.name}_mm", prod_dims, z.dtype)
    nodes.append(Node("matmul", (a, b), (last,), {}, name))
    if last is z:
        return nodes
    if natural == lz:
        nodes.append(Node("reshape", (last,), (z,), {"shape": tuple(z.shape)}, f"{name}_split"))
        return nodes
    if prod_dims != natural_shape:
        split = Value(f"{z.name}_split", natural_shape, z.dtype)
        nodes.append(Node("reshape", (last,), (split,), {"shape": natural_shape}, f"{name}_split"))
        last = split
    nodes.append(Node("transpose", (last,), (z,), {"perm": tuple(natural.index(lab) for lab in lz)}, f"{name}_out"))
    return nodes
