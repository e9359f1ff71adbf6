"""ONNX Resize and Upsample -> tensorforge `resize` (frontend -> Graph).

The converter resolves what the op needs as plain attributes: the full-rank output `sizes`, the
per-axis `scales` of the coordinate transform (from the scales input, or sizes / input shape with
keep_aspect_ratio_policy), and `roi` spread over every axis.  Resize-10 and Upsample (opsets 7-9)
had no coordinate_transformation_mode or nearest_mode: they use "asymmetric" coordinates and the
"legacy" nearest rounding (floor when an axis grows, ceil when it shrinks), as ONNX Runtime does.
"""
from __future__ import annotations

from ...ops.registry import OpError
from ...ops.transform_resize import resize_output
from ..onnx import converter
from .transform_util import const_floats, const_ints, input_at, present

_ATTRS = ("coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a", "exclude_outside",
          "extrapolation_value", "antialias")


def _mode(ctx, attrs: dict) -> str:
    mode = attrs.get("mode", "nearest")
    if mode == "bilinear":          # Upsample-7 spelled linear this way in some exporters
        mode = "linear"
    if mode not in ("nearest", "linear", "cubic"):
        raise OpError(f"{ctx.op_type}: mode {mode!r} is not nearest, linear or cubic")
    return mode


def _full_roi(roi: tuple, rank: int, axes: tuple | None) -> tuple:
    if axes is None:
        if len(roi) != 2 * rank:
            raise OpError(f"resize: roi holds {len(roi)} values, expected 2 * rank = {2 * rank}")
        return roi
    n = len(axes)
    if len(roi) != 2 * n:
        raise OpError(f"resize: roi holds {len(roi)} values, expected 2 * len(axes) = {2 * n}")
    full = [0.0] * rank + [1.0] * rank
    for k, a in enumerate(axes):
        a = a % rank
        full[a], full[rank + a] = roi[k], roi[n + k]
    return tuple(full)


def _legacy(ctx, x, scales: tuple, mode: str):
    sizes, full = resize_output(x.shape, scales=scales)
    return ctx.add1("resize", [x], {"sizes": sizes, "scales": full, "mode": mode,
                                    "coordinate_transformation_mode": "asymmetric", "nearest_mode": "legacy"})


@converter("Upsample")
def convert_upsample(ctx, inputs, attrs):
    mode = _mode(ctx, attrs)
    if ctx.opset < 9:
        if "scales" in attrs:
            scales = tuple(float(s) for s in attrs["scales"])
        else:   # opset 1 had height_scale / width_scale for NCHW
            scales = (1.0, 1.0, float(attrs["height_scale"]), float(attrs["width_scale"]))
    else:
        scales = const_floats(ctx, inputs[1], "Upsample scales")
    return _legacy(ctx, inputs[0], scales, mode)


@converter("Resize", since=10)
def convert_resize(ctx, inputs, attrs):
    x, mode = inputs[0], _mode(ctx, attrs)
    if ctx.opset < 11:
        return _legacy(ctx, x, const_floats(ctx, inputs[1], "Resize scales"), mode)
    roi_v, scales_v, sizes_v = input_at(inputs, 1), input_at(inputs, 2), input_at(inputs, 3)
    axes = tuple(int(a) for a in attrs["axes"]) if attrs.get("axes") else None
    scales = const_floats(ctx, scales_v, "Resize scales") if present(scales_v) else None
    sizes = const_ints(ctx, sizes_v, "Resize sizes") if present(sizes_v) else None
    if scales is not None and sizes is not None:
        raise OpError("resize: give scales or sizes, not both")
    out, full = resize_output(x.shape, scales=scales, sizes=sizes, axes=axes,
                              policy=attrs.get("keep_aspect_ratio_policy", "stretch"))
    node_attrs = {k: attrs[k] for k in _ATTRS if k in attrs}
    node_attrs.update({"sizes": out, "scales": full, "mode": mode})
    ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
    if ctm == "tf_crop_and_resize":
        if not present(roi_v):
            raise OpError("resize: tf_crop_and_resize needs the roi input")
        node_attrs["roi"] = _full_roi(const_floats(ctx, roi_v, "Resize roi"), x.ndim, axes)
    if attrs.get("antialias") and mode == "nearest":
        node_attrs["antialias"] = 0          # antialiasing only changes linear and cubic filters
    return ctx.add1("resize", [x], node_attrs)
