"""An FX rewrite of the core-ATen graph: nn.Linear on an input of rank 3 or more as one `linear`.

PyTorch's decomposition of `F.linear(x, W, b)` for x [..., K] flattens the rows first:

    view(addmm(b, view(x, [M, K]), permute(W, [1, 0])), [..., N])      (mm without a bias)

Converted node by node that is a reshape, a dense product and a reshape back, and the reshapes
end up inside the product's fused epilogue, which then indexes its output through them.  The
ONNX export of the same layer is one MatMul on x and an Add.  This pass puts back the layer as
`aten.linear(x, W, b)` (converted to one product on x and a bias add), so both paths compile the
same graph.  The old nodes are left dead (conversion skips them).
"""
from __future__ import annotations

from typing import Any

_VIEWS = ("view", "_unsafe_view", "reshape")


def _name(node: Any) -> str:
    schema = getattr(getattr(node, "target", None), "_schema", None)
    return schema.name.split("::")[-1] if schema is not None and node.op == "call_function" else ""


def _shape(node: Any) -> tuple | None:
    val = getattr(node, "meta", {}).get("val")
    return tuple(val.shape) if val is not None and hasattr(val, "shape") else None


def _weight_of(node: Any) -> Any:
    """W when `node` is W^T of a matrix W (permute [1, 0] or t), else None."""
    name = _name(node)
    if name == "t" or (name == "permute" and list(node.args[1]) == [1, 0]):
        return node.args[0]
    return None


def _linear_parts(out: Any) -> tuple | None:
    """(x, W, bias or None) when `out` is the final view of a flattened linear layer."""
    if _name(out) not in _VIEWS:
        return None
    prod = out.args[0]
    if _name(prod) not in ("addmm", "mm") or len(prod.users) != 1 or prod.kwargs:
        return None
    bias, rows, wt = (prod.args[0], prod.args[1], prod.args[2]) if _name(prod) == "addmm" else \
        (None, prod.args[0], prod.args[1])
    if len(prod.args) > (3 if bias is not None else 2):            # beta or alpha given
        return None
    if _name(rows) not in _VIEWS:
        return None
    x, weight = rows.args[0], _weight_of(wt)
    x_shape, w_shape, out_shape = _shape(x), _shape(weight) if weight is not None else None, _shape(out)
    if x_shape is None or w_shape is None or out_shape is None or len(x_shape) < 3 or len(w_shape) != 2:
        return None
    if out_shape != x_shape[:-1] + (w_shape[0],) or w_shape[1] != x_shape[-1]:
        return None
    if bias is not None and _shape(bias) != (w_shape[0],):
        return None
    return x, weight, bias


def fold_flattened_linears(graph: Any) -> int:
    """Rewrite every flattened linear layer of an FX graph of core ATen ops in place; returns
    how many were rewritten."""
    import torch
    count = 0
    for out in list(graph.nodes):
        parts = _linear_parts(out)
        if parts is None:
            continue
        with graph.inserting_before(out):
            linear = graph.call_function(torch.ops.aten.linear.default, parts)
        linear.meta = dict(out.meta)
        out.replace_all_uses_with(linear)
        count += 1
    return count
