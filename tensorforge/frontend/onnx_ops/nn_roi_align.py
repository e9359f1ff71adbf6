"""ONNX RoiAlign (opsets 10, 16) -> tensorforge `roi_align` (frontend -> Graph).

Opset 16 added coordinate_transformation_mode, default half_pixel (pixel centres, coordinates
shifted by -0.5); opset 10's behaviour is output_half_pixel (no shift, regions at least 1 pixel).
"""
from __future__ import annotations

from ..onnx import converter


def _text(value, default: str) -> str:
    if value is None:
        return default
    return value.decode() if isinstance(value, bytes) else str(value)


@converter("RoiAlign", since=10)
def roi_align(ctx, inputs: list, attrs: dict):
    ctm = "output_half_pixel" if ctx.opset < 16 else _text(attrs.get("coordinate_transformation_mode"),
                                                           "half_pixel")
    return ctx.add1("roi_align", inputs[:3], {
        "mode": _text(attrs.get("mode"), "avg"), "output_height": int(attrs.get("output_height", 1)),
        "output_width": int(attrs.get("output_width", 1)), "sampling_ratio": int(attrs.get("sampling_ratio", 0)),
        "spatial_scale": float(attrs.get("spatial_scale", 1.0)), "coordinate_transformation_mode": ctm})
