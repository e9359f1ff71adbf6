"""Host kernels: the steps a compiled model runs in NumPy instead of generated code.

Some ops do not fit a tensor expression (a scatter whose targets are index values known only
at run time, a sort, non-max suppression of boxes).  The graph executor runs them as "opaque"
steps that name one of the kernels below.  They live in the runtime, not with the ops, so that a loaded model needs
nothing above `runtime/`; the ops use them as their NumPy reference, so compile-time checks
and run-time results come from one implementation.

Every kernel takes input arrays and the op's attributes and returns one array or a tuple.
Inputs were checked when the model was compiled (shapes, dtypes, attributes); index values
are data and are checked here.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from . import host_convert, host_pool

_UFUNCS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _axis(axis: int, ndim: int, name: str) -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise ValueError(f"{name}: axis {axis} is out of range for rank {ndim}")
    return axis + ndim if axis < 0 else axis


def _wrapped(idx: np.ndarray, dim: int, name: str) -> np.ndarray:
    """Indices as int64 with negative ones counted from the end; IndexError when one is out of
    range for an axis of size `dim`."""
    idx = np.asarray(idx).astype(np.int64)
    if idx.size and (idx.min() < -dim or idx.max() >= dim):
        raise IndexError(f"{name}: an index is out of range for an axis of size {dim}")
    return np.where(idx < 0, idx + dim, idx)


def _apply(out: np.ndarray, where: tuple, updates: np.ndarray, reduction: str) -> np.ndarray:
    """Scatter `updates` into `out` at `where`; repeated targets combine with `reduction` through
    NumPy's unbuffered `ufunc.at` (with none, the last update wins, as in ONNX Runtime)."""
    if reduction == "none":
        out[where] = updates
    else:
        _UFUNCS[reduction].at(out, where, updates)
    return out


def scatter_elements(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, axis: int = 0,
                     reduction: str = "none") -> np.ndarray:
    """out = data; out[..., indices[i, j, ...], ...] (op)= updates[i, j, ...] along `axis`."""
    axis = _axis(axis, data.ndim, "scatter_elements")
    where = list(np.indices(indices.shape, sparse=True))
    where[axis] = _wrapped(indices, data.shape[axis], "scatter_elements")
    return _apply(data.copy(), tuple(np.broadcast_arrays(*where)), updates, reduction)


def scatter_nd(data: np.ndarray, indices: np.ndarray, updates: np.ndarray,
               reduction: str = "none") -> np.ndarray:
    """out = data; out[indices[i.., :]] (op)= updates[i..] (each index tuple names a slice)."""
    k = indices.shape[-1]
    idx = np.asarray(indices).astype(np.int64).reshape(-1, k)
    for j in range(k):
        idx[:, j] = _wrapped(idx[:, j], data.shape[j], "scatter_nd")
    flat_updates = updates.reshape((idx.shape[0],) + data.shape[k:])
    return _apply(data.copy(), tuple(idx.T), flat_updates, reduction)


def _order(x: np.ndarray, axis: int, largest: bool) -> np.ndarray:
    """Indices that sort `x` along `axis` by value, ties by ascending index (stable)."""
    if not largest:
        return np.argsort(x, axis=axis, kind="stable")
    # descending by value with ties by ascending index == reversed stable ascending sort of the
    # reversed array, mapped back to positions in the original
    n = x.shape[axis]
    order = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return n - 1 - np.flip(order, axis)


def topk(x: np.ndarray, k: int, axis: int = -1, largest: int = 1, sorted: int = 1) -> tuple:  # noqa: A002
    """The k largest (smallest) values along `axis` and their int64 indices, ordered as ONNX
    orders them (by value, equal values by ascending index; also when `sorted` is 0)."""
    a = _axis(axis, x.ndim, "topk")
    k = int(k)
    order = _top_by_extraction(x, a, k, bool(largest))
    if order is None:
        order = _top_order(x, a, k, bool(largest))
    if order is None:
        order = np.take(_order(x, a, bool(largest)), np.arange(k), axis=a)
    return np.take_along_axis(x, order, axis=a), order.astype(np.int64)


# the largest k that `_top_by_extraction` serves: k passes of argmax over the lines against one
# partition (3.3 ms on 512 lines of 1024, more than the whole top 5 by extraction)
EXTRACT_MAX_K = 8


def _top_by_extraction(x: np.ndarray, axis: int, k: int, largest: bool) -> np.ndarray | None:
    """The first k of `_order` for small k: k rounds of argmax (argmin) over each line, each
    taking the largest remaining value, the first of equal ones (ONNX's order), and replacing it
    by the dtype's lowest value.  None where that value (or a NaN) is already in the data, where
    a replaced element could be taken again: then `_top_order` decides.  A top 5 of 512 lines of
    1024 took 6 ms through the partition (ONNX Runtime 0.7-1.0)."""
    n = x.shape[axis]
    if not 0 < k <= EXTRACT_MAX_K or 4 * k > n or x.dtype.kind not in "fiu":
        return None
    if x.dtype.kind == "f":
        worst = -np.inf if largest else np.inf
        if np.isnan(x).any() or (x == worst).any():
            return None
    else:
        info = np.iinfo(x.dtype)
        worst = info.min if largest else info.max
        if (x == worst).any():
            return None
    moved = np.moveaxis(x, axis, -1)
    lines = moved.reshape(-1, n).copy()
    rows = np.arange(lines.shape[0])
    pick = np.argmax if largest else np.argmin
    order = np.empty((lines.shape[0], k), np.int64)
    for j in range(k):
        idx = pick(lines, axis=-1)
        order[:, j] = idx
        lines[rows, idx] = worst
    return np.moveaxis(order.reshape(moved.shape[:-1] + (k,)), -1, axis)


def _top_order(x: np.ndarray, axis: int, k: int, largest: bool) -> np.ndarray | None:
    """The first k of `_order` without sorting whole lines, or None where that does not apply.

    A partition finds each line's k-th value; the elements beyond it (at least as large, for
    largest) are the candidates, and where every line has exactly k of them (no tie straddles
    the k-th place, no NaN) only those k are sorted.  A top 5 of 512 lines of 1024 sorted them
    all: 30 ms, 37x ONNX Runtime's time."""
    n = x.shape[axis]
    if k == 0 or 4 * k > n or x.dtype.kind not in "fiu" or (x.dtype.kind == "f" and np.isnan(x).any()):
        return None
    lines = np.moveaxis(x, axis, -1)
    kth = np.partition(lines, n - k if largest else k - 1, axis=-1)[..., n - k if largest else k - 1]
    chosen = lines >= kth[..., None] if largest else lines <= kth[..., None]
    if not (chosen.sum(axis=-1) == k).all():
        return None
    index = np.nonzero(chosen)[-1].reshape(lines.shape[:-1] + (k,))      # ascending within a line
    values = np.take_along_axis(lines, index, axis=-1)
    # by value, equal values by ascending index (the candidates' indices ascend): `_order` of them
    rank = _order(values, values.ndim - 1, largest)
    return np.moveaxis(np.take_along_axis(index, rank, axis=-1), -1, axis)


def det(x: np.ndarray) -> np.ndarray:
    """Determinants of the square matrices in the last two axes (LU factorization with partial
    pivoting, LAPACK through NumPy); float16 and bfloat16 are computed in float32."""
    work = x if x.dtype in (np.float32, np.float64) else x.astype(np.float32)
    return np.asarray(np.linalg.det(work)).astype(x.dtype)


# -- roi_align -------------------------------------------------------------------------------------
# ONNX RoiAlign.  Each region of interest (x1, y1, x2, y2, scaled by spatial_scale, less 0.5 with
# half_pixel) is cut into output_height x output_width bins; each bin averages (or maxes) a grid
# of sampling points, sampling_ratio per side or ceil(bin size) when it is 0.  The grid depends
# on the region's size, a value known only at run time, which is why this is a host kernel.  A
# sample is bilinear in x[batch_index]; one more than a pixel outside the image reads 0; one
# within a pixel of it is clamped to the edge.  Max mode takes, as ONNX Runtime does, the largest
# weighted corner term of each sample, then the largest over the samples.


def _roi_axis(start, bin_size, bins: int, grid: int, length: int) -> tuple:
    """Sample positions along one axis, shape (bins, grid), in the type of `start`: (low index,
    high index, weight of high, inside)."""
    ft = type(start)
    pos = start + np.arange(bins, dtype=ft)[:, None] * bin_size \
        + (np.arange(grid, dtype=ft)[None, :] + ft(0.5)) * bin_size / ft(grid)
    inside = (pos >= -1.0) & (pos <= length)
    pos = np.maximum(pos, ft(0.0))
    low = np.floor(pos).astype(np.int64)
    edge = low >= length - 1
    low = np.where(edge, length - 1, low)
    high = np.where(edge, length - 1, low + 1)
    frac = np.where(edge, ft(0.0), pos - low.astype(ft))
    return low, high, frac, inside


def roi_align(x: np.ndarray, rois: np.ndarray, batch_indices: np.ndarray, mode: str = "avg",
              output_height: int = 1, output_width: int = 1, sampling_ratio: int = 0,
              spatial_scale: float = 1.0, coordinate_transformation_mode: str = "half_pixel") -> np.ndarray:
    """(num_rois, C, output_height, output_width) pooled features of x (N, C, H, W) over the
    regions rois (num_rois, 4) of images batch_indices (num_rois,).  Region geometry is computed
    in x's float type (float32 for float16), as ONNX Runtime does: the sample count per bin is a
    ceiling, so a rounding difference could change it."""
    n, c, h, w = x.shape
    ft = x.dtype.type if x.dtype in (np.float32, np.float64) else np.float32
    batch = np.asarray(batch_indices).astype(np.int64).reshape(-1)
    if batch.size and (batch.min() < 0 or batch.max() >= n):
        raise IndexError(f"roi_align: a batch index is out of range for {n} images")
    half = coordinate_transformation_mode == "half_pixel"
    boxes = np.asarray(rois).astype(ft) * ft(spatial_scale) - ft(0.5 if half else 0.0)
    out = np.zeros((boxes.shape[0], c, output_height, output_width), np.float64)
    for r in range(boxes.shape[0]):
        x1, y1, x2, y2 = boxes[r]
        roi_w, roi_h = x2 - x1, y2 - y1
        if not half:
            roi_w, roi_h = max(roi_w, ft(1.0)), max(roi_h, ft(1.0))
        bin_h, bin_w = roi_h / ft(output_height), roi_w / ft(output_width)
        gh = int(sampling_ratio) if sampling_ratio > 0 else int(np.ceil(roi_h / ft(output_height)))
        gw = int(sampling_ratio) if sampling_ratio > 0 else int(np.ceil(roi_w / ft(output_width)))
        if gh <= 0 or gw <= 0:
            continue                               # no samples: the bins stay 0
        yl, yh, ly, y_in = _roi_axis(y1, bin_h, output_height, gh, h)     # (OH, GH)
        xl, xh, lx, x_in = _roi_axis(x1, bin_w, output_width, gw, w)      # (OW, GW)
        img = x[batch[r]].astype(np.float64)                              # (C, H, W)
        ys = [(yl, 1.0 - ly), (yh, ly)]
        xs = [(xl, 1.0 - lx), (xh, lx)]
        inside = (y_in[:, :, None, None] & x_in[None, None, :, :])[None]
        terms = []
        for yi, wy in ys:
            for xi, wx in xs:
                weight = np.where(inside, wy[:, :, None, None] * wx[None, None, :, :], 0.0)
                value = img[:, yi[:, :, None, None], xi[None, None, :, :]]          # (C, OH, GH, OW, GW)
                terms.append(weight * np.where(inside, value, 0.0))
        if mode == "avg":
            out[r] = sum(terms).sum(axis=(2, 4)) / max(gh * gw, 1)
        else:
            out[r] = np.maximum.reduce(terms).max(axis=(2, 4))
    return out.astype(x.dtype)


# -- non_max_suppression ---------------------------------------------------------------------------
# ONNX NonMaxSuppression.  Per batch and class, the boxes whose score passes the threshold are
# visited by descending score (equal scores by ascending box index); a box is selected unless
# its IoU with a box already selected for that class exceeds iou_threshold; at most
# max_output_boxes_per_class are selected per class.  Invariant of the loop below: `alive`
# marks the candidates not yet suppressed by any selected box, so the next alive candidate in
# order is the next one selected (IoU is symmetric, so suppressing ahead equals checking back).


def _box_corners(boxes: np.ndarray, center_point_box: int) -> tuple:
    """(x_min, y_min, x_max, y_max) of boxes given as [y1, x1, y2, x2] (any two opposite
    corners) or, with center_point_box=1, as [x_center, y_center, width, height]."""
    if center_point_box:
        xc, yc, half_w, half_h = boxes[:, 0], boxes[:, 1], boxes[:, 2] / 2, boxes[:, 3] / 2
        return xc - half_w, yc - half_h, xc + half_w, yc + half_h
    y1, x1, y2, x2 = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3]
    return np.minimum(x1, x2), np.minimum(y1, y2), np.maximum(x1, x2), np.maximum(y1, y2)


def _suppressed(corners: tuple, k: int, others: np.ndarray, iou_threshold: float) -> np.ndarray:
    """Whether box `k` suppresses each box in `others`: their overlap is positive in x and in y,
    both areas and the union are positive, and intersection / union > iou_threshold."""
    x0, y0, x1, y1 = corners
    ix = np.minimum(x1[k], x1[others]) - np.maximum(x0[k], x0[others])
    iy = np.minimum(y1[k], y1[others]) - np.maximum(y0[k], y0[others])
    inter = ix * iy
    area_k = (x1[k] - x0[k]) * (y1[k] - y0[k])
    area = (x1[others] - x0[others]) * (y1[others] - y0[others])
    union = area_k + area - inter
    ok = (ix > 0) & (iy > 0) & (inter > 0) & (area_k > 0) & (area > 0) & (union > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return ok & (inter / np.where(ok, union, 1) > iou_threshold)


def _scalar(value, default, kind: type, name: str):
    """An optional scalar input (None or an empty array means `default`)."""
    if value is None:
        return default
    arr = np.asarray(value)
    if arr.size == 0:
        return default
    if arr.size != 1:
        raise ValueError(f"non_max_suppression: {name} must hold one value, got shape {arr.shape}")
    return kind(arr.reshape(-1)[0])


def non_max_suppression(boxes: np.ndarray, scores: np.ndarray, max_output_boxes_per_class=None,
                        iou_threshold=None, score_threshold=None, center_point_box: int = 0) -> np.ndarray:
    """ONNX NonMaxSuppression: boxes (batches, boxes, 4), scores (batches, classes, boxes) ->
    int64 rows [batch, class, box] of the selected boxes, by batch, then class, then selection
    order.  max_output_boxes_per_class defaults to 0 (nothing selected), iou_threshold to 0,
    and without score_threshold no box is filtered by score."""
    boxes, scores = np.asarray(boxes), np.asarray(scores)
    if boxes.ndim != 3 or boxes.shape[2] != 4:
        raise ValueError(f"non_max_suppression: boxes must have shape (batches, boxes, 4), got {boxes.shape}")
    if scores.ndim != 3 or scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
        raise ValueError(f"non_max_suppression: scores must have shape (batches, classes, boxes) = "
                         f"({boxes.shape[0]}, classes, {boxes.shape[1]}), got {scores.shape}")
    if int(center_point_box) not in (0, 1):
        raise ValueError(f"non_max_suppression: center_point_box must be 0 or 1, got {center_point_box}")
    limit = max(_scalar(max_output_boxes_per_class, 0, int, "max_output_boxes_per_class"), 0)
    iou = _scalar(iou_threshold, 0.0, float, "iou_threshold")
    if not 0.0 <= iou <= 1.0:
        raise ValueError(f"non_max_suppression: iou_threshold must be in [0, 1], got {iou}")
    score_min = _scalar(score_threshold, None, float, "score_threshold")
    rows = []
    for b in range(boxes.shape[0]):
        corners = _box_corners(boxes[b], int(center_point_box))
        for c in range(scores.shape[1]):
            s = scores[b, c]
            candidates = np.arange(s.shape[0]) if score_min is None else np.flatnonzero(s > score_min)
            # descending score, equal scores by ascending index: a stable sort of -score
            order = candidates[np.argsort(-s[candidates], kind="stable")]
            alive = np.ones(order.shape[0], bool)
            taken = 0
            for pos in range(order.shape[0]):
                if taken >= limit:
                    break
                if not alive[pos]:
                    continue
                k = order[pos]
                rows.append((b, c, k))
                taken += 1
                rest = order[pos + 1:]
                alive[pos + 1:] &= ~_suppressed(corners, k, rest, iou)
    return np.asarray(rows, dtype=np.int64).reshape(-1, 3)


KERNELS: dict[str, Callable] = {"scatter_elements": scatter_elements, "scatter_nd": scatter_nd,
                                "topk": topk, "det": det, "roi_align": roi_align,
                                "non_max_suppression": non_max_suppression,
                                "cast_narrow": host_convert.cast_narrow, "bitcast": host_convert.bitcast,
                                "quantize_narrow": host_convert.quantize_narrow,
                                "dequantize_narrow": host_convert.dequantize_narrow,
                                "max_pool_with_indices": host_pool.max_pool_with_indices}


def register(name: str, fn: Callable) -> None:
    """Make `fn` the host kernel `name` (an op defined outside the package registers its NumPy
    kernel here when its `@op` record is made)."""
    if name in KERNELS and KERNELS[name] is not fn:
        raise ValueError(f"host kernel {name!r} is registered twice")
    KERNELS[name] = fn


def get(name: str) -> Callable:
    """The host kernel called `name`; ValueError naming the known ones when there is none."""
    try:
        return KERNELS[name]
    except KeyError:
        raise ValueError(f"unknown host kernel {name!r}: if it is an op of your own, import the module "
                         f"that defines it before loading the model; this runtime has: "
                         f"{', '.join(sorted(KERNELS))}") from None


def run(name: str, arrays: list, attrs: dict) -> list[np.ndarray]:
    """Run host kernel `name` and return its outputs as a list of arrays."""
    out = get(name)(*arrays, **attrs)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    return [np.asarray(o) for o in outs]
