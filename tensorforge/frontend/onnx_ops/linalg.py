"""ONNX Det (opset 11) -> tensorforge `det` (frontend -> Graph)."""
from __future__ import annotations

from ..onnx import converter


@converter("Det", since=11)
def det(ctx, inputs: list, attrs: dict):
    return ctx.add1("det", [inputs[0]])
