"""Layout ops on string tensors (Reshape, Transpose, Gather, Concat, Slice, Where, ...) on the
host, by moving indices instead of strings.

These ops only move elements: every output element is a copy of one input element.  So a string
tensor is replaced by an int64 tensor of the same shape numbering its elements (several string
inputs, as Concat or Where have, are numbered one after another), the node runs as usual on
those numbers (converted and compiled like any node, so every opset's attributes and inputs
mean what the converter makes of them), and the numbers it returns pick the output strings.
Shape and Size answer with numbers, which are returned as they are.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from . import host_op
from .strings import as_strings

MOVING_OPS = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Gather", "GatherElements",
              "GatherND", "Slice", "Expand", "Tile", "Where")
SHAPE_OPS = ("Shape", "Size")

_GRAPHS: dict[Any, Any] = {}     # one GraphProto per op signature, so its compiled stretches are reused


def _frozen(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    return value


def _node_graph(op_type: str, present: tuple[bool, ...], attrs: dict):
    """A graph holding one `op_type` node whose present inputs are graph inputs i0, i1, ..."""
    key = (op_type, present, tuple(sorted((k, _frozen(v)) for k, v in attrs.items())))
    if key not in _GRAPHS:
        from onnx import TensorProto, helper, numpy_helper
        names = [f"i{k}" if p else "" for k, p in enumerate(present)]
        node_attrs = {k: numpy_helper.from_array(v) if isinstance(v, np.ndarray) else v for k, v in attrs.items()}
        node = helper.make_node(op_type, names, ["out"], **node_attrs)
        inputs = [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in names if n]
        output = helper.make_tensor_value_info("out", TensorProto.UNDEFINED, None)
        _GRAPHS[key] = helper.make_graph([node], f"strings_{op_type.lower()}", inputs, [output])
    return _GRAPHS[key]


@host_op(*MOVING_OPS, *SHAPE_OPS)
def string_layout(ctx, inputs, attrs):
    pools: list[np.ndarray] = []
    values: list = []
    offset = 0
    for v in inputs:
        if isinstance(v, np.ndarray) and v.dtype.kind in "OUS":
            s = as_strings(ctx, v)
            values.append(np.arange(offset, offset + s.size, dtype=np.int64).reshape(s.shape))
            pools.append(s.reshape(-1))
            offset += s.size
        else:
            values.append(v)
    if not pools:
        kinds = sorted({type(v).__name__ for v in inputs if v is not None and not isinstance(v, np.ndarray)})
        raise NotImplementedError(f"node {ctx.node_name} ({ctx.op_type}) reads a value that is not a numeric tensor "
                                  f"({', '.join(kinds) or 'unknown'}); it runs on the host only for string tensors")
    graph = _node_graph(ctx.op_type, tuple(v is not None for v in inputs), attrs)
    out = np.asarray(ctx.run_graph(graph, [v for v in values if v is not None])[0])
    if ctx.op_type in SHAPE_OPS:
        return [out]
    pool = np.concatenate(pools)
    picked = np.empty(out.shape, dtype=object)
    picked.reshape(-1)[:] = pool[out.reshape(-1)] if out.size else []
    return [picked]
