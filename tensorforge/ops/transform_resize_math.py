"""The per-axis arithmetic of resize, written once for two kinds of numbers: TE expressions (the
compute) and NumPy arrays of output positions (the reference).  `TE` and `NP` are the two small
namespaces of functions (floor, where, clip, ...) it needs beyond + - * /.

For one resized axis:  output position o  ->  source coordinate x (the coordinate transformation
mode)  ->  either one nearest index (mode nearest) or n taps (start + j, weight_j) around x
(linear: 2, cubic: 4, antialias: wider when downscaling).  The formulas and their evaluation order
follow the ONNX specification and its reference implementation, so that nearest-rounding ties and
integer coordinates come out the same: x = floor(x) + r with r in (0, 1] (an integer x takes r = 1
and the tap window one to the left, whose extra tap has weight 0).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from .. import te


def _te_where(c, a, b):
    return te.if_then_else(c, a, b)


TE = SimpleNamespace(
    floor=te.floor, where=_te_where, abs=te.abs,
    to_float=lambda v: v.astype("float64"), to_int=lambda v: v.astype("int64"),
    clip=lambda v, lo, hi: te.min(te.max(v, lo), hi),
)
NP = SimpleNamespace(
    floor=np.floor, where=np.where, abs=np.abs,
    to_float=lambda v: np.asarray(v, np.float64), to_int=lambda v: np.asarray(v).astype(np.int64),
    clip=np.clip,
)


@dataclass(frozen=True)
class AxisPlan:
    """One resized axis: lengths, the scale used by the coordinate transform, and the roi window."""

    in_len: int
    out_len: int
    scale: float
    roi: tuple | None = None         # (start, end) as fractions of the input, tf_crop_and_resize only

    @property
    def out_width(self) -> float:
        """The real-valued output length scale * in_len (differs from out_len when not integral)."""
        return self.scale * self.in_len

    def is_identity(self, ctm: str) -> bool:
        roi_ok = ctm != "tf_crop_and_resize" or self.roi is None or (
            math.isclose(self.roi[0], 0.0) and math.isclose(self.roi[1], 1.0))
        return math.isclose(self.scale, 1.0) and self.out_len == self.in_len and roi_ok


def source_coord(M, o, ax: AxisPlan, ctm: str):
    """(x_original, extrapolated-or-None) for output position(s) `o` of the axis."""
    y, n_in, scale, width = M.to_float(o), ax.in_len, ax.scale, ax.out_width
    if ctm == "align_corners":
        return (y * 0.0 if width == 1 else y * float(n_in - 1) / (width - 1)), None
    if ctm == "asymmetric":
        return y / scale, None
    if ctm == "half_pixel":
        return (y + 0.5) / scale - 0.5, None
    if ctm == "pytorch_half_pixel":
        return (y * 0.0 - 0.5 if width == 1 else (y + 0.5) / scale - 0.5), None
    if ctm == "half_pixel_symmetric":
        adjustment = ax.out_len / width
        offset = (n_in / 2) * (1 - adjustment)
        return offset + (y + 0.5) / scale - 0.5, None
    if ctm == "tf_crop_and_resize":
        r0, r1 = ax.roi if ax.roi is not None else (0.0, 1.0)
        span = float(np.float32(r1) - np.float32(r0))       # the reference does these in float32
        shift = float(np.float32(r0) * np.float32(n_in - 1))
        if width == 1:
            x = y * 0.0 + span * (n_in - 1) / 2
        else:
            x = y * span * float(n_in - 1) / (width - 1)
        x = x + shift
        return x, (x < 0.0) | (x > float(n_in - 1))
    raise ValueError(f"resize: unknown coordinate_transformation_mode {ctm!r}")


def nearest_index(M, x, nearest_mode: str):
    """The nearest source index to coordinate(s) x (not yet clamped)."""
    base = M.floor(x)
    frac = x - base
    i = M.to_int(base)
    if nearest_mode == "round_prefer_floor":
        return M.where(frac > 0.5, i + 1, i)
    if nearest_mode == "round_prefer_ceil":
        return M.where(frac >= 0.5, i + 1, i)
    if nearest_mode == "floor":
        return i
    if nearest_mode == "ceil":
        return M.where(frac > 0.0, i + 1, i)
    raise ValueError(f"resize: unknown nearest_mode {nearest_mode!r}")


def _cubic_plain(r, a: float) -> list:
    """Keys' cubic weights for taps -1, 0, 1, 2 around the floor, in the reference's order."""
    s = 1 - r
    return [((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
            ((a + 2) * r - (a + 3)) * r * r + 1,
            ((a + 2) * s - (a + 3)) * s * s + 1,
            ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a]


def _cubic_kernel(M, d, a: float):
    d = M.abs(d)
    d2 = d * d
    d3 = d * d2
    near = (a + 2) * d3 - (a + 3) * d2 + 1
    far = a * d3 - 5 * a * d2 + 8 * a * d - 4 * a
    return M.where(d <= 1.0, near, M.where(d < 2.0, far, d * 0.0))


def tap_offsets(mode: str, scale: float, antialias: bool) -> range:
    """Tap positions relative to the floor of the coordinate (with r in (0, 1])."""
    s = min(scale, 1.0)
    if mode == "linear":
        start = int(math.floor(-1 / s) + 1) if antialias else 0
        return range(start, 2 - start)
    if mode == "cubic":
        start = int(math.floor(-2 / s) + 1) if antialias else -1
        return range(start, 2 - start)
    raise ValueError(f"resize: mode {mode!r} has no taps")


def coord_floor(M, x):
    """(left, ratio): x = left + ratio with ratio in (0, 1] (an integral x takes ratio 1)."""
    base = M.floor(x)
    integral = x == base
    ratio = M.where(integral, 1.0, x - base)
    left = M.to_int(base) - M.where(integral, 1, 0)
    return left, ratio


def antialias_weight(M, k, ratio, scale: float, mode: str, cubic_a: float):
    """The unnormalized weight of tap `k` (an int, or an index expression) of the antialiasing
    filter: the linear or cubic kernel stretched by 1 / scale when downscaling."""
    s = min(scale, 1.0)
    if mode == "linear":
        return M.clip(1 - M.abs((k - ratio) * s), 0.0, 1.0)
    return _cubic_kernel(M, s * (k - ratio), cubic_a)


def outside(i, in_len: int):
    """Whether tap index i lies outside the input (exclude_outside drops those taps)."""
    return (i < 0) | (i >= in_len)


def interp_taps(M, x, ax: AxisPlan, mode: str, cubic_a: float, antialias: bool, exclude_outside: bool):
    """(indices, weights): one (unclamped) source index and one weight per tap; weights add to 1."""
    left, ratio = coord_floor(M, x)
    offsets = tap_offsets(mode, ax.scale, antialias)
    if antialias:
        weights = [antialias_weight(M, k, ratio, ax.scale, mode, cubic_a) for k in offsets]
    elif mode == "linear":
        weights = [1 - ratio, ratio]
    else:
        weights = _cubic_plain(ratio, cubic_a)
    indices = [left + k for k in offsets]
    normalize = antialias
    if exclude_outside:
        weights = [M.where(outside(i, ax.in_len), w * 0.0, w) for i, w in zip(indices, weights)]
        normalize = True
    if normalize:
        total = weights[0]
        for w in weights[1:]:
            total = total + w
        total = M.where(total == 0.0, 1.0, total)
        weights = [w / total for w in weights]
    return indices, weights
