"""ATen reductions -> reduce_* ops (mean, sum, amax, amin, prod, any, all, max, min), argmax /
argmin, var / var_mean, vector norms; topk for topk, sort, median and kthvalue; cumprod; det;
cdist and pdist.
A mean or max over every spatial axis of an (N, C, ...) tensor, kept as size 1, is global pooling."""
from __future__ import annotations

import numpy as np

from ..torch_convert import aten
from .common import as_value, cast, dims_list, moments, norm_dim

_REDUCE = {"mean": "reduce_mean", "sum": "reduce_sum", "amax": "reduce_max", "amin": "reduce_min",
           "prod": "reduce_prod"}


@aten(*_REDUCE)
def reduce(ctx, a: dict):
    name = ctx.op.split(".")[1]
    x = cast(ctx, a["self"], ctx.out_dtypes[0])
    axes = dims_list(a.get("dim"), len(x.shape))
    keep = int(bool(a.get("keepdim", False)))
    if axes is None:
        axes = tuple(range(len(x.shape)))
    if not axes:
        return x
    if name in ("mean", "amax") and keep and len(x.shape) >= 3 and tuple(sorted(axes)) == tuple(range(2, len(x.shape))):
        # nn.AdaptiveAvgPool2d(1) / global max pooling: the pooling op, which runs on the
        # convolutions' blocked layout (a reduce_* would need the plain layout first)
        return ctx.add1("global_avg_pool" if name == "mean" else "global_max_pool", [x])
    return ctx.add1(_REDUCE[name], [x], {"axes": axes, "keepdims": keep})


@aten("any", "all")
def any_all(ctx, a: dict):
    name = ctx.op.split(".")[1]
    x = a["self"]
    axes = dims_list(a.get("dim"), len(x.shape)) or tuple(range(len(x.shape)))
    as_int = ctx.add1("cast", [x], {"dtype": "int32"}) if x.dtype == "bool" else \
        ctx.add1("cast", [ctx.add1("logical_not", [ctx.add1("equal", [x, ctx.const(0, dtype=x.dtype)])])],
                 {"dtype": "int32"})
    r = ctx.add1("reduce_max" if name == "any" else "reduce_min", [as_int],
                 {"axes": axes, "keepdims": int(bool(a.get("keepdim", False)))})
    return ctx.add1("cast", [r], {"dtype": "bool"})


@aten("argmax", "argmin")
def argmax(ctx, a: dict):
    name = ctx.op.split(".")[1]
    x = a["self"]
    if a.get("dim") is None:
        x = ctx.add1("reshape", [x], {"shape": (-1,)})
        axis = 0
    else:
        axis = norm_dim(int(a["dim"]), len(x.shape))
    return ctx.add1(name, [x], {"axis": axis, "keepdims": int(bool(a.get("keepdim", False)))})


@aten("max", "min")
def max_min(ctx, a: dict):
    """x.max() over every element (max.default), or x.max(dim, keepdim) -> (values, indices)
    (max.dim): reduce_max and argmax, whose ties go to the first index as in PyTorch.  Only the
    outputs that are read are computed."""
    name, overload = ctx.op.split(".")[1:3]
    x = a["self"]
    if overload == "default":
        return ctx.add1(f"reduce_{name}", [x], {"axes": tuple(range(len(x.shape))), "keepdims": 0})
    if overload != "dim":
        raise ctx.unsupported(f"{name}.{overload} is not supported")
    axis = norm_dim(int(a["dim"]), len(x.shape))
    keep = int(bool(a.get("keepdim", False)))
    values = ctx.add1(f"reduce_{name}", [x], {"axes": (axis,), "keepdims": keep}) if 0 in ctx.used_outputs else None
    indices = ctx.add1(f"arg{name}", [x], {"axis": axis, "keepdims": keep}) if 1 in ctx.used_outputs else None
    return values, indices


@aten("var")
def var(ctx, a: dict):
    """x.var / x.std (std is sqrt of this): the mean of the squared deviations, over N -
    correction terms (Bessel's correction 1 by default)."""
    x = cast(ctx, a["self"], ctx.out_dtypes[0])
    return moments(ctx, x, _axes(a.get("dim"), x), bool(a.get("keepdim", False)), _correction(a))[2]


@aten("var_mean")
def var_mean(ctx, a: dict):
    """torch.var_mean / torch.std_mean -> (var, mean): `moments`, the mean reshaped to drop the
    reduced axes unless keepdim; only the mean where the variance is not read."""
    x = cast(ctx, a["self"], ctx.out_dtypes[0])
    axes = _axes(a.get("dim"), x)
    keep = bool(a.get("keepdim", False))
    if 0 not in ctx.used_outputs:
        return None, ctx.add1("reduce_mean", [x], {"axes": axes, "keepdims": int(keep)})
    mean, _, variance = moments(ctx, x, axes, keep, _correction(a))
    return variance, mean if keep else ctx.add1("reshape", [mean], {"shape": ctx.out_shapes[1]})


def _axes(dim, x) -> tuple:
    """A reduction's axes: `dim` normalized, or every axis where it is None or empty."""
    return dims_list(dim, len(x.shape)) or tuple(range(len(x.shape)))


def _correction(a: dict) -> float:
    """var's correction: `correction`, else 1 or 0 by `unbiased` (Bessel's correction by default)."""
    if a.get("correction") is not None:
        return float(a["correction"])
    return 1.0 if a.get("unbiased", True) else 0.0


@aten("linalg_vector_norm")
def vector_norm(ctx, a: dict):
    """torch.norm / F.normalize's norm: ord 2, 1, inf, -inf, 0 or any p over `dim`."""
    x = cast(ctx, a["self"], ctx.out_dtypes[0])
    axes = dims_list(a.get("dim"), len(x.shape)) or tuple(range(len(x.shape)))
    keep = int(bool(a.get("keepdim", False)))
    p = float(a.get("ord", 2))
    attrs = {"axes": axes, "keepdims": keep}
    if p == 2:
        return ctx.add1("reduce_l2", [x], attrs)
    if p == 1:
        return ctx.add1("reduce_l1", [x], attrs)
    magnitude = ctx.add1("abs", [x])
    if p == float("inf"):
        return ctx.add1("reduce_max", [magnitude], attrs)
    if p == float("-inf"):
        return ctx.add1("reduce_min", [magnitude], attrs)
    if p == 0:
        nonzero = ctx.add1("cast", [ctx.add1("logical_not", [ctx.add1("equal", [x, as_value(ctx, 0.0, x)])])],
                           {"dtype": x.dtype})
        return ctx.add1("reduce_sum", [nonzero], attrs)
    powered = ctx.add1("pow", [magnitude, as_value(ctx, p, x)])
    return ctx.add1("pow", [ctx.add1("reduce_sum", [powered], attrs), as_value(ctx, 1.0 / p, x)])


@aten("topk", "sort")
def topk_sort(ctx, a: dict):
    """topk(k, dim, largest, sorted) and sort(dim, descending): the topk op, a sort being the top
    `size` elements (its order of equal elements may differ from PyTorch's unstable sort)."""
    x = a["self"]
    axis = norm_dim(int(a.get("dim", -1)), len(x.shape))
    if ctx.op.split(".")[1] == "sort":
        if a.get("stable"):
            raise ctx.unsupported("a stable sort is not supported")
        k, largest = int(x.shape[axis]), int(bool(a.get("descending", False)))
    else:
        k, largest = int(a["k"]), int(bool(a.get("largest", True)))
    values, indices = ctx.add("topk", [x], {"k": k, "axis": axis, "largest": largest, "sorted": 1})
    return values, indices


@aten("median", "kthvalue")
def kth_smallest(ctx, a: dict):
    """kthvalue(k, dim, keepdim) and median (the lower median, rank (n - 1) // 2, over `dim` or
    every element) -> (values, indices): the k smallest by topk, of which the last is the k-th.
    Among equal values the index may differ from PyTorch's."""
    x = a["self"]
    if ctx.op == "aten.median.default":
        x, axis, keep = ctx.add1("reshape", [x], {"shape": (-1,)}), 0, False
    else:
        axis, keep = norm_dim(int(a.get("dim", -1)), len(x.shape)), bool(a.get("keepdim", False))
    k = int(a["k"]) if ctx.op.startswith("aten.kthvalue") else (x.shape[axis] - 1) // 2 + 1
    smallest = ctx.add("topk", [x], {"k": k, "axis": axis, "largest": 0, "sorted": 1})
    picked = []
    for i, (v, shape) in enumerate(zip(smallest, ctx.out_shapes)):     # median.default: values only
        if i in ctx.used_outputs:
            v = ctx.add1("slice", [v], {"starts": (k - 1,), "ends": (k,), "axes": (axis,)})
            picked.append(v if keep else ctx.add1("reshape", [v], {"shape": shape}))
        else:
            picked.append(None)
    return picked[0] if ctx.op == "aten.median.default" else tuple(picked)


@aten("cumprod")
def cumprod(ctx, a: dict):
    """torch.cumprod(x, dim, dtype): in the result's dtype (integers and bool promote to int64)."""
    x = cast(ctx, a["self"], ctx.out_dtypes[0])
    return ctx.add1("cumprod", [x], {"axis": norm_dim(int(a["dim"]), len(x.shape))})


@aten("_linalg_det")
def linalg_det(ctx, a: dict):
    """torch.linalg.det / torch.det -> (det, LU, pivots): only the determinant (the det op)."""
    if ctx.used_outputs - {0}:
        raise ctx.unsupported("only the determinant is supported, not the LU factors or pivots")
    return ctx.add1("det", [a["A"]]), None, None


@aten("_cdist_forward")
def cdist(ctx, a: dict):
    """torch.cdist(x1, x2, p): the p-norm distance of every row of x1 to every row of x2.  For
    p = 2 with more than 25 rows on a side (compute_mode's default) or
    compute_mode="use_mm_for_euclid_dist", PyTorch's product form sqrt(|a|^2 + |b|^2 - 2 a.b)
    (clamped at 0); otherwise the differences of every pair, reduced."""
    x1, x2, p = a["x1"], a["x2"], float(a["p"])
    n, m = int(x1.shape[-2]), int(x2.shape[-2])
    mode = a.get("compute_mode")
    return _distances(ctx, x1, x2, p, p == 2 and (mode == 1 or (mode in (None, 0) and (n > 25 or m > 25))))


@aten("_pdist_forward")
def pdist(ctx, a: dict):
    """F.pdist(x, p): the distances of every pair of rows i < j, in row-major order of the pairs."""
    x, p = a["self"], float(a["p"])
    n = int(x.shape[0])
    all_pairs = ctx.add1("reshape", [_distances(ctx, x, x, p, False)], {"shape": (n * n,)})
    rows, cols = np.triu_indices(n, 1)
    return ctx.add1("gather", [all_pairs, ctx.const((rows * n + cols).astype(np.int64))], {"axis": 0})


def _distances(ctx, x1, x2, p: float, product: bool):
    """The p-norm distances of the rows of x1 (..., n, d) to those of x2 (..., m, d): (..., n, m);
    `product`: p = 2 as sqrt(max(|a|^2 + |b|^2 - 2 a.b, 0)), as PyTorch computes it for many rows."""
    r = len(x1.shape)
    if product:
        sq1 = ctx.add1("reduce_sum", [ctx.add1("mul", [x1, x1])], {"axes": (r - 1,), "keepdims": 1})  # (..., n, 1)
        sq2 = ctx.add1("reduce_sum", [ctx.add1("mul", [x2, x2])], {"axes": (r - 1,), "keepdims": 1})  # (..., m, 1)
        cross = ctx.add1("matmul", [x1, x2], {"transpose_b": True})                                   # (..., n, m)
        perm = tuple(range(r - 2)) + (r - 1, r - 2)
        total = ctx.add1("add", [ctx.add1("sub", [sq1, ctx.add1("add", [cross, cross])]),
                                 ctx.add1("transpose", [sq2], {"perm": perm})])
        zero = ctx.const(np.zeros((), x1.dtype))
        return ctx.add1("sqrt", [ctx.add1("maximum", [total, zero])])
    diff = ctx.add1("sub", [ctx.add1("unsqueeze", [x1], {"axes": (r - 1,)}),
                            ctx.add1("unsqueeze", [x2], {"axes": (r - 2,)})])                      # (..., n, m, d)
    size = ctx.add1("abs", [diff])
    last = {"axes": (r,), "keepdims": 0}
    if p == 0:
        nonzero = ctx.add1("cast", [ctx.add1("greater", [size, ctx.const(np.zeros((), x1.dtype))])], {"dtype": x1.dtype})
        return ctx.add1("reduce_sum", [nonzero], last)
    if p == 1:
        return ctx.add1("reduce_sum", [size], last)
    if np.isinf(p):
        return ctx.add1("reduce_max", [size], last)
    if p == 2:
        return ctx.add1("sqrt", [ctx.add1("reduce_sum", [ctx.add1("mul", [diff, diff])], last)])
    power = ctx.add1("pow", [size, ctx.const(np.asarray(p, x1.dtype))])
    return ctx.add1("pow", [ctx.add1("reduce_sum", [power], last), ctx.const(np.asarray(1.0 / p, x1.dtype))])
