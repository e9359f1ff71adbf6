"""ATen reductions -> reduce_* ops (mean, sum, amax, amin, prod, any, all) and argmax / argmin.
A mean or max over every spatial axis of an (N, C, ...) tensor, kept as size 1, is global pooling."""
from __future__ import annotations

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


@aten("var")
def var(ctx, a: dict):
    """x.var / x.std (std is sqrt of this): the mean of the squared deviations, over N -
    correction terms (Bessel's correction 1 by default)."""
    x = cast(ctx, a["self"], ctx.out_dtypes[0])
    axes = dims_list(a.get("dim"), len(x.shape)) or tuple(range(len(x.shape)))
    correction = a.get("correction")
    if correction is None:
        correction = 1 if a.get("unbiased", True) else 0
    return moments(ctx, x, axes, bool(a.get("keepdim", False)), float(correction))[2]


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
