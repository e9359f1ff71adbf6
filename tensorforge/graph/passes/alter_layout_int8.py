"""matmul_integer(a, B) with a uint8 2-D `a`, a constant int8 B and B's zero point 0 becomes
matmul_integer_vnni(a, B packed for the int8 dot-product unit, za * column sums of B) on a CPU
that has such a unit (AVX-512 VNNI, AVX-VNNI, AMX).

    sum_k (a[i, k] - za) * B[k, j] = sum_k a[i, k] B[k, j] - za * sum_k B[k, j]

so the unit's u8 x s8 products give the result and the correction is a constant per column,
computed here once.  A conv_integer of the same kind (2-D, one group, constant int8 weight with
zero point 0) becomes the same product on im2col(x) (its windows as rows, padded with x's zero
point), the result transposed back to (N, M, OH, OW).  The packing (ops/schedules/cpu_matmul_int8.pack_b_vnni) is the unit's
operand layout.  Runs only for a native CPU target (the units are the host's); other products
(signed activations, per-row or nonzero weight zero points, batched operands) stay as they are.
"""
from __future__ import annotations

import numpy as np

from ...ops import x86_intrin as X
from ...ops.schedules.cpu_matmul_int8 import pack_b_vnni
from ...target import Target
from ..ir import Graph, Node, Value


def alter_layout_int8(graph: Graph, target: Target) -> Graph:
    if target.template_suffix != "cpu" or target.mcpu != "native":
        return graph
    unit = X.int8_unit()
    if unit is None:
        return graph
    lanes = X.LANES[unit]
    params = dict(graph.params)
    nodes, changed = [], False
    for n in graph.nodes:
        rewritten = _rewrite(n, params, lanes)
        nodes.extend(rewritten or [n])
        changed = changed or rewritten is not None
    if not changed:
        return graph
    from .eliminate_dead_code import eliminate_dead_code
    return eliminate_dead_code(graph.with_nodes(nodes, params=params))


def _rewrite(n: Node, params: dict, lanes: int) -> list | None:
    if n.op == "conv_integer":
        return _rewrite_conv(n, params, lanes)
    if n.op != "matmul_integer":
        return None
    a, b, za, zb = (list(n.inputs) + [None] * 4)[:4]
    if a.dtype != "uint8" or a.ndim < 2 or b not in params or b.dtype != "int8" or b.ndim != 2:
        return None
    if zb is not None and (zb not in params or np.any(params[zb] != 0)):
        return None
    if za is not None and (za not in params or params[za].size != 1):
        return None
    za_value = int(params[za].reshape(())) if za is not None else 0
    out = n.outputs[0]
    if a.ndim == 2:
        return [_packed_product(a, params[b], za_value, out, params, lanes, n.name)]
    rows = int(np.prod(a.shape[:-1]))      # batched rows: one product over all of them
    flat = Value(f"{n.name}_a_rows", (rows, a.shape[-1]), a.dtype)
    prod = Value(f"{n.name}_rows", (rows, out.shape[-1]), "int32")
    return [Node("reshape", (a,), (flat,), {"shape": flat.shape}, f"{n.name}_flatten"),
            _packed_product(flat, params[b], za_value, prod, params, lanes, n.name),
            Node("reshape", (prod,), (out,), {"shape": tuple(out.shape)}, f"{n.name}_unflatten")]


def _packed_product(a: Value, w: np.ndarray, za: int, out: Value, params: dict, lanes: int, name: str) -> Node:
    """matmul_integer_vnni(a, w packed, za * column sums of w) -> out, w (K, N) int8."""
    corr = (za * w.astype(np.int64).sum(axis=0)).astype(np.int32)
    bp = pack_b_vnni(np.ascontiguousarray(w), lanes)
    bp_val = Value(f"{name}_w_vnni{lanes}", bp.shape, "int8")
    corr_val = Value(f"{name}_corr", corr.shape, "int32")
    params[bp_val], params[corr_val] = bp, corr
    return Node("matmul_integer_vnni", (a, bp_val, corr_val), (out,), {"units": int(w.shape[1])}, name)


def _rewrite_conv(n: Node, params: dict, lanes: int) -> list | None:
    x, w, zx, zw = (list(n.inputs) + [None] * 4)[:4]
    if x.dtype != "uint8" or x.ndim != 4 or w not in params or w.dtype != "int8" or n.attrs.get("groups", 1) != 1:
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
    cols = Value(f"{n.name}_cols", (batch * oh * ow, int(np.prod(weight.shape[1:]))), "uint8")
    rows = Value(f"{n.name}_rows", (batch * oh * ow, m), "int32")
    nhwc = Value(f"{n.name}_nhwc", (batch, oh, ow, m), "int32")
    attrs = {"kernel": tuple(weight.shape[2:]), "strides": n.attrs.get("strides"), "padding": n.attrs.get("padding"),
             "dilations": n.attrs.get("dilations"), "pad_value": za}
    return [Node("im2col", (x,), (cols,), attrs, f"{n.name}_im2col"),
            _packed_product(cols, weight.reshape(m, -1).T, za, rows, params, lanes, n.name),
            Node("reshape", (rows,), (nhwc,), {"shape": (batch, oh, ow, m)}, f"{n.name}_nhwc"),
            Node("transpose", (nhwc,), (out,), {"perm": (0, 3, 1, 2)}, f"{n.name}_nchw")]
