"""ONNX CenterCropPad and ReverseSequence -> existing graph ops (frontend -> Graph).

* CenterCropPad (opset 18) brings each listed axis to the requested length around its centre:
  it crops when the axis is longer and zero-pads when it is shorter.  A difference d between
  the two lengths is split d // 2 at the start and the rest at the end, as in the ONNX
  reference, so one `pad` node with negative (crop) and positive (pad) amounts does it.
* ReverseSequence (opset 10) reverses the first sequence_lens[b] entries along time_axis for
  every batch entry b and copies the rest: a gather_elements along the time axis whose source
  index is len-1-t for t < len, else t.  The lengths may be a run-time input.
"""
from __future__ import annotations

import numpy as np

from ...ops.common import normalize_axis
from ..onnx import converter
from .transform_util import const_ints


@converter("CenterCropPad", since=18)
def center_crop_pad(ctx, inputs: list, attrs: dict):
    x = inputs[0]
    rank = len(x.shape)
    shape = const_ints(ctx, inputs[1], "CenterCropPad shape")
    axes = [normalize_axis(int(a), rank, "CenterCropPad") for a in attrs.get("axes", range(rank))]
    if len(shape) != len(axes):
        raise ValueError(f"shape {shape} must give one length per axis of {tuple(axes)}")
    if len(set(axes)) != len(axes):
        raise ValueError(f"axes {tuple(axes)} must not repeat an axis")
    pads = [0] * (2 * rank)
    for a, want in zip(axes, shape):
        if want < 0:
            raise ValueError(f"shape {shape} must hold lengths >= 0")
        diff = want - x.shape[a]
        begin = diff // 2 if diff >= 0 else -((-diff) // 2)
        pads[a], pads[rank + a] = begin, diff - begin
    if not any(pads):
        return ctx.add1("identity", [x])
    return ctx.add1("pad", [x], {"pads": tuple(pads), "mode": "constant", "value": 0})


@converter("ReverseSequence", since=10)
def reverse_sequence(ctx, inputs: list, attrs: dict):
    x, lens = inputs[0], inputs[1]
    rank = len(x.shape)
    time_axis, batch_axis = int(attrs.get("time_axis", 0)), int(attrs.get("batch_axis", 1))
    if rank < 2:
        raise ValueError(f"input has shape {tuple(x.shape)}; it must have rank >= 2")
    if {time_axis, batch_axis} != {0, 1}:
        raise ValueError(f"time_axis={time_axis} and batch_axis={batch_axis} must be 0 and 1, one each")
    if tuple(lens.shape) != (x.shape[batch_axis],):
        raise ValueError(f"sequence_lens has shape {tuple(lens.shape)}; it must be ({x.shape[batch_axis]},), "
                         "one length per batch entry")
    steps = x.shape[time_axis]
    t_shape = [1] * rank
    t_shape[time_axis] = steps
    b_shape = [1] * rank
    b_shape[batch_axis] = x.shape[batch_axis]
    t = ctx.const(np.arange(steps, dtype=np.int64).reshape(t_shape))
    n = ctx.add1("reshape", [lens if lens.dtype == "int64" else ctx.add1("cast", [lens], {"dtype": "int64"})],
                 {"shape": tuple(b_shape)})
    flipped = ctx.add1("sub", [ctx.add1("sub", [n, ctx.const(np.int64(1))]), t])
    source = ctx.add1("where", [ctx.add1("less", [t, n]), flipped, t])
    source = ctx.add1("expand", [source], {"shape": tuple(x.shape)})
    return ctx.add1("gather_elements", [x, source], {"axis": time_axis})
