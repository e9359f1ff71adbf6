"""Masked updates in an exported graph without the selection they are written with.

`x[mask] += 1`, `x[mask] = y[mask] * 2` and `x[mask] = 0.5 * x[mask]` export as an `index_put`
whose values are computed from `index(t, [mask])`: the selected elements, whose count only the
data gives.  When the values are element-wise functions of such selections (with the same mask)
and of tensors that broadcast over the selected positions, selecting commutes with computing:
the graph computes the function on the whole tensors and keeps it where the mask is set,

    index_put(x, [mask], f(index(y, [mask]), c))  ->  where(mask, f(y, c), x)
    (accumulate=True: where(mask, x + f(y, c), x))

so no size depends on the data and the graph stays static.  Element-wise ops are those PyTorch
tags `pointwise`.  Other values (one per selected position from elsewhere) keep the
`index_put`, which the converters refuse with a message.
"""
from __future__ import annotations

from typing import Any


def fold_masked_updates(graph: Any) -> int:
    """Rewrite the graph's masked index_puts as above; the number rewritten."""
    import torch

    from .torch_convert import shape_exprs
    aten = torch.ops.aten
    done = 0
    for n in list(graph.nodes):
        if n.op != "call_function" or n.target is not aten.index_put.default:
            continue
        x, indices, values = n.args[:3]
        accumulate = n.args[3] if len(n.args) > 3 else n.kwargs.get("accumulate", False)
        if len(indices) != 1 or not hasattr(indices[0], "meta") or _val(indices[0]).dtype != torch.bool:
            continue
        mask = indices[0]
        rest = _val(x).dim() - _val(mask).dim()
        with graph.inserting_before(n):
            full = _unselect(graph, values, mask, rest, {})
            if full is None or _val(full).dtype != _val(x).dtype or shape_exprs(full) != shape_exprs(x):
                continue
            cond = mask
            for _ in range(rest):
                cond = _call(graph, aten.unsqueeze.default, cond, -1)
            if accumulate:
                full = _call(graph, aten.add.Tensor, x, full)
            new = _call(graph, aten.where.self, cond, full, x)
        n.replace_all_uses_with(new)
        graph.erase_node(n)
        done += 1
    return done


def _val(n: Any) -> Any:
    return n.meta["val"]


def _call(graph: Any, target: Any, *args: Any) -> Any:
    """A new node calling `target` on `args`, with the value PyTorch's fake tensors give it."""
    from torch._guards import detect_fake_mode
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.fx import Node
    fake = [a.meta["val"] for a in args if isinstance(a, Node)]
    # the mode of the graph's own values: under torch.compile, detect_fake_mode would give
    # dynamo's (its tracing context), which the values of the backend's own trace are not from
    mode = next((v.fake_mode for v in fake if isinstance(v, FakeTensor)), None) or detect_fake_mode(fake)
    with mode:
        val = target(*[a.meta["val"] if isinstance(a, Node) else a for a in args])
    node = graph.call_function(target, tuple(args))
    node.meta["val"] = val
    return node


def _is_one(size: Any) -> bool:
    """Whether a size is 1, without a guard on a symbolic one (the count of a selection)."""
    return isinstance(size, int) and size == 1


def _unselect(graph: Any, v: Any, mask: Any, rest: int, memo: dict) -> Any:
    """A node computing on whole tensors what `v` computes on the elements `mask` selects, or None."""
    import torch
    from torch.fx import Node
    if v in memo:
        return memo[v]
    memo[v] = None
    if not isinstance(v, Node) or v.op != "call_function":
        return None
    if v.target is torch.ops.aten.index.Tensor:
        t, indices = v.args
        found = t if len(indices) == 1 and indices[0] is mask else None
        memo[v] = found
        return found
    if torch.Tag.pointwise not in getattr(v.target, "tags", ()) or v.kwargs or _val(v).dim() != rest + 1:
        return None                          # a value without the selection's axis broadcasts as it is
    selected = rest + 1                      # the count's axis, then the `rest` axes of each row
    args = []
    for a in v.args:
        if isinstance(a, Node):
            whole = _unselect(graph, a, mask, rest, memo)
            if whole is None:
                shape = tuple(_val(a).shape) if hasattr(_val(a), "shape") else None
                # a tensor that broadcasts over the selected positions broadcasts over the mask's axes
                # (a size only the data gives, the selection's own count, is not 1: no guard on it)
                if shape is None or len(shape) > selected or (len(shape) == selected and not _is_one(shape[0])):
                    return None
                whole = a
            args.append(whole)
        elif isinstance(a, (list, tuple)) and any(isinstance(b, Node) for b in a):
            return None
        else:
            args.append(a)
    found = _call(graph, v.target, *args)
    memo[v] = found
    return found
