"""Shared helpers for op definitions: NumPy-style broadcasting in TE and shape arithmetic."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .. import te
from .registry import OpError


def broadcast_shape(*shapes: Sequence[int], op: str = "op") -> tuple:
    """The NumPy broadcast of the shapes, or OpError naming the op."""
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*[tuple(s) for s in shapes]))
    except ValueError:
        raise OpError(f"{op}: shapes {', '.join(str(tuple(s)) for s in shapes)} do not broadcast") from None


def broadcast_load(t: te.Tensor, out_index: Sequence, out_shape: Sequence[int]):
    """`t` read at `out_index` of a broadcast result of shape `out_shape`."""
    shape = [int(d.value) if hasattr(d, "value") else int(d) for d in t.shape]
    offset = len(out_shape) - len(shape)
    idx = []
    for k, d in enumerate(shape):
        idx.append(0 if d == 1 and out_shape[offset + k] != 1 else out_index[offset + k])
    return t[tuple(idx)] if idx else t[()]


def const_shape(t: te.Tensor) -> tuple:
    return tuple(int(d.value) for d in t.shape)


def round_up(x: int, m: int) -> int:
    """`x` rounded up to a multiple of `m`."""
    return -(-x // m) * m


def normalize_axis(axis: int, ndim: int, op: str = "op") -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise OpError(f"{op}: axis {axis} is out of range for a tensor of rank {ndim}")
    return axis % max(ndim, 1)
