"""roi_align (ONNX RoiAlign): average or max pooled, bilinearly sampled features of regions of
interest.

OPAQUE: the number of samples per bin follows each region's size, a run-time value, so the
computation has no static loop extent; the executor runs the NumPy kernel of
runtime/host_kernels.py (its comment block gives the algorithm), which is also the reference.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..runtime import host_kernels
from .registry import OPAQUE, OpError, TensorType, op

_FLOATS = ("float16", "bfloat16", "float32", "float64")
MODES = ("avg", "max")
TRANSFORMS = ("half_pixel", "output_half_pixel")


def _check(x: TensorType, rois: TensorType, batch: TensorType, a: dict) -> tuple:
    if len(x.shape) != 4 or x.dtype not in _FLOATS:
        raise OpError(f"roi_align: X has shape {tuple(x.shape)} and dtype {x.dtype}; it must be a floating "
                      "point (N, C, H, W)")
    if len(rois.shape) != 2 or rois.shape[1] != 4 or rois.dtype != x.dtype:
        raise OpError(f"roi_align: rois has shape {tuple(rois.shape)} and dtype {rois.dtype}; it must be "
                      f"(num_rois, 4) in {x.dtype}")
    if tuple(batch.shape) != (rois.shape[0],) or not batch.dtype.startswith("int"):
        raise OpError(f"roi_align: batch_indices has shape {tuple(batch.shape)} and dtype {batch.dtype}; it "
                      f"must be ({rois.shape[0]},) integers, one per region")
    if a["mode"] not in MODES:
        raise OpError(f"roi_align: mode {a['mode']!r} must be one of {', '.join(MODES)}")
    if a["coordinate_transformation_mode"] not in TRANSFORMS:
        raise OpError(f"roi_align: coordinate_transformation_mode {a['coordinate_transformation_mode']!r} "
                      f"must be one of {', '.join(TRANSFORMS)}")
    if int(a["output_height"]) < 1 or int(a["output_width"]) < 1 or int(a["sampling_ratio"]) < 0:
        raise OpError("roi_align: output_height and output_width must be >= 1 and sampling_ratio >= 0")
    return (rois.shape[0], x.shape[1], int(a["output_height"]), int(a["output_width"]))


@op("roi_align", pattern=OPAQUE,
    attr_defaults={"mode": "avg", "output_height": 1, "output_width": 1, "sampling_ratio": 0,
                   "spatial_scale": 1.0, "coordinate_transformation_mode": "half_pixel"})
class roi_align:
    def infer(x: TensorType, rois: TensorType, batch_indices: TensorType, **a: Any) -> TensorType:
        return TensorType(_check(x, rois, batch_indices, a), x.dtype)

    def reference(x: np.ndarray, rois: np.ndarray, batch_indices: np.ndarray, **a: Any) -> np.ndarray:
        _check(TensorType(x.shape, x.dtype.name), TensorType(rois.shape, rois.dtype.name),
               TensorType(batch_indices.shape, batch_indices.dtype.name), a)
        return host_kernels.roi_align(x, rois, batch_indices, **a)
