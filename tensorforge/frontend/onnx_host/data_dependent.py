"""Ops whose output shape depends on the values of their inputs, run on the host: NonZero (when
its input is computed; a constant one folds), Unique, Compress, NonMaxSuppression."""
from __future__ import annotations

import numpy as np

from ...runtime import host_kernels
from . import contiguous, host_op


@host_op("NonZero")
def non_zero(ctx, inputs, attrs):
    x = np.asarray(inputs[0])
    return [np.asarray(np.nonzero(x.reshape(1) if x.ndim == 0 else x), dtype=np.int64).reshape(max(x.ndim, 1), -1)]


@host_op("Compress")
def compress(ctx, inputs, attrs):
    x, cond = inputs[0], np.asarray(inputs[1]).astype(bool).reshape(-1)
    axis = attrs.get("axis")
    if axis is None:
        flat = x.reshape(-1)
        if cond.size > flat.size:
            raise ctx.error(f"condition has {cond.size} elements, more than the input's {flat.size}")
        return [flat[:cond.size][cond]]
    axis = int(axis)
    if not -x.ndim <= axis < x.ndim:
        raise ctx.error(f"axis {axis} is out of range for rank {x.ndim}")
    if cond.size > x.shape[axis]:
        raise ctx.error(f"condition has {cond.size} elements, more than axis {axis}'s {x.shape[axis]}")
    return [contiguous(np.compress(cond, x, axis=axis))]


@host_op("Unique")
def unique(ctx, inputs, attrs):
    """Y (the unique elements or slices), the index of each one's first occurrence, the index in
    Y of every input element (or slice) and the counts.  sorted=1 sorts Y ascending
    (lexicographically for slices); sorted=0 keeps the order of first occurrence."""
    x = inputs[0]
    axis = attrs.get("axis")
    if axis is not None:
        axis = int(axis)
        if not -x.ndim <= axis < x.ndim:
            raise ctx.error(f"axis {axis} is out of range for rank {x.ndim}")
        axis %= x.ndim
    _, first, inverse, counts = np.unique(x if axis is not None else x.reshape(-1), return_index=True,
                                          return_inverse=True, return_counts=True, axis=axis)
    inverse = inverse.reshape(-1)
    if not int(attrs.get("sorted", 1)):
        order = np.argsort(first, kind="stable")        # sorted position -> occurrence order
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    y = np.take(x, first, axis=axis) if axis is not None else x.reshape(-1)[first]
    i64 = np.int64
    return [contiguous(y), first.astype(i64), inverse.astype(i64), counts.astype(i64)]


@host_op("NonMaxSuppression")
def non_max_suppression(ctx, inputs, attrs):
    boxes, scores = inputs[0], inputs[1]

    def scalar(k, default, kind):
        return kind(np.asarray(inputs[k]).reshape(-1)[0]) if len(inputs) > k and inputs[k] is not None \
            and np.asarray(inputs[k]).size else default

    return [host_kernels.non_max_suppression(
        boxes, scores, scalar(2, 0, int), scalar(3, 0.0, float), scalar(4, float("-inf"), float),
        int(attrs.get("center_point_box", 0)))]
