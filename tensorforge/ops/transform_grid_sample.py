"""grid_sample (ONNX GridSample): sample x (N, C, S1..Sr) at the points of grid (N, D1..Dr, r).

For each output (n, c, d1..dr) and spatial axis i of length L, the grid holds a coordinate g in
[-1, 1] (grid[..., 0] is the innermost axis, width, as in ONNX); it is mapped to a pixel
position x, moved inside by the padding mode, and read by the interpolation mode:

    x = (g + 1) / 2 * (L - 1)            align_corners=1  (-1, 1 are the centres of the end pixels)
    x = ((g + 1) * L - 1) / 2            align_corners=0  (-1, 1 are the outer edges)
    nearest: x = round-half-to-even(x); linear: 2 taps floor(x) + {0, 1}; cubic: 4 taps
    floor(x) + {-1, 0, 1, 2} with Keys' weights (a = -0.75); N-D weights are products.
    padding zeros: taps outside the input read 0; border: a coordinate outside the border
    interval is clamped to [0, L-1], and so are the taps; reflection: the coordinate and the taps
    are reflected at the border interval until inside.

The border interval is [0, L-1] with align_corners, else [-0.5, L-0.5].  The compute keeps,
per spatial axis, the padded coordinates and the taps' indices and weights as small stages of
their own (one entry per sampling point, shared by all channels), and the output stage sums
the products of the taps' weights and reads.  The arithmetic is
written once for two kinds of numbers, TE expressions (the compute) and NumPy arrays (the
reference), in the grid's float type (float32 unless an input is float64), as the ONNX reference
computes it, so nearest-rounding ties come out the same.
"""
from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import numpy as np

from .. import te
from .common import const_shape
from .registry import INJECTIVE, OpError, TensorType, op

MODES = ("nearest", "linear", "cubic")
PADDING_MODES = ("zeros", "border", "reflection")
CUBIC_A = -0.75
_FLOATS = ("float16", "bfloat16", "float32", "float64")


def _te_namespace(work: str) -> SimpleNamespace:
    return SimpleNamespace(
        floor=te.floor, rint=te.round, where=te.if_then_else,
        clip=lambda v, lo, hi: te.min(te.max(v, lo), hi),
        to_int=lambda v: v.astype("int64"), to_work=lambda v: v.astype(work),
        const=lambda v: te.const(float(v), work))


def _np_namespace(work: str) -> SimpleNamespace:
    return SimpleNamespace(
        floor=np.floor, rint=np.rint, where=np.where, clip=np.clip,
        to_int=lambda v: np.asarray(v).astype(np.int64), to_work=lambda v: np.asarray(v).astype(work),
        const=lambda v: np.asarray(v, work))


def work_dtype(x_dtype: str, grid_dtype: str) -> str:
    return "float64" if "float64" in (x_dtype, grid_dtype) else "float32"


def _bounds(length: int, align_corners: bool) -> tuple[float, float]:
    return (0.0, length - 1.0) if align_corners else (-0.5, length - 0.5)


def _reflect(M, x, lo: float, hi: float):
    """x reflected at lo and hi until it lies in [lo, hi] (x itself when it does)."""
    span = hi - lo
    if span == 0:
        return x * 0.0 + M.const(lo)
    below = x < M.const(lo)
    dx = M.where(below, M.const(lo) - x, x - M.const(hi))
    n = M.floor(dx / M.const(span))
    r = dx - n * M.const(span)
    even = (n - M.floor(n * M.const(0.5)) * M.const(2.0)) == M.const(0.0)
    from_lo, from_hi = M.const(lo) + r, M.const(hi) - r
    moved = M.where(below, M.where(even, from_lo, from_hi), M.where(even, from_hi, from_lo))
    return M.where(below | (x > M.const(hi)), moved, x)


def _coordinate(M, g, length: int, mode: str, padding_mode: str, align_corners: bool):
    """The pixel position that grid value(s) g name along an axis of `length`, after padding."""
    one, two = M.const(1.0), M.const(2.0)
    if align_corners:
        x = (g + one) / two * M.const(length - 1)
    else:
        x = ((g + one) * M.const(length) - one) / two
    if mode == "nearest":
        x = M.rint(x)
    lo, hi = _bounds(length, align_corners)
    if padding_mode == "border":
        x = M.where((x < M.const(lo)) | (x > M.const(hi)), M.clip(x, M.const(0.0), M.const(length - 1)), x)
    elif padding_mode == "reflection":
        x = _reflect(M, x, lo, hi)
    return x


def _cubic_weights(M, t) -> list:
    """Keys' cubic convolution weights of taps -1, 0, 1, 2 at fraction t in [0, 1)."""
    a, one, two = M.const(CUBIC_A), M.const(1.0), M.const(2.0)
    five, eight, four = M.const(5.0), M.const(8.0), M.const(4.0)
    s = one - t
    return [((a * (t + one) - five * a) * (t + one) + eight * a) * (t + one) - four * a,
            ((a + two) * t - (a + M.const(3.0))) * t * t + one,
            ((a + two) * s - (a + M.const(3.0))) * s * s + one,
            ((a * (two - t) - five * a) * (two - t) + eight * a) * (two - t) - four * a]


def _taps(M, x, mode: str) -> list:
    """(float tap position, weight) pairs of the interpolation at position(s) x."""
    if mode == "nearest":
        return [(x, None)]
    base = M.floor(x)
    t = x - base
    if mode == "linear":
        return [(base, M.const(1.0) - t), (base + M.const(1.0), t)]
    return [(base + M.const(k), w) for k, w in zip((-1.0, 0.0, 1.0, 2.0), _cubic_weights(M, t))]


def _tap_index(M, p, length: int, padding_mode: str, align_corners: bool):
    """(int index inside the axis, in-range condition or None) of the tap at float position p."""
    if padding_mode == "reflection":
        p = _reflect(M, p, *_bounds(length, align_corners))
    i = M.to_int(M.floor(p))
    inside = (i >= 0) & (i < length) if padding_mode == "zeros" else None
    return M.clip(i, 0, length - 1), inside


def _axis_taps(M, g, length: int, a: dict) -> list:
    """Per tap along one axis: (index, in-range condition or None, weight or None)."""
    return _taps_at(M, _coordinate(M, g, length, a["mode"], a["padding_mode"], bool(a["align_corners"])), length, a)


def _taps_at(M, x, length: int, a: dict) -> list:
    """_axis_taps from the padded coordinate x."""
    out = []
    for p, w in _taps(M, x, a["mode"]):
        index, inside = _tap_index(M, p, length, a["padding_mode"], bool(a["align_corners"]))
        out.append((index, inside, w))
    return out


def _check(x: TensorType, grid: TensorType, mode: str, padding_mode: str, align_corners: int) -> tuple:
    if mode not in MODES:
        raise OpError(f"grid_sample: mode {mode!r} must be one of {', '.join(MODES)}")
    if padding_mode not in PADDING_MODES:
        raise OpError(f"grid_sample: padding_mode {padding_mode!r} must be one of {', '.join(PADDING_MODES)}")
    if int(align_corners) not in (0, 1):
        raise OpError(f"grid_sample: align_corners must be 0 or 1, got {align_corners}")
    if x.dtype not in _FLOATS or grid.dtype not in _FLOATS:
        raise OpError(f"grid_sample: X and grid must be floating point, got {x.dtype} and {grid.dtype}")
    r = len(x.shape) - 2
    if r < 1:
        raise OpError(f"grid_sample: X has shape {tuple(x.shape)}; it must be (N, C, spatial..) with rank >= 3")
    if len(grid.shape) != r + 2 or grid.shape[-1] != r or grid.shape[0] != x.shape[0]:
        raise OpError(f"grid_sample: grid has shape {tuple(grid.shape)}; for X {tuple(x.shape)} it must be "
                      f"({x.shape[0]}, D1, .., D{r}, {r})")
    return (x.shape[0], x.shape[1]) + tuple(grid.shape[1:-1])


def _tap_tables(grid: te.Tensor, i: int, length: int, points: tuple, work: str, a: dict) -> tuple:
    """(index table, weight table or None) of spatial axis i, each (N, D1..Dr, taps): the source
    index of every tap of every sampling point (-1 for a tap outside the input with zeros
    padding) and its weight.  They are computed once per point, not once per channel and tap
    combination, and kept, with the padded coordinate before them, as stages of their own (a reduction over one element: lowering
    inlines plain injective stages into their readers), so the sampling kernel reads a few
    table entries instead of repeating the coordinate arithmetic in every term."""
    M = _te_namespace(work)
    r = len(points) - 1

    def coordinate(*o):
        one = te.reduce_axis((0, 1), name="one")
        g = grid[(o[0],) + tuple(o[1:-1]) + (o[-1] + one.var,)].astype(work)
        return te.sum(_coordinate(M, g, length, a["mode"], a["padding_mode"], bool(a["align_corners"])), axis=one)

    coords: Any = te.compute(points + (1,), lambda *o: coordinate(*o[:-1], r - 1 - i + o[-1]),
                             name=f"grid_sample_coord{i}")

    def taps(o):
        return _taps_at(M, coords[tuple(o) + (0,)], length, a)

    def select(t, values):
        out = values[-1]
        for k in range(len(values) - 2, -1, -1):
            out = te.if_then_else(t == k, values[k], out)
        return out

    def index(*o):
        one = te.reduce_axis((0, 1), name="one")
        entries = [ix if inside is None else te.if_then_else(inside, ix, te.const(-1, "int64"))
                   for ix, inside, _ in taps(o[:-1])]
        return te.sum(select(o[-1] + one.var, entries), axis=one)

    def weight(*o):
        one = te.reduce_axis((0, 1), name="one")
        return te.sum(select(o[-1] + one.var, [w for _, _, w in taps(o[:-1])]), axis=one)

    n = {"nearest": 1, "linear": 2, "cubic": 4}[a["mode"]]
    index_table: Any = te.compute(points + (n,), index, name=f"grid_sample_index{i}")
    if a["mode"] == "nearest":
        return index_table, None
    return index_table, te.compute(points + (n,), weight, name=f"grid_sample_weight{i}")


@op("grid_sample", pattern=INJECTIVE,
    attr_defaults={"mode": "linear", "padding_mode": "zeros", "align_corners": 0})
class grid_sample:
    def infer(x: TensorType, grid: TensorType, **a: Any) -> TensorType:
        return TensorType(_check(x, grid, a["mode"], a["padding_mode"], a["align_corners"]), x.dtype)

    def compute(x: te.Tensor, grid: te.Tensor, **a: Any) -> Any:
        shape = const_shape(x)
        spatial = shape[2:]
        r = len(spatial)
        points = (shape[0],) + tuple(const_shape(grid)[1:-1])              # (N, D1..Dr)
        work = work_dtype(x.dtype, grid.dtype)
        tables = [_tap_tables(grid, i, spatial[i], points, work, a) for i in range(r)]
        zeros = a["padding_mode"] == "zeros"
        ntaps = {"nearest": 1, "linear": 2, "cubic": 4}[a["mode"]]

        def f(*index):
            n, c, o = index[0], index[1], tuple(index[2:])
            total: Any = None
            for combo in itertools.product(range(ntaps), repeat=r):
                taps = [tables[i][0][(n,) + o + (combo[i],)] for i in range(r)]
                value = x[(n, c) + tuple(te.max(t, 0) for t in taps)].astype(work)
                if zeros:
                    value = te.if_then_else(te.all(*[t >= 0 for t in taps]), value, te.const(0.0, work))
                for i in range(r):
                    if tables[i][1] is not None:
                        value = value * tables[i][1][(n,) + o + (combo[i],)]
                total = value if total is None else total + value
            return total.astype(x.dtype) if work != x.dtype else total

        return te.compute((shape[0], shape[1]) + points[1:], f, name="grid_sample", tag="grid_sample")

    def reference(x: np.ndarray, grid: np.ndarray, **a: Any) -> np.ndarray:
        out_shape = _check(TensorType(x.shape, x.dtype.name), TensorType(grid.shape, grid.dtype.name),
                           a["mode"], a["padding_mode"], a["align_corners"])
        r = x.ndim - 2
        work = work_dtype(x.dtype.name, grid.dtype.name)
        M = _np_namespace(work)
        g = grid.astype(work)
        axes = [_axis_taps(M, g[..., r - 1 - i], x.shape[2 + i], a) for i in range(r)]
        xt = np.moveaxis(x.astype(work), 1, -1)                       # (N, S.., C)
        batch = np.arange(x.shape[0]).reshape((-1,) + (1,) * r)
        total = np.zeros(out_shape[:1] + out_shape[2:] + out_shape[1:2], work)
        for combo in itertools.product(*axes):
            value = xt[(batch,) + tuple(t[0] for t in combo)]          # (N, D.., C)
            for _index, inside, _w in combo:
                if inside is not None:
                    value = np.where(inside[..., None], value, np.zeros((), work))
            for _index, _inside, w in combo:
                if w is not None:
                    value = value * w[..., None]
            total = total + value
        return np.moveaxis(total, -1, 1).astype(x.dtype)
