"""Shared helpers for op definitions: NumPy-style broadcasting in TE and shape arithmetic."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .. import te
from ..arith.structural import structural_equal
from ..ir.expr import IntImm
from .registry import OpError


def broadcast_shape(*shapes: Sequence, op: str = "op") -> tuple:
    """The NumPy broadcast of the shapes, or OpError naming the op.  A dimension may also be a
    shape expression (a kernel over shapes that vary, shape_generic.py): it is never taken for
    1, so it broadcasts with 1 and with the same expression only."""
    if all(isinstance(d, (int, np.integer)) or isinstance(d, IntImm) for s in shapes for d in s):
        try:
            return tuple(int(d) for d in np.broadcast_shapes(*[tuple(int(d) for d in s) for s in shapes]))
        except ValueError:
            raise OpError(f"{op}: shapes {', '.join(str(tuple(s)) for s in shapes)} do not broadcast") from None
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(rank):
        dims = [_dim(s[len(s) - rank + k]) for s in shapes if len(s) - rank + k >= 0]
        sized = [d for d in dims if not (isinstance(d, int) and d == 1)]
        if not sized:
            out.append(1)
            continue
        first = sized[0]
        if any(not same_dim(first, d) for d in sized[1:]):
            raise OpError(f"{op}: shapes {', '.join(str(tuple(s)) for s in shapes)} do not broadcast")
        out.append(first)
    return tuple(out)


def _dim(d):
    """An int for a constant dimension, else the shape expression."""
    if isinstance(d, IntImm):
        return int(d.value)
    return int(d) if isinstance(d, (int, np.integer)) else d


def same_dim(a, b) -> bool:
    """Whether two dimensions are equal: equal ints, or shape expressions that are the same or
    provably equal (n + n and n * 2); an int never equals an expression."""
    a, b = _dim(a), _dim(b)
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    if structural_equal(a, b):
        return True
    from ..arith import Analyzer
    diff = Analyzer().simplify(a - b)
    return isinstance(diff, IntImm) and diff.value == 0


def shape_of(t: te.Tensor) -> tuple:
    """`t`'s shape: ints for constant dimensions, shape expressions for the others."""
    return tuple(_dim(d) for d in t.shape)


def element_count(dims: Sequence):
    """The product of `dims`: an int when all are constant, else a shape expression."""
    total, exprs = 1, []
    for d in dims:
        d = _dim(d)
        if isinstance(d, int):
            total *= d
        else:
            exprs.append(d)
    if not exprs:
        return total
    out = exprs[0]
    for e in exprs[1:]:
        out = out * e
    return out * total if total != 1 else out


def broadcast_load(t: te.Tensor, out_index: Sequence, out_shape: Sequence):
    """`t` read at `out_index` of a broadcast result of shape `out_shape`."""
    shape = shape_of(t)
    offset = len(out_shape) - len(shape)
    idx = []
    for k, d in enumerate(shape):
        one = isinstance(d, int) and d == 1
        out_one = isinstance(out_shape[offset + k], int) and out_shape[offset + k] == 1
        idx.append(0 if one and not out_one else out_index[offset + k])
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
