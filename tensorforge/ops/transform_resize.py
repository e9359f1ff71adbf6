"""resize (ONNX Resize; Upsample maps onto it): nearest, linear and cubic interpolation with every
coordinate transformation mode, nearest rounding mode, exclude_outside, antialias and
tf_crop_and_resize extrapolation.  Injective.

Attributes are resolved by the converter: `sizes` (the output shape) and `scales` (the scale
each axis's coordinate transform uses; with ONNX `sizes` that is sizes / input shape, or the
aspect-preserving scale) are full-rank; `roi` holds (starts.., ends..) for tf_crop_and_resize.
`resize_output` is that resolution, shared with the frontend.

nearest is one stage that reads the input at one computed index per axis.  linear and cubic are
separable: one stage per resized axis ("resize_axis<k>", in float64 for float64 and integer
inputs, else float32) sums its taps; a final stage casts to the input dtype (integers round half
to even and saturate, as the ONNX reference).  Each tap's clamped source index and weight are
tables of one entry per output position along the axis ("resize_index<k>_<t>",
"resize_weight<k>_<t>"), computed once; with antialias, the (wide) filter's normalized weights
are a table per axis ("resize_weights<k>", out_len x taps).  tf_crop_and_resize, which
extrapolates, works out each element's source coordinate.  The arithmetic lives in
transform_resize_math.py.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .. import te
from ..ir import dtype as dt
from .common import const_shape
from .registry import INJECTIVE, OpError, TensorType, op
from .transform_resize_math import (
    NP,
    TE,
    AxisPlan,
    antialias_weight,
    coord_floor,
    interp_taps,
    nearest_index,
    outside,
    source_coord,
    tap_offsets,
)

MODES = ("nearest", "linear", "cubic")
COORD_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
               "asymmetric", "tf_crop_and_resize")
# "legacy": Resize-10 / Upsample, which had no nearest_mode: floor when an axis grows, ceil when
# it shrinks (what ONNX Runtime does for those opsets)
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "legacy")
DEFAULTS = {"mode": "nearest", "coordinate_transformation_mode": "half_pixel",
            "nearest_mode": "round_prefer_floor", "cubic_coeff_a": -0.75, "exclude_outside": 0,
            "extrapolation_value": 0.0, "roi": None, "antialias": 0}


def resize_output(in_shape: Sequence[int], scales: Sequence[float] | None = None,
                  sizes: Sequence[int] | None = None, axes: Sequence[int] | None = None,
                  policy: str = "stretch") -> tuple[tuple, tuple]:
    """(output sizes, coordinate scales), both full rank, from ONNX's scales or sizes (given for
    `axes`, or for every axis) and keep_aspect_ratio_policy."""
    rank = len(in_shape)
    axes = list(range(rank)) if axes is None else [a % rank for a in axes]
    if (scales is None) == (sizes is None):
        raise OpError("resize: exactly one of scales and sizes must be given")
    given = list(scales if scales is not None else sizes)
    if len(given) != len(axes):
        raise OpError(f"resize: {len(given)} {'scales' if scales is not None else 'sizes'} for "
                      f"{len(axes)} axes (input rank {rank})")
    if scales is not None:
        full = [1.0] * rank
        for a, s in zip(axes, given):
            if not float(s) > 0:
                raise OpError(f"resize: scales must be positive, got {tuple(given)}")
            full[a] = float(s)
        out = tuple(int(np.floor(np.float64(s) * d)) for s, d in zip(full, in_shape))
        return out, tuple(full)
    out = list(int(d) for d in in_shape)
    for a, s in zip(axes, given):
        out[a] = int(s)
    full = [o / d if d else 1.0 for o, d in zip(out, in_shape)]
    if policy != "stretch":
        if policy not in ("not_larger", "not_smaller"):
            raise OpError(f"resize: keep_aspect_ratio_policy {policy!r} is not stretch, not_larger or not_smaller")
        pick = min if policy == "not_larger" else max
        scale = pick(full[a] for a in axes)
        full = [scale if a in axes else 1.0 for a in range(rank)]
        out = [int(scale * in_shape[a] + 0.5) if a in axes else int(in_shape[a]) for a in range(rank)]
    return tuple(out), tuple(full)


def _plans(shape: Sequence[int], sizes: Sequence[int], scales: Sequence[float], roi) -> list[AxisPlan]:
    rank = len(shape)
    if len(sizes) != rank or len(scales) != rank:
        raise OpError(f"resize: sizes {tuple(sizes)} and scales {tuple(scales)} must have the input rank {rank}")
    if roi is not None and len(roi) != 2 * rank:
        raise OpError(f"resize: roi {tuple(roi)} must hold 2 * rank = {2 * rank} values")
    return [AxisPlan(int(d), int(n), float(s), None if roi is None else (float(roi[a]), float(roi[rank + a])))
            for a, (d, n, s) in enumerate(zip(shape, sizes, scales))]


def _check(x: TensorType, sizes, scales, mode, ctm, nearest_mode) -> None:
    if x.dtype == "bool":
        raise OpError("resize: bool input is not supported")
    for value, allowed, what in ((mode, MODES, "mode"), (ctm, COORD_MODES, "coordinate_transformation_mode"),
                                 (nearest_mode, NEAREST_MODES, "nearest_mode")):
        if value not in allowed:
            raise OpError(f"resize: {what} {value!r} is not one of {allowed}")
    if any(int(n) < 0 for n in sizes):
        raise OpError(f"resize: output sizes {tuple(sizes)} must be non-negative")
    for d, n in zip(x.shape, sizes):
        if d == 0 and n:
            raise OpError(f"resize: cannot resize an empty axis to {n} elements")


def _nearest_mode(mode: str, ax: AxisPlan) -> str:
    if mode == "legacy":
        return "ceil" if ax.scale < 1 else "floor"
    return mode


def _work_dtype(dtype: str) -> str:
    return "float32" if dtype in ("float16", "float32") else "float64"


def _te_cast(v, dtype: str):
    if dt.is_float(dtype):
        return v.astype(dtype)
    lo, hi = te.min_value(dtype).value, te.max_value(dtype).value
    return te.min(te.max(te.round(v.astype("float64")), float(lo)), float(hi)).astype(dtype)


def _saturate(v: np.ndarray, dtype: str) -> np.ndarray:
    if dt.is_float(dtype):
        return np.asarray(v).astype(dtype)
    info = np.iinfo(dtype)
    return np.clip(np.round(v), info.min, info.max).astype(dtype)


# -- TE -----------------------------------------------------------------------------------------
def _integer_upsampling(ax: AxisPlan, ctm: str, mode: str) -> int:
    """s when nearest resizing of this axis is out[j] = in[j // s] exactly (an integer scale s
    with a coordinate transform and rounding that give that index: asymmetric with floor;
    half_pixel with either round mode, whose source coordinate j / s + 0.5 / s - 0.5 lies
    strictly within half a pixel of j // s), else 0.  The kernel then does integer arithmetic."""
    s = round(ax.scale)
    if s < 2 or not math.isclose(ax.scale, s) or ax.out_len != ax.in_len * s:
        return 0
    if ctm == "asymmetric" and mode == "floor":
        return s
    if ctm in ("half_pixel", "pytorch_half_pixel") and mode in ("round_prefer_floor", "round_prefer_ceil"):
        return s
    return 0


def _nearest_te(x: te.Tensor, plans: list, a: dict) -> te.Tensor:
    ctm = a["coordinate_transformation_mode"]
    fill = te.const(_saturate(np.float64(a["extrapolation_value"]), x.dtype).item(), x.dtype)

    def f(*o):
        index, outside = [], []
        for j, ax in zip(o, plans):
            if ax.is_identity(ctm):
                index.append(j)
                continue
            factor = _integer_upsampling(ax, ctm, _nearest_mode(a["nearest_mode"], ax))
            if factor:
                index.append(j // factor)
                continue
            coord, extrapolated = source_coord(TE, j, ax, ctm)
            index.append(TE.clip(nearest_index(TE, coord, _nearest_mode(a["nearest_mode"], ax)), 0, ax.in_len - 1))
            if extrapolated is not None:
                outside.append(extrapolated)
        value = x[tuple(index)]
        return te.if_then_else(te.any(*outside), fill, value) if outside else value

    return te.compute(tuple(p.out_len for p in plans), f, name="resize", tag="resize")


def _axis_stage_te(prev: te.Tensor, k: int, ax: AxisPlan, a: dict, work: str) -> te.Tensor:
    """Resize axis k of `prev`: each output sums its taps of `prev` along the axis."""
    ctm, antialias = a["coordinate_transformation_mode"], bool(a["antialias"])
    shape = list(const_shape(prev))
    shape[k] = ax.out_len
    weights = _antialias_weights_te(k, ax, a) if antialias else None
    fraction = _integer_linear(ax, a)
    tables = _tap_tables_te(k, ax, a) if not antialias and ctm != "tf_crop_and_resize" and not fraction else None

    def f(*o):
        if fraction:
            # out[j] = in[i0] (1 - w) + in[i0 + 1] w with i0 = num // den and w = (num mod den) / den
            num_scale, num_offset, den = fraction
            num = o[k] * num_scale + num_offset if num_scale != 1 or num_offset else o[k]
            left = num // den
            w = (num - left * den).astype(work) / te.const(float(den), work)
            near = prev[o[:k] + (TE.clip(left, 0, ax.in_len - 1),) + o[k + 1:]].astype(work)
            far = prev[o[:k] + (TE.clip(left + 1, 0, ax.in_len - 1),) + o[k + 1:]].astype(work)
            return near * (te.const(1.0, work) - w) + far * w
        if tables is not None:
            total = None
            for index, w in zip(*tables):
                # the table holds clamped indices; clamping again tells the index arithmetic
                # their range (a per-channel operand of an input merged from the channels and
                # the plane then reads at the channel, not at a division of the flat offset)
                at = TE.clip(index[o[k]], 0, ax.in_len - 1)
                term = prev[o[:k] + (at,) + o[k + 1:]].astype(work) * w[o[k]].astype(work)
                total = term if total is None else total + term
            return total
        coord, extrapolated = source_coord(TE, o[k], ax, ctm)
        if weights is None:
            indices, ws = interp_taps(TE, coord, ax, a["mode"], a["cubic_coeff_a"], False,
                                      bool(a["exclude_outside"]))
        else:
            left, _ = coord_floor(TE, coord)
            offsets = tap_offsets(a["mode"], ax.scale, True)
            indices = [left + t for t in offsets]
            ws = [weights[o[k], j] for j in range(len(offsets))]
        total = None
        for i, w in zip(indices, ws):
            term = prev[o[:k] + (TE.clip(i, 0, ax.in_len - 1),) + o[k + 1:]].astype(work) * w.astype(work)
            total = term if total is None else total + term
        if extrapolated is not None:
            total = te.if_then_else(extrapolated, te.const(float(a["extrapolation_value"]), work), total)
        return total

    return te.compute(tuple(shape), f, name=f"resize_axis{k}")


def _integer_linear(ax: AxisPlan, a: dict) -> tuple | None:
    """(num_scale, num_offset, den) when linear resizing of this axis by an integer factor s has
    its source coordinate (num_scale j + num_offset) / den for output j, so that the left tap is
    num // den and its weight's complement (num mod den) / den, in integer arithmetic: half_pixel
    (and pytorch_half_pixel on an axis longer than 1) (2 j + 1 - s) / 2s, asymmetric j / s.

    The indices are then affine in j per residue, not loads from a table per lane, and a 2x
    up-sampling reads its two taps as runs of neighbouring elements: a conv's output up-sampled
    2x in its epilogue took 1.7 ms for 64 channels of 64 x 64 through the tables, ONNX Runtime's
    Upsample 0.13 ms."""
    if a["mode"] != "linear" or a["antialias"] or a["exclude_outside"]:
        return None
    s = round(ax.scale)
    if s < 2 or not math.isclose(ax.scale, s) or ax.out_len != ax.in_len * s:
        return None
    ctm = a["coordinate_transformation_mode"]
    if ctm == "asymmetric":
        return (1, 0, s)
    if ctm == "half_pixel" or (ctm == "pytorch_half_pixel" and ax.out_len > 1):
        return (2, 1 - s, 2 * s)
    return None


def _tap_tables_te(k: int, ax: AxisPlan, a: dict) -> tuple[list, list]:
    """(index tables, weight tables) of axis k: per tap, its clamped source index and its weight
    for each output position along the axis, stages of out_len elements computed once.

    An output element then reads its taps' indices and weights from the tables instead of
    working out its source coordinate (float64 arithmetic, a floor and a comparison per axis,
    per element): a 2x bilinear up-sampling of 64 channels to 128 x 128 took 18.9 ms that way,
    10.8x ONNX Runtime's time.  Each table is a reduction over one element, so that lowering
    keeps it a stage of its own (it inlines plain injective stages into their readers)."""
    ctm, n = a["coordinate_transformation_mode"], len(tap_offsets(a["mode"], ax.scale, False))

    def taps(o):
        coord, _ = source_coord(TE, o, ax, ctm)
        return interp_taps(TE, coord, ax, a["mode"], a["cubic_coeff_a"], False, bool(a["exclude_outside"]))

    def index(t):
        def entry(o):
            one = te.reduce_axis((0, 1), name="one")
            return te.sum(TE.clip(taps(o + one.var)[0][t], 0, ax.in_len - 1).astype("int32"), axis=one)
        return te.compute((ax.out_len,), entry, name=f"resize_index{k}_{t}")

    def weight(t):
        def entry(o):
            one = te.reduce_axis((0, 1), name="one")
            return te.sum(taps(o + one.var)[1][t], axis=one)
        return te.compute((ax.out_len,), entry, name=f"resize_weight{k}_{t}")

    return [index(t) for t in range(n)], [weight(t) for t in range(n)]


def _antialias_weights_te(k: int, ax: AxisPlan, a: dict) -> te.Tensor:
    """Normalized antialias weights of axis k, one row of taps per output position.

    The filter is wide when downscaling (8 taps at scale 0.6 for cubic) and each tap needs the
    row's sum, so the table is built once per output position, not per output element: the sum
    is a reduction, and the table a reduction over one element, because lowering inlines plain
    injective stages into their readers but keeps reduction stages as stages of their own."""
    offsets = tap_offsets(a["mode"], ax.scale, True)
    n, ctm = len(offsets), a["coordinate_transformation_mode"]

    def raw(o, j):
        left, ratio = coord_floor(TE, source_coord(TE, o, ax, ctm)[0])
        t = j + offsets.start
        w = antialias_weight(TE, t, ratio, ax.scale, a["mode"], a["cubic_coeff_a"])
        if a["exclude_outside"]:
            w = te.if_then_else(outside(left + t, ax.in_len), te.const(0.0, "float64"), w)
        return w

    def total(o):
        r = te.reduce_axis((0, n), name="tap")
        return te.sum(raw(o, r.var), axis=r)

    t = te.compute((ax.out_len,), total, name=f"resize_weight_sum{k}")

    def table(o, j):
        one = te.reduce_axis((0, 1), name="one")
        norm = te.if_then_else(t[o] == 0.0, te.const(1.0, "float64"), t[o])
        return te.sum(raw(o, j + one.var) / norm, axis=one)

    return te.compute((ax.out_len, n), table, name=f"resize_weights{k}")


def _interp_te(x: te.Tensor, plans: list, a: dict) -> te.Tensor:
    work = _work_dtype(x.dtype)
    cur = x
    for k, ax in enumerate(plans):
        if not ax.is_identity(a["coordinate_transformation_mode"]):
            cur = _axis_stage_te(cur, k, ax, a, work)
    return te.compute(tuple(p.out_len for p in plans), lambda *o: _te_cast(cur[o], x.dtype), name="resize",
                      tag="resize")


# -- NumPy ----------------------------------------------------------------------------------------
def _along(v: np.ndarray, k: int, ndim: int) -> np.ndarray:
    """A per-position vector along axis k, shaped to broadcast against an ndim tensor."""
    return np.asarray(v).reshape((1,) * k + (-1,) + (1,) * (ndim - k - 1))


def _nearest_np(x: np.ndarray, plans: list, a: dict) -> np.ndarray:
    ctm = a["coordinate_transformation_mode"]
    index, outside = [], np.zeros((1,) * x.ndim, bool)
    for k, ax in enumerate(plans):
        o = np.arange(ax.out_len)
        if ax.is_identity(ctm):
            index.append(o)
            continue
        coord, extrapolated = source_coord(NP, o, ax, ctm)
        index.append(np.clip(nearest_index(NP, coord, _nearest_mode(a["nearest_mode"], ax)), 0, ax.in_len - 1))
        if extrapolated is not None:
            outside = outside | _along(extrapolated, k, x.ndim)
    out = x[np.ix_(*index)] if x.ndim else x.copy()
    fill = _saturate(np.float64(a["extrapolation_value"]), x.dtype.name)
    return np.where(outside, fill, out).astype(x.dtype)


def _interp_np(x: np.ndarray, plans: list, a: dict) -> np.ndarray:
    ctm = a["coordinate_transformation_mode"]
    cur = x.astype(np.float64)
    for k, ax in enumerate(plans):
        if ax.is_identity(ctm):
            continue
        coord, extrapolated = source_coord(NP, np.arange(ax.out_len), ax, ctm)
        indices, weights = interp_taps(NP, coord, ax, a["mode"], a["cubic_coeff_a"], bool(a["antialias"]),
                                       bool(a["exclude_outside"]))
        total = 0.0
        for i, w in zip(indices, weights):
            total = total + np.take(cur, np.clip(i, 0, ax.in_len - 1), axis=k) * _along(w, k, x.ndim)
        if extrapolated is not None:
            total = np.where(_along(extrapolated, k, x.ndim), float(a["extrapolation_value"]), total)
        cur = np.asarray(total)
    return _saturate(cur, x.dtype.name)


@op("resize", pattern=INJECTIVE, attr_defaults=DEFAULTS)
class resize:
    def infer(x: TensorType, sizes: Sequence[int], scales: Sequence[float], **a) -> TensorType:
        _check(x, sizes, scales, a["mode"], a["coordinate_transformation_mode"], a["nearest_mode"])
        _plans(x.shape, sizes, scales, a["roi"])
        return TensorType(tuple(int(n) for n in sizes), x.dtype)

    def compute(x: te.Tensor, sizes: Sequence[int], scales: Sequence[float], **a) -> te.Tensor:
        plans = _plans(const_shape(x), sizes, scales, a["roi"])
        return _nearest_te(x, plans, a) if a["mode"] == "nearest" else _interp_te(x, plans, a)

    def reference(x: np.ndarray, sizes: Sequence[int], scales: Sequence[float], **a) -> np.ndarray:
        plans = _plans(x.shape, sizes, scales, a["roi"])
        return _nearest_np(x, plans, a) if a["mode"] == "nearest" else _interp_np(x, plans, a)
