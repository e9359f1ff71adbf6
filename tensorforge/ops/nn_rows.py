"""Row-wise normalizations over the last axis with two-stage reductions: softmax_rows,
log_softmax_rows and layer_norm_rows.

    softmax_rows(x)[..., j]                = exp(x[..., j] - max(x[..., :])) / sum(exp(x[..., :] - max))
    log_softmax_rows(x)[..., j]            = x[..., j] - max - log(sum(exp(x[..., :] - max)))
    layer_norm_rows(x, scale, bias)[..., j] = (x[..., j] - mean) * inv_std * scale[j] + bias[j]

They compute what softmax, log_softmax (axes=(-1,)) and layer_norm (axis=-1) compute; those ops' layout
rules (ops/layout_rules.py) rewrite them into these forms.  The difference is the shape of the
reductions: a row of D = K * L elements is reduced in two stages, first L partial results over
the K strided chunks (`<op>_part`, whose data axis of L lanes a CPU schedule vectorizes), then the
L partial results, folded in halves (`<op>_fold8`, ... `<op>_max` / `<op>_sum`: log2(L) vector steps).  A one-stage reduction is a chain of dependent scalar
additions (C compilers do not reorder floating-point sums); this one runs L chains in SIMD lanes.
L is the `lanes` attribute: the graph pass sets it from the target's vector width (`lanes_for`: one
vector of the dtype, or half of one, when it divides D; 16 for float32 on 512-bit vectors), and 1
keeps the reductions one stage.
Statistics are float32 (float64 for float64 input).  softmax_rows also takes float16, rounding
as softmax does (ops/nn_softmax.py: each node of ONNX's function body rounds to float16, the sum
accumulates in float32 as ReduceSum's does), so it divides by the rounded sum where the wide
types multiply by its reciprocal.  Pattern complex-out-fusable: elementwise consumers fuse
onto the output, which is named and tagged with the op name.
"""
from __future__ import annotations

import numpy as np

from .. import te
from .common import broadcast_load, const_shape
from .nn_norm import stats_dtype
from .reduce import accum_dtype
from .registry import COMPLEX, OpError, TensorType, op

DEFAULT_LANES = 16
# float16 sums accumulate in float32, where the two-stage order changes nothing the rounding to
# float16 keeps; bfloat16 sums accumulate in bfloat16 one term after the other (as ReduceSum),
# so bfloat16 softmax keeps its one-stage form (ops/nn_softmax.py)
SOFTMAX_DTYPES = ("float32", "float64", "float16")


def lanes_for(d: int, vector_lanes: int = DEFAULT_LANES) -> int:
    """Partial results per row: two vectors of `vector_lanes` where they divide a row of at least
    four (two chains of additions: softmax over 1024 floats 0.29 -> 0.22 ms, layer norm over 768
    0.18 -> 0.14 ms on AVX-512; four vectors were slower on rows of 768), else one vector or half
    of one when it divides a shorter row (and the row has several chunks), else one vector
    where the row holds at least two (the elements past the last whole chunk are reduced one by
    one: softmax over 6 x 1500 rows of 1500 took 29 ms as one-stage scalar chains at 1 thread,
    2x rows of 1504), else 1 (a one-stage reduction)."""
    if vector_lanes <= 1:
        return 1
    if d % (2 * vector_lanes) == 0 and d >= 4 * vector_lanes:
        return 2 * vector_lanes
    if d % vector_lanes == 0 and d >= 2 * vector_lanes:
        return vector_lanes
    half = vector_lanes // 2
    if d < 4 * vector_lanes and half > 1 and d % half == 0 and d >= 2 * half:
        return half
    return vector_lanes if d >= 2 * vector_lanes else 1


def row_reduce(value, rows: tuple, d: int, reducer, name: str, lanes: int) -> te.Tensor:
    """reducer over j in [0, d) of value(row index, j), as `<name>_part` over `lanes` partial
    results of the row's whole chunks of `lanes`, folded into one, then combined with
    `<name>_tail` (the elements after the last whole chunk, one by one) where `lanes` does not
    divide d; result `<name>` (keep-dims: shape rows + (1,)).  `lanes` 1 or over d: one stage."""
    if lanes <= 1 or d < lanes:
        k = te.reduce_axis((0, d), name="k")
        return te.compute(rows + (1,), lambda *i: reducer(value(i[:-1], k), axis=k), name=name)
    chunks, rest = divmod(d, lanes)
    last = f"{name}_lanes" if rest else name
    k = te.reduce_axis((0, chunks), name="k")
    part = te.compute(rows + (lanes,), lambda *i: reducer(value(i[:-1], k * lanes + i[-1]), axis=k),
                      name=f"{name}_part")
    if lanes & (lanes - 1):
        lane = te.reduce_axis((0, lanes), name="lane")
        part = te.compute(rows + (1,), lambda *i: reducer(part[(*i[:-1], lane)], axis=lane), name=last)
    else:
        # the partial results folded in halves (16 -> 8 -> 4 -> 2 -> 1): each step one vector
        # operation on the upper and lower half, log2(lanes) dependent steps instead of a scalar
        # chain of `lanes` (C compilers do not reorder a floating-point chain into a tree themselves)
        while lanes > 1:
            half = lanes // 2
            part = te.compute(rows + (half,), lambda *i, p=part, h=half: reducer(p[i], p[(*i[:-1], i[-1] + h)]),
                              name=last if half == 1 else f"{name}_fold{half}")
            lanes = half
    if not rest:
        return part
    t = te.reduce_axis((0, rest), name="t")
    tail = te.compute(rows + (1,), lambda *i: reducer(value(i[:-1], d - rest + t), axis=t), name=f"{name}_tail")
    return te.compute(rows + (1,), lambda *i: reducer(part[i], tail[i]), name=name)


def _check_float(name: str, x: TensorType, dtypes: tuple = ("float32", "float64")) -> None:
    if x is None or x.dtype not in dtypes:
        raise OpError(f"{name}: the input must be {' or '.join(dtypes)}, got {x.dtype if x else None}")
    if len(x.shape) < 1 or x.shape[-1] < 1:
        raise OpError(f"{name}: the input needs a non-empty last axis, got shape {tuple(x.shape)}")


@op("softmax_rows", COMPLEX, schedule={"cpu": "rows.cpu"}, attr_defaults={"lanes": DEFAULT_LANES})
class softmax_rows:
    @staticmethod
    def infer(x: TensorType, lanes: int = DEFAULT_LANES) -> TensorType:
        _check_float("softmax_rows", x, SOFTMAX_DTYPES)
        return TensorType(tuple(x.shape), x.dtype)

    @staticmethod
    def compute(x: te.Tensor, lanes: int = DEFAULT_LANES) -> te.Tensor:
        shape = const_shape(x)
        rows, d = shape[:-1], shape[-1]
        mx = row_reduce(lambda r, j: x[(*r, j)], rows, d, te.max, "softmax_rows_max", lanes)
        e = te.compute(shape, lambda *i: te.exp(x[i] - mx[(*i[:-1], 0)]), name="softmax_rows_exp")
        if x.dtype == "float16":
            acc = accum_dtype(x.dtype)
            total = row_reduce(lambda r, j: e[(*r, j)].astype(acc), rows, d, te.sum, "softmax_rows_sum", lanes)
            return te.compute(shape, lambda *i: e[i] / total[(*i[:-1], 0)].astype(x.dtype), name="softmax_rows",
                              tag="softmax_rows")
        total = row_reduce(lambda r, j: e[(*r, j)], rows, d, te.sum, "softmax_rows_sum", lanes)
        inv = te.compute(rows + (1,), lambda *i: te.const(1.0, x.dtype) / total[i], name="softmax_rows_inv")
        return te.compute(shape, lambda *i: e[i] * inv[(*i[:-1], 0)], name="softmax_rows", tag="softmax_rows")

    @staticmethod
    def reference(x: np.ndarray, lanes: int = DEFAULT_LANES) -> np.ndarray:
        from .nn_softmax import softmax
        return softmax.reference(x, axes=(-1,))


@op("log_softmax_rows", COMPLEX, schedule={"cpu": "rows.cpu"}, attr_defaults={"lanes": DEFAULT_LANES})
class log_softmax_rows:
    """log_softmax over the last axis (float32/float64), its max and its sum of exponentials as
    row reductions of `lanes` partial results (the one-stage form ran scalar chains: 9x ONNX
    Runtime's time on 512 x 1024)."""

    @staticmethod
    def infer(x: TensorType, lanes: int = DEFAULT_LANES) -> TensorType:
        _check_float("log_softmax_rows", x)
        return TensorType(tuple(x.shape), x.dtype)

    @staticmethod
    def compute(x: te.Tensor, lanes: int = DEFAULT_LANES) -> te.Tensor:
        shape = const_shape(x)
        rows, d = shape[:-1], shape[-1]
        mx = row_reduce(lambda r, j: x[(*r, j)], rows, d, te.max, "log_softmax_rows_max", lanes)
        total = row_reduce(lambda r, j: te.exp(x[(*r, j)] - mx[(*r, 0)]), rows, d, te.sum,
                           "log_softmax_rows_sum", lanes)
        shift = te.compute(rows + (1,), lambda *i: mx[i] + te.log(total[i]), name="log_softmax_rows_shift")
        return te.compute(shape, lambda *i: x[i] - shift[(*i[:-1], 0)], name="log_softmax_rows",
                          tag="log_softmax_rows")

    @staticmethod
    def reference(x: np.ndarray, lanes: int = DEFAULT_LANES) -> np.ndarray:
        from .nn_softmax import log_softmax
        return log_softmax.reference(x, axes=(-1,))


@op("layer_norm_rows", COMPLEX, schedule={"cpu": "rows.cpu"}, attr_defaults={"epsilon": 1e-5, "lanes": DEFAULT_LANES})
class layer_norm_rows:
    @staticmethod
    def infer(x: TensorType, scale: TensorType, bias: TensorType | None = None, epsilon: float = 1e-5,
              lanes: int = DEFAULT_LANES):
        _check_float("layer_norm_rows", x)
        for what, p in (("scale", scale), ("bias", bias)):
            if p is not None and (len(p.shape) > 1 or (p.shape and p.shape[0] not in (1, x.shape[-1]))):
                raise OpError(f"layer_norm_rows: {what} must have shape ({x.shape[-1]},), got {tuple(p.shape)}")
        if scale is None:
            raise OpError("layer_norm_rows: the scale input is required")
        return TensorType(tuple(x.shape), x.dtype)

    @staticmethod
    def compute(x: te.Tensor, scale: te.Tensor, bias: te.Tensor | None = None, epsilon: float = 1e-5,
                lanes: int = DEFAULT_LANES):
        shape = const_shape(x)
        rows, d = shape[:-1], shape[-1]
        acc = stats_dtype(x.dtype)
        total = row_reduce(lambda r, j: x[(*r, j)].astype(acc), rows, d, te.sum, "layer_norm_rows_sum", lanes)
        mean = te.compute(rows + (1,), lambda *i: total[i] / te.const(float(d), acc), name="layer_norm_rows_mean")

        def centred(r, j):
            c = x[(*r, j)].astype(acc) - mean[(*r, 0)]
            return c * c

        sq = row_reduce(centred, rows, d, te.sum, "layer_norm_rows_sq", lanes)
        inv = te.compute(rows + (1,), lambda *i: te.const(1.0, acc) / te.sqrt(
            sq[i] / te.const(float(d), acc) + te.const(float(epsilon), acc)), name="layer_norm_rows_inv")

        def body(*i):
            k = (*i[:-1], 0)
            y = (x[i].astype(acc) - mean[k]) * inv[k] * broadcast_load(scale, i, shape).astype(acc)
            if bias is not None:
                y = y + broadcast_load(bias, i, shape).astype(acc)
            return y.astype(x.dtype)

        return te.compute(shape, body, name="layer_norm_rows", tag="layer_norm_rows")

    @staticmethod
    def reference(x: np.ndarray, scale: np.ndarray, bias: np.ndarray | None = None, epsilon: float = 1e-5,
                  lanes: int = DEFAULT_LANES):
        acc = x.astype(stats_dtype(x.dtype.name))
        mean = np.mean(acc, axis=-1, keepdims=True)
        var = np.mean((acc - mean) ** 2, axis=-1, keepdims=True)
        y = (acc - mean) / np.sqrt(var + epsilon) * scale.astype(acc.dtype)
        if bias is not None:
            y = y + bias.astype(acc.dtype)
        return y.astype(x.dtype)
