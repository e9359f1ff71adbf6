"""ATen shape and data-movement ops -> reshape, transpose, expand, concat, slice, split,
squeeze / unsqueeze, pad, cast.

Shapes are static, so the target shape of a view or an expand is read from the shape PyTorch
recorded for the node (its -1 entries already resolved).
"""
from __future__ import annotations

from ..torch_convert import aten, torch_dtype
from .common import cast, int_list, ints, norm_dim

_INT64_MAX = 2 ** 63 - 1


@aten("view", "_unsafe_view", "reshape", "view_copy", "_reshape_alias", "flatten", "unflatten")
def view(ctx, a: dict):
    x = a["self"]
    shape = ctx.out_shape
    if tuple(x.shape) == tuple(shape):
        return x
    return ctx.add1("reshape", [x], {"shape": tuple(shape), "allowzero": 1})


@aten("as_strided", "as_strided_copy")
def as_strided(ctx, a: dict):
    """as_strided that is a view of the whole tensor in row-major order (what decompositions of
    keepdim reductions leave: size (2, 8, 1, 1) with strides (8, 1, 8, 8)): a reshape.  Strides of
    axes of size 1 never move, so they may be anything; other strided views are refused."""
    x = a["self"]
    size, stride = int_list(a["size"]), int_list(a["stride"])
    offset = int(a.get("storage_offset") or 0)
    expect, step = [], 1
    for d in reversed(size):
        expect.append(step)
        step *= d
    expect.reverse()
    total = 1
    for d in x.shape:
        total *= int(d)
    if offset or step != total or any(d != 1 and s != e for d, s, e in zip(size, stride, expect)):
        raise ctx.unsupported(f"as_strided with size {size}, strides {stride} and offset {offset} (not a "
                              "row-major view of the whole tensor) is not supported")
    if tuple(x.shape) == size:
        return x
    return ctx.add1("reshape", [x], {"shape": size, "allowzero": 1})


@aten("permute", "permute_copy")
def permute(ctx, a: dict):
    x = a["self"]
    perm = tuple(norm_dim(d, len(x.shape)) for d in int_list(a["dims"]))
    if perm == tuple(range(len(perm))):
        return x
    return ctx.add1("transpose", [x], {"perm": perm})


@aten("transpose", "t", "numpy_T")
def transpose(ctx, a: dict):
    x = a["self"]
    rank = len(x.shape)
    if rank < 2:
        return x
    d0, d1 = (norm_dim(int(a["dim0"]), rank), norm_dim(int(a["dim1"]), rank)) if "dim0" in a else (0, 1)
    perm = list(range(rank))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return ctx.add1("transpose", [x], {"perm": tuple(perm)})


@aten("expand", "expand_copy", "broadcast_to")
def expand(ctx, a: dict):
    x = a["self"]
    if tuple(x.shape) == tuple(ctx.out_shape):
        return x
    return ctx.add1("expand", [x], {"shape": tuple(ctx.out_shape)})


@aten("cat", "concat")
def cat(ctx, a: dict):
    xs = [x for x in a["tensors"] if not (len(x.shape) == 1 and x.shape[0] == 0)]   # torch skips empty 1-D
    dtype = ctx.out_dtypes[0]
    xs = [cast(ctx, x, dtype) for x in xs]
    if len(xs) == 1:
        return xs[0]
    return ctx.add1("concat", xs, {"axis": norm_dim(int(a["dim"]), len(xs[0].shape))})


@aten("slice", "slice_copy")
def slice_(ctx, a: dict):
    x = a["self"]
    dim = norm_dim(int(a["dim"]), len(x.shape))
    size = x.shape[dim]
    start = 0 if a["start"] is None else int(a["start"])
    end = _INT64_MAX if a["end"] is None else int(a["end"])
    step = int(a["step"])
    start = min(max(start + size if start < 0 else start, 0), size)
    end = min(max(end + size if end < 0 else end, 0), size)
    if (start, end, step) == (0, size, 1):
        return x
    return ctx.add1("slice", [x], {"starts": (start,), "ends": (max(end, start),), "axes": (dim,),
                                   "steps": (step,)})


@aten("select", "select_copy")
def select(ctx, a: dict):
    x = a["self"]
    dim = norm_dim(int(a["dim"]), len(x.shape))
    index = int(a["index"])
    index = index + x.shape[dim] if index < 0 else index
    part = ctx.add1("slice", [x], {"starts": (index,), "ends": (index + 1,), "axes": (dim,), "steps": (1,)})
    return ctx.add1("squeeze", [part], {"axes": (dim,)})


@aten("unsqueeze", "unsqueeze_copy")
def unsqueeze(ctx, a: dict):
    x = a["self"]
    return ctx.add1("unsqueeze", [x], {"axes": (norm_dim(int(a["dim"]), len(x.shape) + 1),)})


@aten("squeeze", "squeeze_copy")
def squeeze(ctx, a: dict):
    x = a["self"]
    rank = len(x.shape)
    dims = a.get("dim")
    if dims is None:
        dims = a.get("dims")
    if dims is None:
        axes = tuple(k for k, d in enumerate(x.shape) if d == 1)
    else:
        axes = tuple(k for k in (norm_dim(int(d), rank) for d in ints(dims)) if x.shape[k] == 1)
    if not axes:
        return x
    return ctx.add1("squeeze", [x], {"axes": axes})


@aten("split_with_sizes", "split", "split_with_sizes_copy", "split_copy")
def split(ctx, a: dict):
    x = a["self"]
    dim = norm_dim(int(a["dim"]), len(x.shape))
    sizes = a["split_sizes"] if "split_sizes" in a else a["split_size"]
    if isinstance(sizes, int):
        size = x.shape[dim]
        sizes = [min(sizes, size - k) for k in range(0, size, sizes)] if sizes else [size]
    sizes = int_list(sizes)
    if len(sizes) == 1:
        return (x,)
    return tuple(ctx.add("split", [x], {"sizes": sizes, "axis": dim}))


@aten("unbind")
def unbind(ctx, a: dict):
    x = a["self"]
    dim = norm_dim(int(a["dim"]), len(x.shape))
    parts = ctx.add("split", [x], {"sizes": (1,) * x.shape[dim], "axis": dim}) if x.shape[dim] > 1 else [x]
    return tuple(ctx.add1("squeeze", [p], {"axes": (dim,)}) for p in parts)


@aten("_to_copy", "to", "type_as")
def to_copy(ctx, a: dict):
    x = a["self"]
    dtype = torch_dtype(a["dtype"]) if a.get("dtype") is not None else ctx.out_dtypes[0]
    return cast(ctx, x, dtype)


@aten("constant_pad_nd")
def constant_pad_nd(ctx, a: dict):
    x = a["self"]
    pad = int_list(a["pad"])           # (last-begin, last-end, second-last-begin, ...)
    rank = len(x.shape)
    begins, ends = [0] * rank, [0] * rank
    for k in range(len(pad) // 2):
        begins[rank - 1 - k], ends[rank - 1 - k] = pad[2 * k], pad[2 * k + 1]
    if any(p < 0 for p in begins + ends):
        raise ctx.unsupported("negative padding (cropping) is not supported")
    return ctx.add1("pad", [x], {"pads": tuple(begins + ends), "mode": "constant", "value": float(a.get("value", 0))})
