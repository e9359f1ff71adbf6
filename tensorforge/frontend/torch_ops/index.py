"""ATen indexing, resampling and group-norm ops -> gather, tile, cumsum, resize, instance_norm.

What users' modules bring that the core ATen set keeps as ops of their own:
- `index.Tensor` (x[idx], and what reflection and replication padding decompose into: x indexed
  by computed rows and columns) -> gather.  Several indices on adjacent axes broadcast together:
  the axes are merged and indexed by the linear index (row-major), so one gather serves any
  number of them.  Boolean masks (a data-dependent shape) are refused.
- `index_select` -> gather; `gather` -> gather_elements; `diagonal` -> a gather from the two
  axes merged; `flip` -> gather with the reversed
  positions; `repeat` -> tile; `cumsum` -> cumsum.
- `upsample_*` (F.interpolate) -> resize, with PyTorch's coordinates: nearest is floor(dst /
  scale) ("asymmetric" with floor), nearest-exact floor((dst + 0.5) / scale) ("half_pixel" with
  round-half-up), linear and cubic (dst + 0.5) / scale - 0.5 ("half_pixel"; PyTorch clamps a
  negative source to 0 for linear, which the edge clamp of the taps gives too) or
  "align_corners"; the scale is the given scale factor, else output / input size.
- `native_group_norm` -> the form torch.onnx.export writes for nn.GroupNorm (reshape to (N, G,
  -1), instance_norm, reshape back, per-channel scale and shift), which the layout passes keep
  blocked where each group is whole blocks.
"""
from __future__ import annotations

import numpy as np

from ..torch_convert import aten
from .common import cast, int_list, moments, norm_dim, rsqrt_eps


@aten("index")
def index(ctx, a: dict):
    x = a["self"]
    indices = list(a["indices"])
    axes = [k for k, i in enumerate(indices) if i is not None]
    if not axes:
        return x
    if any(indices[k].dtype == "bool" for k in axes):
        raise ctx.unsupported("indexing with a boolean mask (a data-dependent shape) is not supported")
    if axes != list(range(axes[0], axes[-1] + 1)):
        raise ctx.unsupported("advanced indices on axes that are not adjacent are not supported")
    first, last = axes[0], axes[-1]
    if len(axes) == 1:
        return ctx.add1("gather", [x, indices[first]], {"axis": first})
    sizes = [int(x.shape[k]) for k in axes]
    linear = None
    for k, size in zip(axes, sizes):
        i = cast(ctx, indices[k], "int64")
        size_c = ctx.const(np.asarray(size, np.int64))
        # negative positions count from the end of their own axis (before they are combined)
        i = ctx.add1("where", [ctx.add1("less", [i, ctx.const(np.asarray(0, np.int64))]), ctx.add1("add", [i, size_c]), i])
        linear = i if linear is None else ctx.add1("add", [ctx.add1("mul", [linear, size_c]), i])
    merged = tuple(x.shape[:first]) + (int(np.prod(sizes)),) + tuple(x.shape[last + 1:])
    flat = ctx.add1("reshape", [x], {"shape": merged})
    return ctx.add1("gather", [flat, linear], {"axis": first})


@aten("index_select")
def index_select(ctx, a: dict):
    x = a["self"]
    return ctx.add1("gather", [x, a["index"]], {"axis": norm_dim(int(a["dim"]), len(x.shape))})


@aten("gather")
def gather(ctx, a: dict):
    """torch.gather: out[i][j][k] = x[i][index[i][j][k]][k] along `dim` (ONNX GatherElements)."""
    x = a["self"]
    if a.get("sparse_grad"):
        raise ctx.unsupported("gather with sparse_grad is not supported")
    return ctx.add1("gather_elements", [x, a["index"]], {"axis": norm_dim(int(a["dim"]), len(x.shape))})


@aten("diagonal", "diagonal_copy")
def diagonal(ctx, a: dict):
    """torch.diagonal(x, offset, dim1, dim2): the two axes moved last and merged, the diagonal
    gathered from the merged axis (it becomes the last axis, as in PyTorch)."""
    x = a["self"]
    rank = len(x.shape)
    d1, d2 = norm_dim(int(a.get("dim1", 0)), rank), norm_dim(int(a.get("dim2", 1)), rank)
    offset = int(a.get("offset", 0))
    rest = [k for k in range(rank) if k not in (d1, d2)]
    n1, n2 = int(x.shape[d1]), int(x.shape[d2])
    rows = np.arange(n1)
    rows = rows[(rows + offset >= 0) & (rows + offset < n2)]          # element (r, r + offset)
    moved = ctx.add1("transpose", [x], {"perm": tuple(rest) + (d1, d2)}) if rest or (d1, d2) != (0, 1) else x
    merged = ctx.add1("reshape", [moved], {"shape": tuple(int(x.shape[k]) for k in rest) + (n1 * n2,)})
    positions = ctx.const((rows * n2 + rows + offset).astype(np.int64))
    return ctx.add1("gather", [merged, positions], {"axis": len(rest)})


@aten("flip")
def flip(ctx, a: dict):
    x = a["self"]
    for d in sorted({norm_dim(int(d), len(x.shape)) for d in int_list(a["dims"])}):
        n = int(x.shape[d])
        if n > 1:
            x = ctx.add1("gather", [x, ctx.const(np.arange(n - 1, -1, -1, dtype=np.int64))], {"axis": d})
    return x


@aten("repeat")
def repeat(ctx, a: dict):
    x = a["self"]
    repeats = int_list(a["repeats"])
    extra = len(repeats) - len(x.shape)
    if extra < 0:
        raise ctx.unsupported(f"repeat with {len(repeats)} counts for a tensor of rank {len(x.shape)}")
    if extra:
        x = ctx.add1("reshape", [x], {"shape": (1,) * extra + tuple(x.shape)})
    if all(r == 1 for r in repeats):
        return x
    return ctx.add1("tile", [x], {"repeats": repeats})


@aten("cumsum")
def cumsum(ctx, a: dict):
    x = cast(ctx, a["self"], ctx.out_dtypes[0])
    return ctx.add1("cumsum", [x], {"axis": norm_dim(int(a["dim"]), len(x.shape))})


_UPSAMPLE = {"upsample_nearest1d": "nearest", "upsample_nearest2d": "nearest", "upsample_nearest3d": "nearest",
             "_upsample_nearest_exact1d": "nearest-exact", "_upsample_nearest_exact2d": "nearest-exact",
             "_upsample_nearest_exact3d": "nearest-exact", "upsample_linear1d": "linear",
             "upsample_bilinear2d": "linear", "upsample_trilinear3d": "linear", "upsample_bicubic2d": "cubic"}


@aten(*_UPSAMPLE)
def upsample(ctx, a: dict):
    x = a["input"] if "input" in a else a["self"]
    kind = _UPSAMPLE[ctx.op.split(".")[1]]
    rank = len(x.shape)
    spatial = rank - 2
    out = tuple(int(d) for d in ctx.out_shape)
    factors = a.get("scale_factors")
    if factors is None:          # the overloads with one scale per axis (scales_h, scales_w, ...)
        named = [a.get(k) for k in ("scales_d", "scales_h", "scales_w", "scales") if k in a]
        factors = named[-spatial:] if len(named) >= spatial and all(f is not None for f in named[-spatial:]) else None
    if factors is not None and len(factors) == spatial and all(f is not None and f > 0 for f in factors):
        scales = (1.0, 1.0) + tuple(float(f) for f in factors)
    else:
        scales = (1.0, 1.0) + tuple(o / int(i) for o, i in zip(out[2:], x.shape[2:]))
    attrs: dict = {"sizes": out, "scales": scales}
    if kind == "nearest":
        attrs.update(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    elif kind == "nearest-exact":
        attrs.update(mode="nearest", coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_ceil")
    else:
        ctm = "align_corners" if a.get("align_corners") else "half_pixel"
        attrs.update(mode=kind, coordinate_transformation_mode=ctm, cubic_coeff_a=-0.75)
    return ctx.add1("resize", [x], attrs)


@aten("native_group_norm")
def native_group_norm(ctx, a: dict):
    x = a["input"]
    groups, eps = int(a["group"]), float(a["eps"])
    shape = tuple(int(d) for d in x.shape)
    n, c = shape[0], shape[1]
    rest = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    grouped = ctx.add1("reshape", [x], {"shape": (n, groups, c // groups * rest)})
    ones, zeros = ctx.const(np.ones(groups, x.dtype)), ctx.const(np.zeros(groups, x.dtype))
    y = ctx.add1("reshape", [ctx.add1("instance_norm", [grouped, ones, zeros], {"epsilon": eps})], {"shape": shape})
    per_channel = (c,) + (1,) * (len(shape) - 2)
    if a.get("weight") is not None:
        y = ctx.add1("mul", [y, ctx.add1("reshape", [cast(ctx, a["weight"], x.dtype)], {"shape": per_channel})])
    if a.get("bias") is not None:
        y = ctx.add1("add", [y, ctx.add1("reshape", [cast(ctx, a["bias"], x.dtype)], {"shape": per_channel})])
    mean = rstd = None
    if ctx.used_outputs & {1, 2}:        # the saved statistics, (N, G) each
        mean, _, var = moments(ctx, grouped, (2,), keepdims=False)
        mean = ctx.add1("reshape", [mean], {"shape": (n, groups)})
        rstd = rsqrt_eps(ctx, var, eps)
    return y, mean, rstd
