"""ATen writes into positions and lookups in sorted lists -> scatter_elements, scatter_nd, where,
gather and comparisons.

- `scatter` (src, value, reduce), `scatter_add`, `scatter_reduce` -> scatter_elements: the
  updates are `src` cut to the index's shape (PyTorch reads only that corner of it) or the value
  spread to it; scatter_reduce's sum / prod / amax / amin combine with the reduction of the same
  name, and with include_self=False the written positions are first set to the reduction's
  identity.  Its "mean" is refused.
- `index_put` (x[idx] = v, x[:, idx] += v, x[mask] = v, index_fill, index_copy, index_add):
  integer indices on adjacent axes -> scatter_nd over those axes brought to the front (the
  values broadcast to the indexed shape, as PyTorch broadcasts them); a boolean mask with values
  that do not depend on how many positions it selects (a scalar, or one row for every
  selected position) -> where.
- `slice_scatter` and `select_scatter` (y[:, 2:4] = z, y[:, 1] = z after functionalization) ->
  a concat of the parts around the slice and the values, or for a step above 1 a gather and a
  where over the slice's positions.
- `masked_scatter` (the set positions take the source's elements in order) -> the running count
  of set positions (cumsum) picks each one's element from the flattened source.
- `unfold` (x.unfold(dim, size, step): sliding windows) -> one gather of every window's
  positions, the window axis moved last.
- `searchsorted` and `bucketize` -> the count of boundaries below each value (at or below with
  right=True): a comparison against every boundary and a sum.
"""
from __future__ import annotations

import numpy as np

from ..torch_convert import aten
from .common import as_value, broadcast_to, cast, norm_dim

_REDUCE = {"sum": "add", "prod": "mul", "amax": "max", "amin": "min"}
_IDENTITY = {"sum": 0, "prod": 1, "amax": -np.inf, "amin": np.inf}


def _cut(ctx, src, shape: tuple):
    """`src` cut to `shape` from its start on every axis (a no-op where they agree)."""
    if tuple(src.shape) == tuple(shape):
        return src
    axes = tuple(k for k, (s, n) in enumerate(zip(src.shape, shape)) if s != n)
    return ctx.add1("slice", [src], {"starts": (0,) * len(axes), "ends": tuple(shape[k] for k in axes),
                                     "axes": axes, "steps": (1,) * len(axes)})


def _spread(ctx, value, like, shape: tuple):
    """A scalar (or a tensor broadcastable to `shape`) as a tensor of `shape` in `like`'s dtype."""
    return broadcast_to(ctx, cast(ctx, as_value(ctx, value, like), like.dtype), shape)


def _identity(ctx, like, reduce: str):
    limit = _IDENTITY[reduce]
    if np.isinf(limit) and np.dtype(like.dtype).kind in "iu":
        info = np.iinfo(like.dtype)
        limit = info.min if limit < 0 else info.max
    return ctx.const(np.asarray(limit).astype(like.dtype))


@aten("scatter", "scatter_add", "scatter_reduce")
def scatter(ctx, a: dict):
    x, index = a["self"], a["index"]
    dim = norm_dim(int(a["dim"]), len(x.shape))
    name = ctx.op.split(".")[1]
    shape = tuple(index.shape)
    src = a.get("src")
    updates = _cut(ctx, cast(ctx, src, x.dtype), shape) if src is not None else _spread(ctx, a.get("value"), x, shape)
    reduce = a.get("reduce")
    if name == "scatter_add":
        reduction = "add"
    elif name == "scatter":
        reduction = {None: "none", "add": "add", "multiply": "mul"}.get(reduce)
        if reduction is None:
            raise ctx.unsupported(f"scatter with reduce={reduce!r}")
    else:
        if reduce not in _REDUCE:
            raise ctx.unsupported(f"scatter_reduce with reduce={reduce!r} (sum, prod, amax and amin are supported)")
        reduction = _REDUCE[reduce]
        if not a.get("include_self", True):
            # the positions written start from the reduction's identity instead of x
            x = ctx.add1("scatter_elements", [x, index, _spread(ctx, _identity(ctx, x, reduce), x, shape)],
                         {"axis": dim, "reduction": "none"})
    return ctx.add1("scatter_elements", [x, index, updates], {"axis": dim, "reduction": reduction})


@aten("index_put")
def index_put(ctx, a: dict):
    x, values = a["self"], cast(ctx, as_value(ctx, a["values"], a["self"]), a["self"].dtype)
    indices = list(a["indices"])
    accumulate = bool(a.get("accumulate", False))
    axes = [k for k, i in enumerate(indices) if i is not None]
    if not axes:
        raise ctx.unsupported("index_put with no index tensor")
    if any(indices[k].dtype == "bool" for k in axes):
        return _put_masked(ctx, x, indices, axes, values, accumulate)
    if axes != list(range(axes[0], axes[-1] + 1)):
        raise ctx.unsupported("index_put with index tensors on axes that are not adjacent")
    first, k = axes[0], len(axes)
    batch = tuple(np.broadcast_shapes(*[tuple(indices[j].shape) for j in axes]))
    parts = [ctx.add1("unsqueeze", [broadcast_to(ctx, cast(ctx, indices[j], "int64"), batch)], {"axes": (len(batch),)})
             for j in axes]
    where = parts[0] if k == 1 else ctx.add1("concat", parts, {"axis": len(batch)})
    rank = len(x.shape)
    before, after = tuple(x.shape[:first]), tuple(x.shape[first + k:])
    # PyTorch broadcasts the values to the indexed result: x's leading axes, the indices' shape,
    # x's trailing axes; scatter_nd wants the indices' axes first
    updates = _spread(ctx, values, x, before + batch + after)
    reduction = "add" if accumulate else "none"
    if first == 0:
        return ctx.add1("scatter_nd", [x, where, updates], {"reduction": reduction})
    perm = tuple(range(first, first + k)) + tuple(range(first)) + tuple(range(first + k, rank))
    nb = len(batch)
    perm_updates = tuple(range(first, first + nb)) + tuple(range(first)) + tuple(range(first + nb, first + nb + len(after)))
    moved = ctx.add1("transpose", [x], {"perm": perm})
    written = ctx.add1("scatter_nd", [moved, where, ctx.add1("transpose", [updates], {"perm": perm_updates})],
                       {"reduction": reduction})
    return ctx.add1("transpose", [written], {"perm": tuple(int(p) for p in np.argsort(perm))})


def _put_masked(ctx, x, indices, axes, values, accumulate: bool):
    """x[mask] = values (+= with accumulate): a where over the mask, broadcast along the axes it
    does not cover.  Values the same for every selected position (a scalar, one row) broadcast;
    one value per selected position (their count known in this graph: a stretch after the
    selection, or a graph dynamo cut there) is gathered for each masked position by its rank
    among them, the running count of the mask."""
    if len(axes) != 1:
        raise ctx.unsupported("index_put with a boolean mask beside other index tensors")
    first, mask = axes[0], indices[axes[0]]
    m = len(mask.shape)
    rank = len(x.shape)
    before, after = tuple(x.shape[:first]), tuple(x.shape[first + m:])
    vshape = tuple(values.shape)
    full = ctx.add1("reshape", [mask], {"shape": (1,) * first + tuple(mask.shape) + (1,) * (rank - first - m)})
    lead = len(vshape) - len(after)
    if lead > 1 or (lead == 1 and vshape[0] != 1):
        count = int(vshape[-len(after) - 1]) if after else int(vshape[-1])
        try:     # PyTorch broadcasts the values to the selection: x's leading axes, the count, x's trailing axes
            np.broadcast_shapes(vshape, before + (count,) + after)
        except ValueError:
            raise ctx.unsupported(f"x[mask] = values: values of shape {vshape} do not broadcast to the "
                                  f"selection's {before + (count,) + after}") from None
        if count == 0:
            return x                    # nothing selected
        values = _spread(ctx, values, x, before + (count,) + after)
        # each masked position's rank among the selected ones, clipped into the values (a mask
        # with more set than the values have rows is PyTorch's error; here it reads the last)
        flat = ctx.add1("cast", [ctx.add1("reshape", [mask], {"shape": (-1,)})], {"dtype": "int64"})
        rank_of = ctx.add1("sub", [ctx.add1("cumsum", [flat], {"axis": 0}), ctx.const(np.asarray(1, np.int64))])
        rank_of = ctx.add1("minimum", [ctx.add1("maximum", [rank_of, ctx.const(np.asarray(0, np.int64))]),
                                       ctx.const(np.asarray(count - 1, np.int64))])
        rank_of = ctx.add1("reshape", [rank_of], {"shape": tuple(mask.shape)})
        values = ctx.add1("gather", [values, rank_of], {"axis": first})      # before + mask's shape + after
    else:
        try:
            np.broadcast_shapes(vshape[max(lead, 0):], after)
        except ValueError:
            raise ctx.unsupported(f"x[mask] = values: values of shape {vshape} do not broadcast to rows of {after}") \
                from None
        if lead == 1:
            values = ctx.add1("reshape", [values], {"shape": vshape[1:]})
    if accumulate:
        zero = ctx.const(np.zeros((), x.dtype))
        return ctx.add1("add", [x, ctx.add1("where", [full, values, zero])])
    return ctx.add1("where", [full, values, x])


@aten("unfold")
def unfold(ctx, a: dict):
    """Windows of `size` every `step` positions along `dimension`, as a new last axis."""
    x = a["self"]
    if not x.shape:
        raise ctx.unsupported("unfold of a 0-d tensor")
    d = norm_dim(int(a["dimension"]), len(x.shape))
    size, step = int(a["size"]), int(a["step"])
    count = (int(x.shape[d]) - size) // step + 1
    positions = (np.arange(count)[:, None] * step + np.arange(size)[None, :]).reshape(-1).astype(np.int64)
    picked = ctx.add1("gather", [x, ctx.const(positions)], {"axis": d})
    split = tuple(x.shape[:d]) + (count, size) + tuple(x.shape[d + 1:])
    windows = ctx.add1("reshape", [picked], {"shape": split})
    rank = len(split)
    perm = tuple(k for k in range(rank) if k != d + 1) + (d + 1,)
    return windows if d + 1 == rank - 1 else ctx.add1("transpose", [windows], {"perm": perm})


@aten("searchsorted", "bucketize")
def searchsorted(ctx, a: dict):
    """searchsorted(boundaries, values) / bucketize(values, boundaries): per value the number of
    boundaries below it (at or below it with right=True or side="right")."""
    name = ctx.op.split(".")[1]
    if name == "searchsorted":
        bounds, values = a["sorted_sequence"], a["self"]
        if a.get("sorter") is not None:
            raise ctx.unsupported("searchsorted with a sorter")
        right = bool(a.get("right")) or a.get("side") == "right"
    else:
        values, bounds = a["self"], a["boundaries"]
        right = bool(a.get("right"))
    values = as_value(ctx, values, bounds)
    dtype = np.result_type(bounds.dtype, values.dtype).name
    bounds, values = cast(ctx, bounds, dtype), cast(ctx, values, dtype)
    if len(bounds.shape) > 1 and tuple(bounds.shape[:-1]) != tuple(values.shape[:-1]):
        raise ctx.unsupported("searchsorted with boundaries whose leading axes differ from the values'")
    vrank = len(values.shape)
    v = ctx.add1("unsqueeze", [values], {"axes": (vrank,)})                     # (..., n, 1)
    b = bounds if len(bounds.shape) == 1 else ctx.add1("unsqueeze", [bounds], {"axes": (vrank - 1,)})  # (..., 1, m)
    below = ctx.add1("less_or_equal" if right else "less", [b, v])
    count = ctx.add1("reduce_sum", [ctx.add1("cast", [below], {"dtype": "int64"})], {"axes": (vrank,), "keepdims": 0})
    return cast(ctx, count, ctx.out_dtypes[0])


@aten("slice_scatter", "select_scatter")
def slice_scatter(ctx, a: dict):
    """y[:, start:end:step] = src and y[:, i] = src as functionalization writes them: x with the
    slice's positions along `dim` taken from `src`.  A step of 1 is a concat of x's parts around
    the slice and src; other steps gather src at every position and keep x's elements off the
    slice (a constant mask)."""
    x, src = a["self"], cast(ctx, a["src"], a["self"].dtype)
    dim = norm_dim(int(a["dim"]), len(x.shape))
    n = int(x.shape[dim])
    if ctx.op.split(".")[1] == "select_scatter":
        index = int(a["index"])
        start, stop, step = index % n if n else 0, (index % n if n else 0) + 1, 1
        src = ctx.add1("unsqueeze", [src], {"axes": (dim,)})
    else:
        start, stop, step = slice(a.get("start"), a.get("end"), int(a.get("step") or 1)).indices(n)
    positions = range(start, stop, step)
    if not positions:
        return x
    if step == 1:
        parts = []
        if start > 0:
            parts.append(ctx.add1("slice", [x], {"starts": (0,), "ends": (start,), "axes": (dim,), "steps": (1,)}))
        parts.append(broadcast_to(ctx, src, tuple(x.shape[:dim]) + (stop - start,) + tuple(x.shape[dim + 1:])))
        if stop < n:
            parts.append(ctx.add1("slice", [x], {"starts": (stop,), "ends": (n,), "axes": (dim,), "steps": (1,)}))
        return parts[0] if len(parts) == 1 else ctx.add1("concat", parts, {"axis": dim})
    rank = len(x.shape)
    source = np.clip((np.arange(n) - start) // step, 0, len(positions) - 1).astype(np.int64)
    picked = ctx.add1("gather", [src, ctx.const(source)], {"axis": dim})
    on = np.zeros(n, bool)
    on[list(positions)] = True
    mask = ctx.const(on.reshape((1,) * dim + (n,) + (1,) * (rank - dim - 1)))
    return ctx.add1("where", [mask, picked, x])


@aten("masked_scatter")
def masked_scatter(ctx, a: dict):
    """x.masked_scatter(mask, source): the positions where the mask is set take source's
    elements in order (row-major).  The k-th set position reads element k of the flattened
    source, k being the running count of set positions: a cumsum, a gather and a where."""
    x, mask = a["self"], a["mask"]
    shape = tuple(x.shape)
    total = int(np.prod(shape, dtype=np.int64))
    source = ctx.add1("reshape", [cast(ctx, a["source"], x.dtype)], {"shape": (-1,)})
    flat_mask = ctx.add1("reshape", [broadcast_to(ctx, mask, shape)], {"shape": (total,)})
    count = ctx.add1("cumsum", [ctx.add1("cast", [flat_mask], {"dtype": "int64"})], {"axis": 0})
    index = ctx.add1("maximum", [ctx.add1("sub", [count, ctx.const(np.asarray(1, np.int64))]),
                                 ctx.const(np.asarray(0, np.int64))])
    taken = ctx.add1("gather", [source, index], {"axis": 0})
    flat = ctx.add1("where", [flat_mask, taken, ctx.add1("reshape", [x], {"shape": (total,)})])
    return ctx.add1("reshape", [flat], {"shape": shape})
