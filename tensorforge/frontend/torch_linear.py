"""An FX rewrite of the core-ATen graph: nn.Linear on an input of rank 3 or more as one `linear`,
and torch.matmul of two operands of rank 4 or more as one `matmul`.

PyTorch's decomposition of `F.linear(x, W, b)` for x [..., K] flattens the rows first:

    view(addmm(b, view(x, [M, K]), permute(W, [1, 0])), [..., N])      (mm without a bias)

(after functionalization: view_copy and permute_copy, maybe a clone of W^T).
Converted node by node that is a reshape, a dense product and a reshape back, and the reshapes
end up inside the product's fused epilogue, which then indexes its output through them.  The
ONNX export of the same layer is one MatMul on x and an Add.  This pass puts back the layer as
`aten.linear(x, W, b)` (converted to one product on x and a bias add), so both paths compile the
same graph.  torch.matmul of [..., M, K] and [..., K, N] operands (attention's q k^T) is
likewise view(bmm(view(expand(a)), view(expand(b)))), and becomes one batched `matmul` on a and
b.  The old nodes are left dead (conversion skips them).
"""
from __future__ import annotations

from typing import Any

# functionalization turns views into their _copy forms; a clone of W^T is still W^T
_VIEWS = ("view", "_unsafe_view", "reshape", "view_copy")
_COPIES = ("clone", "alias", "alias_copy", "contiguous")


def _name(node: Any) -> str:
    schema = getattr(getattr(node, "target", None), "_schema", None)
    return schema.name.split("::")[-1] if schema is not None and node.op == "call_function" else ""


def _shape(node: Any) -> tuple | None:
    """A node's shape as expressions: the comparisons below are structural (torch_convert.shape_exprs)."""
    from .torch_convert import shape_exprs
    return shape_exprs(node)


def _weight_of(node: Any) -> Any:
    """W when `node` is W^T of a matrix W (permute [1, 0] or t, maybe copied), else None."""
    while _name(node) in _COPIES:
        node = node.args[0]
    name = _name(node)
    if name in ("t", "t_copy") or (name in ("permute", "permute_copy") and list(node.args[1]) == [1, 0]):
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


def _unexpanded(node: Any) -> Any:
    """x when `node` is view(expand(x)) with an expand that changes no size, else None."""
    if _name(node) not in _VIEWS:
        return None
    expand = node.args[0]
    if _name(expand) not in ("expand", "expand_copy"):
        return None
    x = expand.args[0]
    return x if _shape(x) is not None and _shape(x) == _shape(expand) else None


def _matmul_parts(out: Any) -> tuple | None:
    """(a, b) when `out` is the final view of torch.matmul on two operands of rank 4 or more with
    the same batch sizes, which PyTorch computes as view(bmm(view(a), view(b)))."""
    if _name(out) not in _VIEWS:
        return None
    prod = out.args[0]
    if _name(prod) != "bmm" or len(prod.users) != 1:
        return None
    a, b = _unexpanded(prod.args[0]), _unexpanded(prod.args[1])
    if a is None or b is None:
        return None
    a_shape, b_shape, out_shape = _shape(a), _shape(b), _shape(out)
    if a_shape is None or b_shape is None or len(a_shape) < 4 or len(b_shape) != len(a_shape):
        return None
    if a_shape[:-2] != b_shape[:-2] or out_shape != a_shape[:-1] + (b_shape[-1],):
        return None
    return a, b


def fold_flattened_linears(graph: Any) -> int:
    """Rewrite every flattened linear layer and batched matmul of an FX graph of core ATen ops
    in place; returns how many were rewritten."""
    import torch
    count = 0
    for out in list(graph.nodes):
        parts = _linear_parts(out)
        target = torch.ops.aten.linear.default
        if parts is None:
            parts, target = _matmul_parts(out), torch.ops.aten.matmul.default
        if parts is None:
            continue
        with graph.inserting_before(out):
            node = graph.call_function(target, parts)
        node.meta = dict(out.meta)
        out.replace_all_uses_with(node)
        count += 1
    return count
