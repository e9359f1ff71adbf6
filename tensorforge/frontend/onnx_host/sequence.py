"""Sequence and optional ops on the host: a sequence is a Python list of arrays, an empty
optional is None (ONNX's SequenceEmpty/Construct/Insert/At/Erase/Length, SplitToSequence,
ConcatFromSequence, Optional, OptionalHasElement, OptionalGetElement, and Identity of these)."""
from __future__ import annotations

import numpy as np

from . import HostContext, contiguous, host_op


def _position(ctx: HostContext, pos, length: int, inclusive_end: bool) -> int:
    """A sequence position, negative counting from the end; `inclusive_end` allows `length`
    (inserting at the end)."""
    p = int(np.asarray(pos).reshape(()))
    high = length if inclusive_end else length - 1
    if not -length <= p <= high:
        raise ctx.error(f"position {p} is out of range for a sequence of length {length}")
    return p + length if p < 0 else p


def _sequence(ctx: HostContext, value) -> list:
    if not isinstance(value, list):
        raise ctx.error(f"expected a sequence, got {type(value).__name__}")
    return value


@host_op("SequenceEmpty")
def sequence_empty(ctx, inputs, attrs):
    return [[]]


@host_op("SequenceConstruct")
def sequence_construct(ctx, inputs, attrs):
    dtypes = {a.dtype for a in inputs}
    if len(dtypes) > 1:
        raise ctx.error(f"the tensors of a sequence must have one element type, got {sorted(map(str, dtypes))}")
    return [list(inputs)]


@host_op("SequenceInsert")
def sequence_insert(ctx, inputs, attrs):
    seq = list(_sequence(ctx, inputs[0]))
    pos = len(seq) if len(inputs) < 3 or inputs[2] is None else _position(ctx, inputs[2], len(seq), True)
    seq.insert(pos, inputs[1])
    return [seq]


@host_op("SequenceAt")
def sequence_at(ctx, inputs, attrs):
    seq = _sequence(ctx, inputs[0])
    return [seq[_position(ctx, inputs[1], len(seq), False)]]


@host_op("SequenceErase")
def sequence_erase(ctx, inputs, attrs):
    seq = list(_sequence(ctx, inputs[0]))
    if not seq:
        raise ctx.error("cannot erase from an empty sequence")
    pos = len(seq) - 1 if len(inputs) < 2 or inputs[1] is None else _position(ctx, inputs[1], len(seq), False)
    del seq[pos]
    return [seq]


@host_op("SequenceLength")
def sequence_length(ctx, inputs, attrs):
    return [np.asarray(len(_sequence(ctx, inputs[0])), dtype=np.int64)]


@host_op("SplitToSequence")
def split_to_sequence(ctx, inputs, attrs):
    x = inputs[0]
    axis = int(attrs.get("axis", 0))
    axis = axis + x.ndim if axis < 0 else axis
    if not 0 <= axis < x.ndim:
        raise ctx.error(f"axis {attrs.get('axis', 0)} is out of range for rank {x.ndim}")
    n = x.shape[axis]
    split = inputs[1] if len(inputs) > 1 else None
    if split is None:
        parts = np.split(x, n, axis=axis) if n else []
        if int(attrs.get("keepdims", 1)) == 0:
            parts = [np.squeeze(p, axis=axis) for p in parts]
        return [[contiguous(p) for p in parts]]
    split = np.asarray(split).astype(np.int64)
    if split.ndim == 0:
        step = int(split)
        if step <= 0:
            raise ctx.error(f"split must be positive, got {step}")
        sizes = [step] * (n // step) + ([n % step] if n % step else [])
    else:
        sizes = [int(s) for s in split]
        if sum(sizes) != n or any(s < 0 for s in sizes):
            raise ctx.error(f"split sizes {sizes} do not add up to the axis length {n}")
    bounds = np.cumsum([0] + sizes)
    return [[contiguous(np.take(x, np.arange(bounds[i], bounds[i + 1]), axis=axis))
             for i in range(len(sizes))]]


@host_op("ConcatFromSequence")
def concat_from_sequence(ctx, inputs, attrs):
    seq = _sequence(ctx, inputs[0])
    if not seq:
        raise ctx.error("cannot concatenate an empty sequence")
    axis = int(attrs["axis"]) if "axis" in attrs else 0
    if int(attrs.get("new_axis", 0)):
        rank = seq[0].ndim + 1
        if not -rank <= axis < rank:
            raise ctx.error(f"axis {axis} is out of range for rank {rank}")
        return [np.stack(seq, axis=axis)]
    rank = seq[0].ndim
    if not -rank <= axis < rank:
        raise ctx.error(f"axis {axis} is out of range for rank {rank}")
    return [np.concatenate(seq, axis=axis)]


@host_op("Identity")
def identity(ctx, inputs, attrs):
    """Identity of a sequence or optional (a tensor's converts to a graph op)."""
    return [inputs[0]]


@host_op("Optional")
def optional(ctx, inputs, attrs):
    return [inputs[0] if inputs else None]


@host_op("OptionalHasElement")
def optional_has_element(ctx, inputs, attrs):
    return [np.asarray(bool(inputs) and inputs[0] is not None)]


@host_op("OptionalGetElement")
def optional_get_element(ctx, inputs, attrs):
    if inputs[0] is None:
        raise ctx.error("the optional is empty")
    return [inputs[0]]
