"""Joining and repeating along axes: concat, split, tile.  All injective.

concat selects, per output index along the axis, the input whose range holds it (a balanced
tree of if_then_else on the range starts, so an element of a concat of n inputs costs about
log2(n) comparisons, not up to n: an LSTM's output joins one value per time step); split is one compute per output that reads
its slice; tile reads `x[i % d]` on every repeated axis.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .. import te
from .common import const_shape, normalize_axis, shape_of
from .index_math import check_int_tuple
from .registry import INJECTIVE, OpError, TensorType, op


# -- concat -------------------------------------------------------------------------------------
def concat_shape(shapes: Sequence[Sequence[int]], dtypes: Sequence[str], axis: int) -> tuple:
    """(normalized axis, output shape); OpError naming the first input that does not fit."""
    if not shapes:
        raise OpError("concat: needs at least one input")
    ndim = len(shapes[0])
    if ndim == 0:
        raise OpError("concat: inputs must have rank >= 1, got scalars")
    axis = normalize_axis(axis, ndim, "concat")
    first = tuple(shapes[0])
    for k, (s, t) in enumerate(zip(shapes, dtypes)):
        if t != dtypes[0]:
            raise OpError(f"concat: input {k} has dtype {t}, input 0 has {dtypes[0]}")
        if len(s) != ndim or any(a != b for d, (a, b) in enumerate(zip(s, first)) if d != axis):
            raise OpError(f"concat: input {k} has shape {tuple(s)}, which does not match input 0 "
                          f"{first} outside axis {axis}")
    out = list(first)
    out[axis] = _total([s[axis] for s in shapes])
    return axis, tuple(out)


def _total(sizes: Sequence):
    """The sum of `sizes`: an int, or a shape expression where one varies (shape_generic.py)."""
    if all(isinstance(d, (int, np.integer)) for d in sizes):
        return sum(int(d) for d in sizes)
    total = None
    for d in sizes:
        total = d if total is None else total + d
    return total


@op("concat", pattern=INJECTIVE, attr_defaults={"axis": 0}, narrow=True)
class concat:
    def infer(*xs: TensorType, axis: int = 0) -> TensorType:
        _, shape = concat_shape([x.shape for x in xs], [x.dtype for x in xs], axis)
        return TensorType(shape, xs[0].dtype)

    def compute(*xs: te.Tensor, axis: int = 0) -> te.Tensor:
        shapes = [shape_of(x) for x in xs]
        axis, out_shape = concat_shape(shapes, [x.dtype for x in xs], axis)
        offsets = [_total([s[axis] for s in shapes[:k]]) for k in range(len(shapes))]
        parts = [(x, offsets[k]) for k, x in enumerate(xs)
                 if not (isinstance(shapes[k][axis], int) and shapes[k][axis] == 0)] or [(xs[0], 0)]

        def load(x: te.Tensor, start: int, idx: tuple):
            return x[idx[:axis] + (idx[axis] - start,) + idx[axis + 1:]]

        def pick(idx: tuple, lo: int, hi: int):
            """The element from parts[lo:hi]."""
            if hi - lo == 1:
                return load(*parts[lo], idx)
            mid = (lo + hi) // 2
            return te.if_then_else(idx[axis] < parts[mid][1], pick(idx, lo, mid), pick(idx, mid, hi))

        def f(*idx):
            return pick(idx, 0, len(parts))

        return te.compute(out_shape, f, name="concat", tag="concat")

    def reference(*xs: np.ndarray, axis: int = 0) -> np.ndarray:
        axis, _ = concat_shape([x.shape for x in xs], [x.dtype.name for x in xs], axis)
        return np.concatenate(xs, axis=axis)


# -- split --------------------------------------------------------------------------------------
def split_sizes(shape: Sequence[int], axis: int, sizes: Sequence[int]) -> tuple[int, tuple]:
    axis = normalize_axis(axis, len(shape), "split")
    sizes = check_int_tuple(sizes, "split", "sizes")
    if not sizes or any(s < 0 for s in sizes) or sum(sizes) != shape[axis]:
        raise OpError(f"split: sizes {sizes} must be non-negative and add up to the size "
                      f"{shape[axis]} of axis {axis} (input shape {tuple(shape)})")
    return axis, sizes


def equal_split(dim: int, parts: int) -> tuple:
    """ONNX's split into `parts` pieces: ceil(dim / parts) each, the last one smaller."""
    if parts < 1:
        raise OpError(f"split: the number of outputs must be >= 1, got {parts}")
    chunk = -(-dim // parts)
    sizes = [min(chunk, max(dim - k * chunk, 0)) for k in range(parts)]
    return tuple(sizes)


@op("split", pattern=INJECTIVE, attr_defaults={"axis": 0}, narrow=True)
class split:
    """Cut `x` along `axis` into pieces of the given sizes (one output per size)."""

    def infer(x: TensorType, sizes: Sequence[int], axis: int = 0) -> tuple:
        axis, sizes = split_sizes(x.shape, axis, sizes)
        shape = list(x.shape)
        outs = []
        for s in sizes:
            shape[axis] = s
            outs.append(TensorType(tuple(shape), x.dtype))
        return tuple(outs)

    def compute(x: te.Tensor, sizes: Sequence[int], axis: int = 0) -> tuple:
        shape = const_shape(x)
        axis, sizes = split_sizes(shape, axis, sizes)
        outs, start = [], 0
        for k, s in enumerate(sizes):
            out_shape = shape[:axis] + (s,) + shape[axis + 1:]

            def f(*i, start=start):
                return x[i[:axis] + (i[axis] + start,) + i[axis + 1:]]

            outs.append(te.compute(out_shape, f, name=f"split{k}", tag="split"))
            start += s
        return tuple(outs)

    def reference(x: np.ndarray, sizes: Sequence[int], axis: int = 0) -> tuple:
        axis, sizes = split_sizes(x.shape, axis, sizes)
        return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=axis))


# -- tile ---------------------------------------------------------------------------------------
def tile_shape(shape: Sequence[int], repeats: Sequence[int]) -> tuple:
    repeats = check_int_tuple(repeats, "tile", "repeats")
    if len(repeats) != len(shape) or any(r < 0 for r in repeats):
        raise OpError(f"tile: repeats {repeats} must hold one non-negative count per axis of the "
                      f"input shape {tuple(shape)}")
    return tuple(int(d) * r for d, r in zip(shape, repeats))


@op("tile", pattern=INJECTIVE, narrow=True)
class tile:
    def infer(x: TensorType, repeats: Sequence[int]) -> TensorType:
        return TensorType(tile_shape(x.shape, repeats), x.dtype)

    def compute(x: te.Tensor, repeats: Sequence[int]) -> te.Tensor:
        shape = const_shape(x)
        out_shape = tile_shape(shape, repeats)
        return te.compute(out_shape,
                          lambda *i: x[tuple(j if r == 1 or d == 0 else j % d for j, d, r in zip(i, shape, repeats))],
                          name="tile", tag="tile")

    def reference(x: np.ndarray, repeats: Sequence[int]) -> np.ndarray:
        tile_shape(x.shape, repeats)
        return np.tile(x, tuple(repeats)) if x.ndim else x.copy()
