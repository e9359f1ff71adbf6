"""ONNX GridSample -> tensorforge `grid_sample` (frontend -> Graph).

GridSample-16 samples 4-D input only and names its modes bilinear / nearest / bicubic; from
opset 20 the input may have any number of spatial axes and the modes are linear / nearest /
cubic.  The op itself is N-D; the converter checks each opset's names and ranks.
"""
from __future__ import annotations

from ..onnx import converter

_OPSET16_MODES = {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic"}
_OPSET20_MODES = {"linear": "linear", "nearest": "nearest", "cubic": "cubic"}


def _text(value, default: str) -> str:
    if value is None:
        return default
    return value.decode() if isinstance(value, bytes) else str(value)


@converter("GridSample", since=16)
def grid_sample(ctx, inputs: list, attrs: dict):
    x, grid = inputs[0], inputs[1]
    modes, default = (_OPSET16_MODES, "bilinear") if ctx.opset < 20 else (_OPSET20_MODES, "linear")
    mode = _text(attrs.get("mode"), default)
    if mode not in modes:
        raise ValueError(f"mode {mode!r} is not a GridSample-{ctx.opset} mode; use one of {', '.join(modes)}")
    if ctx.opset < 20 and len(x.shape) != 4:
        raise ValueError(f"X has shape {tuple(x.shape)}; GridSample before opset 20 takes 4-D input only")
    return ctx.add1("grid_sample", [x, grid], {"mode": modes[mode],
                                               "padding_mode": _text(attrs.get("padding_mode"), "zeros"),
                                               "align_corners": int(attrs.get("align_corners", 0))})
