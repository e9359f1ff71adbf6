"""From element grids to instructions: 2-D DMA patterns and folded micro-op loops.

Both are the pattern detection of VTA's passes (ACCEL.md 4.3 and 4.7), done on the values of the
indices over a statement's whole loop grid instead of on their symbolic form:

- `dma_patterns(dram, shape, sram_base, ...)`: `dram[e]` is the DRAM element that SRAM element
  `sram_base + e` receives (or sends), -1 where it is padding; `shape` is the element grid in
  loop order.  The result is as few LOAD/STORE patterns as possible: one when the grid is rows
  of consecutive DRAM elements with a constant row stride and zero borders of at most 15
  (the pad fields), otherwise one per slice of the outermost dimension, recursively.
- `fold_uops(fields)`: the micro-op fields (dst, src, wgt) over a grid; the two outermost
  dimensions whose fields are affine in their index become the GEMM/ALU instruction's
  (iter_out, iter_in) loops with their factors, the rest is the list of micro-ops.
Invariant: the instructions touch exactly the given elements, in the given correspondence.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .config import PAD_BITS


@dataclass(frozen=True)
class Dma2D:
    """One LOAD/STORE: `y_size` rows of `x_size` DRAM elements at dram_base + y * x_stride,
    into the SRAM block at sram_base with zero borders (pads)."""

    sram_base: int
    dram_base: int
    y_size: int
    x_size: int
    x_stride: int
    y_pad_0: int = 0
    y_pad_1: int = 0
    x_pad_0: int = 0
    x_pad_1: int = 0


def dma_patterns(dram: np.ndarray, shape: tuple[int, ...], sram_base: int,
                 allow_pad: bool) -> list[Dma2D] | None:
    """The patterns that move `dram` (see the module doc), or None when padding cannot be
    expressed (a slice that is all padding, or padding where `allow_pad` is False)."""
    dram = np.asarray(dram, np.int64).reshape(-1)
    shape = tuple(int(d) for d in shape if d > 1) or (1,)
    width = 1
    for dim in reversed(shape):           # row widths: products of the innermost dimensions
        width *= dim
        one = _single(dram, width, sram_base, allow_pad)
        if one is not None:
            return [one]
    if len(shape) == 1:
        if shape[0] == 1 or (dram < 0).any():
            return None
        return [Dma2D(sram_base + e, int(d), 1, 1, 1) for e, d in enumerate(dram)]
    step = int(np.prod(shape[1:]))
    out: list[Dma2D] = []
    for i in range(shape[0]):
        part = dma_patterns(dram[i * step:(i + 1) * step], shape[1:], sram_base + i * step, allow_pad)
        if part is None:
            return None
        out += part
    return out


def _single(dram: np.ndarray, width: int, sram_base: int, allow_pad: bool) -> Dma2D | None:
    rows = dram.size // width
    g = dram.reshape(rows, width)
    valid = g >= 0
    valid_rows = np.flatnonzero(valid.any(axis=1))
    if valid_rows.size == 0:
        return None
    y0, y1 = int(valid_rows[0]), int(valid_rows[-1])
    cols = np.flatnonzero(valid[y0])
    x0, x1 = int(cols[0]), int(cols[-1])
    block = valid[y0:y1 + 1]
    expect = np.zeros(width, bool)
    expect[x0:x1 + 1] = True
    if not (block == expect).all():
        return None
    pads = (y0, rows - 1 - y1, x0, width - 1 - x1)
    if any(pads) and not allow_pad:
        return None
    if max(pads) >= (1 << PAD_BITS):
        return None
    vals = g[y0:y1 + 1, x0:x1 + 1]
    x_size, y_size = vals.shape[1], vals.shape[0]
    if not (vals - vals[:, :1] == np.arange(x_size)).all():
        return None
    stride = int(vals[1, 0] - vals[0, 0]) if y_size > 1 else x_size
    if stride < 0 or not (vals[:, 0] == vals[0, 0] + stride * np.arange(y_size)).all():
        return None
    return Dma2D(sram_base, int(vals[0, 0]), y_size, x_size, stride, *pads)


@dataclass(frozen=True)
class FoldedUops:
    """A micro-op kernel (rows of dst, src, wgt) and the up to two loops around it."""

    uops: np.ndarray                 # (n, 3) int64
    iter_out: int = 1
    iter_in: int = 1
    factor_out: tuple = (0, 0, 0)    # dst, src, wgt
    factor_in: tuple = (0, 0, 0)


def fold_uops(fields: np.ndarray, max_iter: int) -> FoldedUops:
    """Fold the outermost affine dimensions of `fields` (shape (3, *grid)) into loops."""
    fields = np.asarray(fields, np.int64)
    fields = fields.reshape((3,) + tuple(d for d in fields.shape[1:] if d > 1))
    loops: list[tuple[int, tuple]] = []
    while len(loops) < 2 and fields.ndim > 1:
        extent = fields.shape[1]
        if extent > max_iter:
            break
        factor = fields[:, 1] - fields[:, 0]
        if not (factor == factor.reshape(3, -1)[:, :1].reshape((3,) + (1,) * (factor.ndim - 1))).all():
            break
        f = factor.reshape(3, -1)[:, 0]
        steps = np.arange(extent).reshape((1, extent) + (1,) * (fields.ndim - 2))
        if not (fields == fields[:, :1] + f.reshape((3, 1) + (1,) * (fields.ndim - 2)) * steps).all():
            break
        loops.append((extent, tuple(int(x) for x in f)))
        fields = fields[:, 0]
    uops = fields.reshape(3, -1).T.copy()
    if not loops:
        return FoldedUops(uops)
    if len(loops) == 1:
        return FoldedUops(uops, loops[0][0], 1, loops[0][1])
    return FoldedUops(uops, loops[0][0], loops[1][0], loops[0][1], loops[1][1])
