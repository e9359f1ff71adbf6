"""ATen reductions -> reduce_* ops (mean, sum, amax, amin, prod, any, all) and argmax / argmin.
A mean or max over every spatial axis of an (N, C, ...) tensor, kept as size 1, is global pooling."""
from __future__ import annotations

from ..torch_convert import aten
from .common import cast, dims_list, norm_dim

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
