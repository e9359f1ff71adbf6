"""ONNX Softmax, LogSoftmax, Hardmax -> softmax / log_softmax / hardmax with an `axes` attribute.

Opset >= 13 normalizes along `axis` (default -1): axes=(axis,).  Older opsets (default axis 1)
coerce the input to 2-D at `axis` and normalize each row, i.e. over axes (axis, .., rank-1).
"""
from __future__ import annotations

from ...ops.common import normalize_axis
from ..onnx import converter

_OPS = {"Softmax": "softmax", "LogSoftmax": "log_softmax", "Hardmax": "hardmax"}


def softmax_axes(opset: int, axis: int | None, ndim: int) -> tuple:
    """The axes ONNX normalizes over at this opset."""
    if opset >= 13:
        return (normalize_axis(-1 if axis is None else int(axis), ndim, "Softmax"),)
    first = normalize_axis(1 if axis is None else int(axis), ndim, "Softmax")
    return tuple(range(first, ndim))


@converter("Softmax", "LogSoftmax", "Hardmax")
def softmax(ctx, inputs: list, attrs: dict):
    x = inputs[0]
    if len(x.shape) == 0:
        raise ValueError("the input must have rank >= 1")
    axes = softmax_axes(ctx.opset, attrs.get("axis"), len(x.shape))
    return ctx.add1(_OPS[ctx.op_type], [x], {"axes": axes})
