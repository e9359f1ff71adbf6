"""ONNX AffineGrid (opset 20) -> a constant base grid times theta (frontend -> Graph).

For output size (N, C, H, W) the base grid holds, per pixel, its normalized position and a 1:
(x_w, y_h, 1), with x_w = -1 + (2w + 1) / W (pixel centres; align_corners=0) or -1 + 2w / (W - 1)
(end pixels at -1 and 1; align_corners=1).  A length-1 axis with align_corners=1 sits at 0, as
in PyTorch's affine_grid, which the ONNX specification cites, and ONNX Runtime (the ONNX function
body divides by zero there).  The grid is
theta[n] @ (x, y, 1) for every pixel, (N, H, W, 2); the 3-D form uses (x, y, z, 1), theta
(N, 3, 4) and gives (N, D, H, W, 3).  One batched matmul against the constant base does it.
"""
from __future__ import annotations

import numpy as np

from ..onnx import converter
from .transform_util import const_ints


def _positions(length: int, align_corners: bool) -> np.ndarray:
    i = np.arange(length, dtype=np.float64)
    if align_corners:
        return np.zeros(1) if length == 1 else -1.0 + 2.0 * i / (length - 1)
    return -1.0 + (2.0 * i + 1.0) / length


def base_grid(spatial: tuple, align_corners: bool) -> np.ndarray:
    """(prod(spatial), r + 1): per pixel, in row-major order, (x, y[, z], 1) (innermost axis first)."""
    axes = np.meshgrid(*[_positions(n, align_corners) for n in spatial], indexing="ij")
    coords = [a.reshape(-1) for a in reversed(axes)]
    return np.stack(coords + [np.ones_like(coords[0])], axis=1)


@converter("AffineGrid", since=20)
def affine_grid(ctx, inputs: list, attrs: dict):
    theta = inputs[0]
    size = const_ints(ctx, inputs[1], "AffineGrid size")
    if len(size) not in (4, 5):
        raise ValueError(f"size {size} must be (N, C, H, W) or (N, C, D, H, W)")
    r = len(size) - 2
    if tuple(theta.shape) != (size[0], r, r + 1):
        raise ValueError(f"theta has shape {tuple(theta.shape)}; for size {size} it must be ({size[0]}, {r}, {r + 1})")
    spatial = tuple(size[2:])
    base = ctx.const(base_grid(spatial, bool(int(attrs.get("align_corners", 0)))).astype(theta.dtype))
    grid = ctx.add1("matmul", [base, theta], {"transpose_b": True})            # (N, prod(spatial), r)
    return ctx.add1("reshape", [grid], {"shape": (size[0],) + spatial + (r,)})
