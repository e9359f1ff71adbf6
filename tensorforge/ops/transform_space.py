"""Moving data between channels and space on NCHW tensors: depth_to_space (DCR and CRD orders)
and space_to_depth.  Injective.

depth_to_space with block b turns (N, C*b*b, H, W) into (N, C, H*b, W*b); output (n, c, y, x)
reads channel  ((y % b) * b + x % b) * C + c   (DCR: depth, column, row)
          or   c * b * b + (y % b) * b + x % b  (CRD: column, row, depth)
at (y // b, x // b).  space_to_depth is the inverse, in either order.

depth_to_space in DCR order also takes blocked data, NCHW[k]c (5-D: N, C*b*b/k, H, W, k; written
by alter_layout_propagate where C is whole blocks of k): output block (n, cb, y, x) is input
block  ((y % b) * b + x % b) * C/k + cb  at (y // b, x // b), the k lanes copied whole.
"""
from __future__ import annotations

import numpy as np

from .. import te
from .common import const_shape
from .registry import INJECTIVE, OpError, TensorType, op


def _check(shape: tuple, blocksize: int, op_name: str) -> None:
    if len(shape) != 4:
        raise OpError(f"{op_name}: input must be 4-D (N, C, H, W), got shape {tuple(shape)}")
    if int(blocksize) < 1:
        raise OpError(f"{op_name}: blocksize must be >= 1, got {blocksize}")


def depth_to_space_shape(shape: tuple, blocksize: int, mode: str) -> tuple:
    if len(shape) == 5 and mode == "DCR":      # NCHW[k]c
        n, c, h, w, k = shape
        _check((n, c, h, w), blocksize, "depth_to_space")
        return (*depth_to_space_shape((n, c, h, w), blocksize, mode), k)
    _check(shape, blocksize, "depth_to_space")
    if mode not in ("DCR", "CRD"):
        raise OpError(f"depth_to_space: mode must be DCR or CRD, got {mode!r}")
    n, c, h, w = shape
    b = int(blocksize)
    if c % (b * b):
        raise OpError(f"depth_to_space: channels {c} are not divisible by blocksize^2 = {b * b}")
    return (n, c // (b * b), h * b, w * b)


def space_to_depth_shape(shape: tuple, blocksize: int, mode: str = "DCR") -> tuple:
    _check(shape, blocksize, "space_to_depth")
    if mode not in ("DCR", "CRD"):
        raise OpError(f"space_to_depth: mode must be DCR or CRD, got {mode!r}")
    n, c, h, w = shape
    b = int(blocksize)
    if h % b or w % b:
        raise OpError(f"space_to_depth: height {h} and width {w} must be divisible by blocksize {b}")
    return (n, c * b * b, h // b, w // b)


@op("depth_to_space", pattern=INJECTIVE, attr_defaults={"mode": "DCR"}, narrow=True)
class depth_to_space:
    def infer(x: TensorType, blocksize: int, mode: str = "DCR") -> TensorType:
        return TensorType(depth_to_space_shape(tuple(x.shape), blocksize, mode), x.dtype)

    def compute(x: te.Tensor, blocksize: int, mode: str = "DCR") -> te.Tensor:
        out_shape = depth_to_space_shape(const_shape(x), blocksize, mode)
        b, c_out = int(blocksize), out_shape[1]

        def source(n, c, y, xx) -> tuple:
            block = (y % b) * b + xx % b
            channel = block * c_out + c if mode == "DCR" else c * (b * b) + block
            return (n, channel, y // b, xx // b)

        if len(out_shape) == 5:
            return te.compute(out_shape, lambda n, c, y, xx, lane: x[(*source(n, c, y, xx), lane)],
                              name="depth_to_space", tag="depth_to_space")
        return te.compute(out_shape, lambda n, c, y, xx: x[source(n, c, y, xx)], name="depth_to_space",
                          tag="depth_to_space")

    def reference(x: np.ndarray, blocksize: int, mode: str = "DCR") -> np.ndarray:
        b = int(blocksize)
        if x.ndim == 5:
            n, c, h, w, k = depth_to_space_shape(x.shape, blocksize, mode)
            t = x.reshape(n, b, b, c, h // b, w // b, k).transpose(0, 3, 4, 1, 5, 2, 6)
            return t.reshape(n, c, h, w, k)
        n, c, h, w = depth_to_space_shape(x.shape, blocksize, mode)
        if mode == "DCR":
            t = x.reshape(n, b, b, c, h // b, w // b).transpose(0, 3, 4, 1, 5, 2)
        else:
            t = x.reshape(n, c, b, b, h // b, w // b).transpose(0, 1, 4, 2, 5, 3)
        return t.reshape(n, c, h, w)


@op("space_to_depth", pattern=INJECTIVE, attr_defaults={"mode": "DCR"}, narrow=True)
class space_to_depth:
    """The inverse of depth_to_space in the same mode."""

    def infer(x: TensorType, blocksize: int, mode: str = "DCR") -> TensorType:
        return TensorType(space_to_depth_shape(tuple(x.shape), blocksize, mode), x.dtype)

    def compute(x: te.Tensor, blocksize: int, mode: str = "DCR") -> te.Tensor:
        in_shape = const_shape(x)
        out_shape = space_to_depth_shape(in_shape, blocksize, mode)
        b, c_in = int(blocksize), in_shape[1]

        def f(n, c, y, xx):
            if mode == "DCR":
                block, channel = c // c_in, c % c_in
            else:
                block, channel = c % (b * b), c // (b * b)
            return x[n, channel, y * b + block // b, xx * b + block % b]

        return te.compute(out_shape, f, name="space_to_depth", tag="space_to_depth")

    def reference(x: np.ndarray, blocksize: int, mode: str = "DCR") -> np.ndarray:
        n, c, h, w = x.shape
        out = space_to_depth_shape(x.shape, blocksize, mode)
        b = int(blocksize)
        perm = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
        return x.reshape(n, c, h // b, b, w // b, b).transpose(perm).reshape(out)
