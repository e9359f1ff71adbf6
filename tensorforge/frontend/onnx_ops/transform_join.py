"""ONNX Concat, Split, Tile, Slice, Pad, DepthToSpace and SpaceToDepth -> tensorforge ops
(frontend -> Graph).

* Split: sizes from the `split` attribute (before opset 13) or input (13+); else `num_outputs`
  (18+) or the node's output count, in pieces of ceil(dim / n) with a smaller last one.
* Slice: starts/ends/axes as attributes before opset 10, then (with steps) as constant inputs.
* Pad: `paddings` (opset 1), `pads` + `value` attributes (2-10), then constant inputs pads,
  constant_value and (18+) axes; the op receives full-rank pads.
"""
from __future__ import annotations

from ...ops.registry import OpError
from ...ops.transform_join import equal_split
from ..onnx import converter
from .elemwise_util import to_narrow, widen_narrow
from .transform_util import const_ints, const_scalar, input_at, present


@converter("Concat")
def convert_concat(ctx, inputs, attrs):
    axis = attrs.get("axis", 1 if ctx.opset < 4 else None)
    if axis is None:
        raise ValueError("Concat needs the axis attribute")
    return ctx.add1("concat", [v for v in inputs if v is not None], {"axis": int(axis)})


@converter("Split")
def convert_split(ctx, inputs, attrs):
    x, axis = inputs[0], int(attrs.get("axis", 0))
    dim = x.shape[axis % max(x.ndim, 1)] if -x.ndim <= axis < x.ndim else None
    if dim is None:
        raise OpError(f"split: axis {axis} is out of range for a tensor of rank {x.ndim}")
    sizes = None
    if present(input_at(inputs, 1)):
        sizes = const_ints(ctx, inputs[1], "Split split")
    elif attrs.get("split"):
        sizes = tuple(int(s) for s in attrs["split"])
    elif "num_outputs" in attrs:
        sizes = equal_split(dim, int(attrs["num_outputs"]))
    else:
        sizes = equal_split(dim, len(ctx.outputs) or 1)
    if len(sizes) != len(ctx.outputs) and ctx.outputs:
        raise OpError(f"split: {len(sizes)} pieces {sizes} for {len(ctx.outputs)} outputs")
    return ctx.add("split", [x], {"axis": axis, "sizes": sizes})


@converter("Tile", since=6)
def convert_tile(ctx, inputs, attrs):
    if ctx.opset < 6:
        raise NotImplementedError(f"node {ctx.node_name} (Tile, opset {ctx.opset}): the opset-1 form "
                                  "(tiles, axis inputs) is not supported")
    return ctx.add1("tile", [inputs[0]], {"repeats": const_ints(ctx, inputs[1], "Tile repeats")})


@converter("Slice")
def convert_slice(ctx, inputs, attrs):
    if ctx.opset < 10:
        starts, ends = tuple(attrs["starts"]), tuple(attrs["ends"])
        axes, steps = attrs.get("axes"), None
    else:
        starts = const_ints(ctx, inputs[1], "Slice starts")
        ends = const_ints(ctx, inputs[2], "Slice ends")
        axes = const_ints(ctx, inputs[3], "Slice axes") if input_at(inputs, 3) is not None else None
        steps = const_ints(ctx, inputs[4], "Slice steps") if input_at(inputs, 4) is not None else None
    return ctx.add1("slice", [inputs[0]], {"starts": starts, "ends": ends,
                                           "axes": tuple(axes) if axes is not None else None, "steps": steps})


def _full_pads(rank: int, pads: tuple, axes: tuple | None) -> tuple:
    """ONNX pads for `axes` (begins, then ends) spread over every axis of the input."""
    if axes is None:
        return pads
    if len(pads) != 2 * len(axes):
        raise OpError(f"pad: {len(pads)} pads for {len(axes)} axes")
    full = [0] * (2 * rank)
    for k, a in enumerate(axes):
        a = a + rank if a < 0 else a
        full[a], full[rank + a] = pads[k], pads[len(axes) + k]
    return tuple(full)


@converter("Pad")
def convert_pad(ctx, inputs, attrs):
    x, mode = inputs[0], attrs.get("mode", "constant")
    if ctx.opset < 11:
        pads = tuple(attrs.get("pads", attrs.get("paddings", ())))
        value = float(attrs.get("value", 0.0))
        axes = None
    else:
        pads = const_ints(ctx, inputs[1], "Pad pads")
        cv = input_at(inputs, 2)
        value = const_scalar(ctx, cv, "Pad constant_value") if present(cv) else 0
        axes = const_ints(ctx, inputs[3], "Pad axes") if present(input_at(inputs, 3)) else None
    # a narrow type is padded in a wider one that holds each of its values exactly (a kernel
    # cannot write a float8 or int4 fill value), and converted back
    out = ctx.add1("pad", [widen_narrow(ctx, x)], {"pads": _full_pads(x.ndim, pads, axes), "mode": mode, "value": value})
    return to_narrow(ctx, out, x.dtype)


@converter("DepthToSpace")
def convert_depth_to_space(ctx, inputs, attrs):
    if inputs[0].ndim != 4:      # the op's 5-D form is the blocked layout's, not ONNX's
        raise OpError(f"DepthToSpace: input must be 4-D (N, C, H, W), got shape {tuple(inputs[0].shape)}")
    return ctx.add1("depth_to_space", [inputs[0]], {"blocksize": int(attrs["blocksize"]),
                                                    "mode": attrs.get("mode", "DCR")})


@converter("SpaceToDepth")
def convert_space_to_depth(ctx, inputs, attrs):
    return ctx.add1("space_to_depth", [inputs[0]], {"blocksize": int(attrs["blocksize"]),
                                                    "mode": attrs.get("mode", "DCR")})
