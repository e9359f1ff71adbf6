"""ATen neural-network ops -> tensorforge's nn ops: convolution (and its transposed form),
the matrix products, batch and layer norm, pooling (adaptive average pooling in 2-D and 3-D),
softmax, embedding and embedding bags, grid sampling, and col2im (F.fold).

A product whose right operand is a constant matrix becomes `dense` with the weight transposed
here once (the dense schedules expect [units, k]), so `addmm(b, x, permute(W))`, the form
`nn.Linear` exports as, is `dense(x, W) + b`.
"""
from __future__ import annotations

import numpy as np

from ...graph.ir import Value
from ..torch_convert import aten
from .common import cast, int_list, ints, moments, norm_dim, rsqrt_eps


def _bias(ctx, y: Value, bias: Value | None) -> Value:
    """y + bias along axis 1 (a separate node: fusion folds it into the producer's epilogue)."""
    if bias is None:
        return y
    shape = (y.shape[1],) + (1,) * (len(y.shape) - 2)
    b = ctx.const(ctx.value_of(bias).reshape(shape)) if ctx.is_const(bias) \
        else ctx.add1("reshape", [bias], {"shape": shape})
    return ctx.add1("add", [y, b])


@aten("convolution")
def convolution(ctx, a: dict):
    x, w = a["input"], a["weight"]
    rank = len(x.shape) - 2
    if rank not in (1, 2, 3):
        raise ctx.unsupported(f"input shape {x.shape}: only 1-D, 2-D and 3-D convolutions are supported")
    strides, pads, dilations = ints(a["stride"], rank), ints(a["padding"], rank), ints(a["dilation"], rank)
    attrs = {"strides": strides, "padding": pads + pads, "dilations": dilations, "groups": int(a["groups"])}
    if a["transposed"]:
        attrs["output_padding"] = ints(a["output_padding"], rank)
        y = ctx.add1(f"conv_transpose{rank}d", [x, w], attrs)
    else:
        if any(ints(a["output_padding"], rank)):
            raise ctx.unsupported("output_padding on a convolution that is not transposed")
        y = ctx.add1(f"conv{rank}d", [x, w], attrs)
    return _bias(ctx, y, a["bias"])


def _product(ctx, x: Value, w: Value) -> Value:
    """x @ w, as `dense` when w is a constant matrix."""
    if len(w.shape) == 2 and ctx.is_const(w) and not ctx.is_const(x) and len(x.shape) == 2:
        return ctx.add1("dense", [x, ctx.const(np.ascontiguousarray(ctx.value_of(w).T))])
    return ctx.add1("matmul", [x, w])


def _scaled(ctx, v: Value, factor) -> Value:
    if factor in (None, 1):
        return v
    return ctx.add1("mul", [v, ctx.const(np.asarray(factor, dtype=v.dtype))])


@aten("addmm")
def addmm(ctx, a: dict):
    y = _scaled(ctx, _product(ctx, a["mat1"], a["mat2"]), a.get("alpha", 1))
    beta = a.get("beta", 1)
    if beta == 0:
        return y
    return ctx.add1("add", [y, _scaled(ctx, a["self"], beta)])


@aten("mm", "bmm", "matmul")
def mm(ctx, a: dict):
    return _product(ctx, a["self"], a["mat2"] if "mat2" in a else a["other"])


@aten("linear")
def linear(ctx, a: dict):
    x, w, b = a["input"], a["weight"], a["bias"]
    if ctx.is_const(w) and len(x.shape) == 2:
        y = ctx.add1("dense", [x, w])
    else:
        y = ctx.add1("matmul", [x, w], {"transpose_b": True})
    return y if b is None else ctx.add1("add", [y, b])


def _batch_norm(ctx, x, weight, bias, mean, var, eps):
    c = x.shape[1]
    weight = weight if weight is not None else ctx.const(np.ones(c, x.dtype))
    bias = bias if bias is not None else ctx.const(np.zeros(c, x.dtype))
    params = [cast(ctx, p, x.dtype) for p in (weight, bias, mean, var)]
    y = ctx.add1("batch_norm", [x, *params], {"epsilon": float(eps), "axis": 1})
    # the other outputs (saved mean and invstd) are empty tensors in inference
    return (y,) + tuple(ctx.const(np.zeros(s, x.dtype)) for s in ctx.out_shapes[1:])


@aten("_native_batch_norm_legit_no_training")
def batch_norm_no_training(ctx, a: dict):
    return _batch_norm(ctx, a["input"], a["weight"], a["bias"], a["running_mean"], a["running_var"], a["eps"])


@aten("native_batch_norm", "_native_batch_norm_legit")
def native_batch_norm(ctx, a: dict):
    # no running statistics to update: the batch's own (instance norm; dynamo's trace of it
    # reaches native_batch_norm with training=True and no running statistics)
    if a.get("running_mean") is None and a.get("running_var") is None and (ctx.op.endswith("no_stats")
                                                                            or a.get("training")):
        return _batch_statistics_norm(ctx, a["input"], a["weight"], a["bias"], float(a["eps"]))
    if a.get("training"):
        raise ctx.unsupported("batch norm in training mode (batch statistics) is not supported; call "
                              "module.eval() first")
    if a.get("running_mean") is None:
        raise ctx.unsupported("batch norm without running statistics is not supported")
    return _batch_norm(ctx, a["input"], a["weight"], a["bias"], a["running_mean"], a["running_var"], a["eps"])


def _batch_statistics_norm(ctx, x, weight, bias, eps: float):
    """Batch norm over the statistics of the batch itself (no running statistics: what
    nn.InstanceNorm2d decomposes into, on the (1, N * C, H, W) view of its input, and
    BatchNorm2d(track_running_stats=False)): per channel, mean and variance over every other
    axis.  With one image that is an instance norm; otherwise the reductions are written out."""
    c = x.shape[1]
    weight = cast(ctx, weight, x.dtype) if weight is not None else ctx.const(np.ones(c, x.dtype))
    bias = cast(ctx, bias, x.dtype) if bias is not None else ctx.const(np.zeros(c, x.dtype))
    if x.shape[0] == 1 and len(x.shape) >= 3:
        y = ctx.add1("instance_norm", [x, weight, bias], {"epsilon": eps})
    else:
        axes = (0,) + tuple(range(2, len(x.shape)))
        _, centered, var = moments(ctx, x, axes)
        inv = rsqrt_eps(ctx, var, eps)
        per_channel = (c,) + (1,) * (len(x.shape) - 2)
        y = ctx.add1("mul", [ctx.add1("mul", [centered, inv]), ctx.add1("reshape", [weight], {"shape": per_channel})])
        y = ctx.add1("add", [y, ctx.add1("reshape", [bias], {"shape": per_channel})])
    if ctx.used_outputs & {1, 2}:
        raise ctx.unsupported("the saved batch statistics of a batch norm are not supported")
    return (y, None, None)


@aten("native_layer_norm")
def native_layer_norm(ctx, a: dict):
    x, shape = a["input"], int_list(a["normalized_shape"])
    weight = a["weight"] if a["weight"] is not None else ctx.const(np.ones(shape, x.dtype))
    stash = bool(ctx.used_outputs & {1, 2})
    outs = ctx.add("layer_norm", [x, weight, a["bias"]],
                   {"axis": len(x.shape) - len(shape), "epsilon": float(a["eps"]), "stash": stash})
    return tuple(outs) if stash else (outs[0], None, None)


def _pool_args(ctx, a: dict, rank: int) -> tuple:
    kernel = ints(a["kernel_size"], rank)
    stride = ints(a["stride"], rank) if a.get("stride") else kernel
    pads = ints(a["padding"], rank)
    return kernel, stride, pads + pads


@aten("max_pool2d_with_indices", "max_pool2d", "max_pool1d", "max_pool3d", "max_pool3d_with_indices")
def max_pool(ctx, a: dict):
    x = a["self"]
    rank = len(x.shape) - 2
    if 1 in ctx.used_outputs and "with_indices" in ctx.op:
        raise ctx.unsupported("the indices output of max pooling is not supported")
    kernel, stride, pads = _pool_args(ctx, a, rank)
    y = ctx.add1(f"max_pool{rank}d", [x], {"kernel": kernel, "strides": stride, "padding": pads,
                                           "dilations": ints(a.get("dilation", 1), rank),
                                           "ceil_mode": bool(a.get("ceil_mode", False))})
    return (y, None) if "with_indices" in ctx.op else y


@aten("avg_pool1d", "avg_pool2d", "avg_pool3d")
def avg_pool(ctx, a: dict):
    x = a["self"]
    rank = len(x.shape) - 2
    if a.get("divisor_override") is not None:
        raise ctx.unsupported("avg_pool with divisor_override is not supported")
    kernel, stride, pads = _pool_args(ctx, a, rank)
    return ctx.add1(f"avg_pool{rank}d", [x], {"kernel": kernel, "strides": stride, "padding": pads,
                                              "ceil_mode": bool(a.get("ceil_mode", False)),
                                              "count_include_pad": bool(a.get("count_include_pad", True))})


@aten("_adaptive_avg_pool2d", "adaptive_avg_pool2d")
def adaptive_avg_pool2d(ctx, a: dict):
    x = a["self"]
    out = ints(a["output_size"], 2)
    if len(x.shape) != 4:
        raise ctx.unsupported(f"input shape {x.shape}: only NCHW input is supported")
    if out == (1, 1):
        return ctx.add1("global_avg_pool", [x])
    h, w = x.shape[2:]
    if h % out[0] == 0 and w % out[1] == 0:
        kernel = (h // out[0], w // out[1])
        return ctx.add1("avg_pool2d", [x], {"kernel": kernel, "strides": kernel, "padding": (0, 0, 0, 0)})
    # windows of unequal sizes (9 rows to 4: [0, 3), [2, 5), [4, 7), [6, 9)): the mean over a
    # window is separable, so it is a product with an averaging matrix along each axis
    rows, cols = _averaging(h, out[0], x.dtype), _averaging(w, out[1], x.dtype)
    y = ctx.add1("matmul", [x, ctx.const(np.ascontiguousarray(cols.T))])          # (N, C, H, ow)
    return ctx.add1("matmul", [ctx.const(rows), y])                                # (N, C, oh, ow)


@aten("_adaptive_avg_pool3d", "adaptive_avg_pool3d")
def adaptive_avg_pool3d(ctx, a: dict):
    """A mean over the three spatial axes for output size 1, avg_pool3d for output sizes that
    divide the input's (equal windows); windows of unequal sizes are refused."""
    x = a["self"]
    out = ints(a["output_size"], 3)
    if len(x.shape) not in (4, 5):
        raise ctx.unsupported(f"input shape {x.shape}: only (N,) C, D, H, W input is supported")
    spatial = tuple(x.shape[-3:])
    axes = tuple(range(len(x.shape) - 3, len(x.shape)))
    if out == (1, 1, 1):
        return ctx.add1("reduce_mean", [x], {"axes": axes, "keepdims": 1})
    if any(s % o for s, o in zip(spatial, out)):
        raise ctx.unsupported(f"output size {out} does not divide the input's spatial size {spatial}: "
                              "adaptive average pooling over windows of unequal sizes is not supported")
    kernel = tuple(s // o for s, o in zip(spatial, out))
    y = x if len(x.shape) == 5 else ctx.add1("reshape", [x], {"shape": (1,) + tuple(x.shape)})
    y = ctx.add1("avg_pool3d", [y], {"kernel": kernel, "strides": kernel, "padding": (0,) * 6})
    return y if len(x.shape) == 5 else ctx.add1("reshape", [y], {"shape": ctx.out_shape})


def adaptive_windows(size: int, out: int) -> list[tuple[int, int]]:
    """PyTorch's adaptive pooling windows: [floor(i * size / out), ceil((i + 1) * size / out))."""
    return [((i * size) // out, -(-((i + 1) * size) // out)) for i in range(out)]


def _averaging(size: int, out: int, dtype: str) -> np.ndarray:
    m = np.zeros((out, size), dtype)
    for i, (lo, hi) in enumerate(adaptive_windows(size, out)):
        m[i, lo:hi] = 1.0 / (hi - lo)
    return m


@aten("adaptive_max_pool2d", "adaptive_max_pool1d")
def adaptive_max_pool(ctx, a: dict):
    """Max over PyTorch's adaptive windows, one axis after the other (a maximum over a rectangle is
    the maximum of its rows' maxima): per axis, one gather of every window's positions as an
    (out, longest) table (a shorter window repeats its last position) and a max over the table's
    second axis.  (A chain of `maximum`s, one per position, inlined into one kernel grew as 3^n:
    each maximum reads its left operand three times for NaN propagation.)"""
    x = a["self"]
    if 1 in ctx.used_outputs:
        raise ctx.unsupported("the indices output of adaptive max pooling is not supported")
    spatial = len(x.shape) - 2
    out = ints(a["output_size"], spatial)
    for k, o in enumerate(out):
        axis = 2 + k
        windows = adaptive_windows(int(x.shape[axis]), o)
        longest = max(hi - lo for lo, hi in windows)
        table = np.array([[min(lo + t, hi - 1) for t in range(longest)] for lo, hi in windows], np.int64)
        picked = ctx.add1("gather", [x, ctx.const(table)], {"axis": axis})
        x = ctx.add1("reduce_max", [picked], {"axes": (axis + 1,), "keepdims": 0})
    return x, None


@aten("_softmax", "softmax", "_log_softmax", "log_softmax")
def softmax(ctx, a: dict):
    x = a["self"]
    dtype = ctx.out_dtypes[0]
    x = cast(ctx, x, dtype)
    axis = norm_dim(int(a["dim"]), len(x.shape))
    return ctx.add1("log_softmax" if "log" in ctx.op else "softmax", [x], {"axes": (axis,)})


@aten("embedding")
def embedding(ctx, a: dict):
    return ctx.add1("gather", [a["weight"], a["indices"]], {"axis": 0})


# _embedding_bag's mode argument
_BAG_MODES = {0: "sum", 1: "mean", 2: "max"}


@aten("_embedding_bag", "_embedding_bag_forward_only")
def embedding_bag(ctx, a: dict):
    """nn.EmbeddingBag with constant offsets: bag b holds the rows weight[indices[i]] for i in
    [offsets[b], offsets[b + 1]).  The bags are laid out as a constant (bags, longest) table of
    positions into `indices` (a shorter bag repeats its last position, an empty one reads
    position 0), the rows gathered through it, and each bag reduced over the table's second
    axis: the padding entries are weighted 0 for sum and mean and repeat a row for max.  An
    empty bag is zeros, as in PyTorch.  Only output 0 is computed; offset2bag, bag_size and
    max_indices are refused when read."""
    weight, indices, offsets = a["weight"], a["indices"], a["offsets"]
    mode = _BAG_MODES[int(a["mode"])]
    psw = a.get("per_sample_weights")
    if ctx.used_outputs - {0}:
        raise ctx.unsupported("only the first output of _embedding_bag (the bags) is supported")
    if a.get("padding_idx") not in (None, -1):
        raise ctx.unsupported("EmbeddingBag with padding_idx is not supported")
    if not ctx.is_const(offsets):
        raise ctx.unsupported("the offsets of an embedding bag must be constants (a buffer or 2-D input), "
                              "not values computed at run time")
    if psw is not None and mode != "sum":
        raise ctx.unsupported(f"per_sample_weights with mode {mode!r} (PyTorch allows them for sum only)")
    starts = [int(v) for v in ctx.value_of(offsets).reshape(-1)]
    ends = starts[1:] + [int(indices.shape[0])]
    if a.get("include_last_offset"):
        starts, ends = starts[:-1], ends[:-1]
    sizes = [max(e - s, 0) for s, e in zip(starts, ends)]
    longest = max(sizes, default=0)
    if longest == 0:
        return ctx.const(np.zeros(ctx.out_shape, weight.dtype)), None, None, None
    table = np.array([[s + min(t, n - 1) if n else 0 for t in range(longest)] for s, n in zip(starts, sizes)],
                     np.int64)
    present = np.array([[t < n for t in range(longest)] for n in sizes])
    rows = ctx.add1("gather", [weight, ctx.add1("gather", [indices, ctx.const(table)], {"axis": 0})], {"axis": 0})
    empty = ctx.const(np.array(sizes).reshape(-1, 1) == 0)
    if mode == "max":
        y = ctx.add1("reduce_max", [rows], {"axes": (1,), "keepdims": 0})
        return ctx.add1("where", [empty, ctx.const(np.zeros((), weight.dtype)), y]), None, None, None
    scale = ctx.const(present.astype(weight.dtype))
    if psw is not None:
        scale = ctx.add1("mul", [scale, ctx.add1("gather", [cast(ctx, psw, weight.dtype), ctx.const(table)],
                                                 {"axis": 0})])
    terms = ctx.add1("mul", [rows, ctx.add1("reshape", [scale], {"shape": table.shape + (1,)})])
    y = ctx.add1("reduce_sum", [terms], {"axes": (1,), "keepdims": 0})
    if mode == "mean":
        y = ctx.add1("div", [y, ctx.const(np.maximum(np.array(sizes), 1).reshape(-1, 1).astype(weight.dtype))])
    return y, None, None, None


# grid_sampler_2d's interpolation_mode and padding_mode arguments, as the grid_sample op names them
_GRID_MODES = {0: "linear", 1: "nearest", 2: "cubic"}
_GRID_PADDING = {0: "zeros", 1: "border", 2: "reflection"}


@aten("grid_sampler_2d")
def grid_sampler_2d(ctx, a: dict):
    """F.grid_sample on 4-D input -> grid_sample.  The graph op follows ONNX, which pads the
    sampling coordinate before taking the taps; PyTorch does the same except in two cases, which
    are refused: bicubic with border padding (PyTorch clamps each tap, not the coordinate) and
    nearest with reflection padding without align_corners (PyTorch reflects before rounding, so
    ties outside the input round the other way)."""
    mode, padding = _GRID_MODES[int(a["interpolation_mode"])], _GRID_PADDING[int(a["padding_mode"])]
    align = bool(a["align_corners"])
    if mode == "cubic" and padding == "border":
        raise ctx.unsupported("grid_sample with mode='bicubic' and padding_mode='border' is not supported "
                              "(PyTorch clamps each tap rather than the sampling point)")
    if mode == "nearest" and padding == "reflection" and not align:
        raise ctx.unsupported("grid_sample with mode='nearest', padding_mode='reflection' and "
                              "align_corners=False is not supported (PyTorch rounds after reflecting)")
    return ctx.add1("grid_sample", [a["input"], a["grid"]],
                    {"mode": mode, "padding_mode": padding, "align_corners": int(align)})


@aten("col2im")
def col2im(ctx, a: dict):
    """F.fold: (N, C * kh * kw, L) blocks -> (N, C, H, W), overlaps added; unbatched input too."""
    x = a["self"]
    image, block = ints(a["output_size"], 2), ints(a["kernel_size"], 2)
    pads = ints(a["padding"], 2)
    attrs = {"image_shape": image, "block_shape": block, "strides": ints(a["stride"], 2),
             "dilations": ints(a["dilation"], 2), "pads": pads + pads}
    if len(x.shape) == 3:
        return ctx.add1("col2im", [x], attrs)
    y = ctx.add1("col2im", [ctx.add1("reshape", [x], {"shape": (1,) + tuple(x.shape)})], attrs)
    return ctx.add1("reshape", [y], {"shape": ctx.out_shape})
