"""Windows of a tensor: slice (ONNX Slice: starts/ends/axes/steps, negative steps, clamping) and
pad (constant / reflect / edge / wrap, negative pads crop).  Both injective.

Each axis of a slice is resolved once to (start, step, count) with Python's own slice rules, which
are exactly ONNX's clamping rules; output index o then reads input index start + o * step.
A pad axis is resolved to (crop at the start, pad at the start, kept length); output index o reads
the kept window at i = o - pad, with i folded back into [0, kept) as the mode says.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .. import te
from ..ir import dtype as dt
from ..ir.expr import Expr
from .common import const_shape, shape_of
from .index_math import check_int_tuple, normalize_axes
from .registry import INJECTIVE, OpError, TensorType, op


# -- slice --------------------------------------------------------------------------------------
def slice_plan(shape: Sequence[int], starts: Sequence[int], ends: Sequence[int],
               axes: Sequence[int] | None = None, steps: Sequence[int] | None = None) -> list[tuple]:
    """Per axis (start, step, count); axes that are not sliced get (0, 1, dim)."""
    starts = check_int_tuple(starts, "slice", "starts")
    ends = check_int_tuple(ends, "slice", "ends")
    axes = tuple(range(len(starts))) if axes is None else check_int_tuple(axes, "slice", "axes")
    steps = (1,) * len(starts) if steps is None else check_int_tuple(steps, "slice", "steps")
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise OpError(f"slice: starts {starts}, ends {ends}, axes {axes} and steps {steps} must "
                      "have the same length")
    axes = normalize_axes(axes, len(shape), "slice")
    # a dimension may be a shape expression (shape_generic.py) where it is not sliced
    plan = [(0, 1, d if isinstance(d, Expr) else int(d)) for d in shape]
    for a, b, e, s in zip(axes, starts, ends, steps):
        if s == 0:
            raise OpError(f"slice: step 0 on axis {a}")
        if isinstance(shape[a], Expr):
            raise OpError(f"slice: axis {a} varies ({shape[a]}); slicing it needs a constant size")
        rng = range(*slice(b, e, s).indices(int(shape[a])))
        plan[a] = (rng.start, rng.step, len(rng))
    return plan


@op("slice", pattern=INJECTIVE, attr_defaults={"axes": None, "steps": None}, narrow=True)
class slice_:
    def infer(x: TensorType, starts: Sequence[int], ends: Sequence[int], axes: Sequence[int] | None = None,
              steps: Sequence[int] | None = None) -> TensorType:
        plan = slice_plan(x.shape, starts, ends, axes, steps)
        return TensorType(tuple(c for _, _, c in plan), x.dtype)

    def compute(x: te.Tensor, starts: Sequence[int], ends: Sequence[int], axes: Sequence[int] | None = None,
                steps: Sequence[int] | None = None) -> te.Tensor:
        plan = slice_plan(shape_of(x), starts, ends, axes, steps)

        def f(*i):
            return x[tuple(j if (b, s) == (0, 1) else b + j * s for j, (b, s, _) in zip(i, plan))]

        return te.compute(tuple(c for _, _, c in plan), f, name="slice", tag="slice")

    def reference(x: np.ndarray, starts: Sequence[int], ends: Sequence[int], axes: Sequence[int] | None = None,
                  steps: Sequence[int] | None = None) -> np.ndarray:
        plan = slice_plan(x.shape, starts, ends, axes, steps)
        window = tuple(slice(b, b + s * c if b + s * c >= 0 else None, s) if c else slice(0, 0)
                       for b, s, c in plan)
        out = x[window]
        return out.copy()


# -- pad ----------------------------------------------------------------------------------------
PAD_MODES = ("constant", "reflect", "edge", "wrap")


def pad_plan(shape: Sequence[int], pads: Sequence[int], mode: str) -> list[tuple]:
    """Per axis (crop_begin, pad_begin, kept, out_len), from ONNX pads (all begins, then all ends)."""
    pads = check_int_tuple(pads, "pad", "pads")
    ndim = len(shape)
    if len(pads) != 2 * ndim:
        raise OpError(f"pad: pads {pads} must hold 2 * rank = {2 * ndim} entries (begins, then ends)")
    if mode not in PAD_MODES:
        raise OpError(f"pad: mode {mode!r} is not one of {PAD_MODES}")
    plan = []
    for a, d in enumerate(shape):
        b, e = pads[a], pads[ndim + a]
        crop_b, crop_e = max(-b, 0), max(-e, 0)
        kept = int(d) - crop_b - crop_e
        if kept < 0:
            raise OpError(f"pad: pads {b}, {e} crop more than the {d} elements of axis {a}")
        pb, pe = max(b, 0), max(e, 0)
        if kept == 0 and (pb or pe) and mode != "constant":
            raise OpError(f"pad: mode {mode} cannot pad axis {a}, which has no elements left")
        plan.append((crop_b, pb, kept, kept + pb + pe))
    return plan


def _fold(i, kept: int, mode: str, reach: int):
    """Index `i` of the padded axis folded into [0, kept) as `mode` says (not for constant);
    `reach`: the most any output lies outside [0, kept)."""
    if mode == "edge":
        return te.min(te.max(i, 0), kept - 1)
    if mode == "wrap":
        return i % kept
    if kept == 1:                                    # reflect
        return te.const(0, "int32")
    if reach <= kept - 1:
        # one reflection at either end: (kept - 1) - |(kept - 1) - |i||, with |a| as max(a, -a),
        # clamps that loop partitioning drops in the middle of a row (so its vectors read
        # contiguous memory; the remainder form below gathered: 2.1x ONNX Runtime's time)
        t = te.max(i, -i)
        return (kept - 1) - te.max((kept - 1) - t, t - (kept - 1))
    period = 2 * (kept - 1)
    m = i % period
    return te.if_then_else(m < kept, m, period - m)


@op("pad", pattern=INJECTIVE, attr_defaults={"mode": "constant", "value": 0.0})
class pad:
    """Pad (or, with negative pads, crop) every axis; `pads` is (begin_0.., end_0..)."""

    def infer(x: TensorType, pads: Sequence[int], mode: str = "constant", value: float = 0.0) -> TensorType:
        plan = pad_plan(x.shape, pads, mode)
        return TensorType(tuple(p[3] for p in plan), x.dtype)

    def compute(x: te.Tensor, pads: Sequence[int], mode: str = "constant", value: float = 0.0) -> te.Tensor:
        plan = pad_plan(const_shape(x), pads, mode)
        fill = te.const(_fill_value(value, x.dtype), x.dtype)

        def f(*o):
            index, inside = [], []
            for j, (crop_b, pb, kept, out_len) in zip(o, plan):
                i = j - pb if pb else j
                if pb or out_len > kept:
                    if mode == "constant":
                        inside.append(te.all(i >= 0, i < kept) if pb else i < kept)
                    else:
                        i = _fold(i, kept, mode, max(pb, out_len - pb - kept))
                index.append(i + crop_b if crop_b else i)
            load = x[tuple(index)]
            return te.if_then_else(te.all(*inside), load, fill) if inside else load

        return te.compute(tuple(p[3] for p in plan), f, name="pad", tag="pad")

    def reference(x: np.ndarray, pads: Sequence[int], mode: str = "constant", value: float = 0.0) -> np.ndarray:
        plan = pad_plan(x.shape, pads, mode)
        kept = x[tuple(slice(c, c + k) for c, _, k, _ in plan)]
        width = [(pb, n - k - pb) for _, pb, k, n in plan]
        if mode == "constant":
            return np.pad(kept, width, mode="constant",
                          constant_values=np.asarray(_fill_value(value, x.dtype.name), x.dtype))
        return np.pad(kept, width, mode=mode).astype(x.dtype)


def _fill_value(value, dtype: str):
    """The constant-mode fill as a Python value of the tensor's kind (floats truncate for ints)."""
    if dt.is_bool(dtype):
        return bool(value)
    if dt.is_float(dtype):
        return float(value)
    return int(value)
