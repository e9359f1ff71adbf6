"""Normalizations by mean and variance: instance_norm, layer_norm, mean_variance_normalization,
and batch_norm (inference form, the statistics given as inputs).

    instance_norm(x, scale, bias)   over the spatial axes 2..: scale[c] * (x - mean) / sqrt(var + eps) + bias[c]
    layer_norm(x, scale, bias?)      over axes axis..rank-1:  (x - mean) * inv_std * scale + bias,
                                     inv_std = 1 / sqrt(var + eps); with stash=True it also returns
                                     mean and inv_std (float32, size 1 on the normalized axes)
    mean_variance_normalization(x)  over `axes`:             (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9)

Statistics are computed in float32 for float16 input (float64 for float64), as ONNX's stash
type asks, and the result is cast back.  TE stages: "<op>_mean", "<op>_var" (keep-dims
reductions), then the elementwise output stage tagged with the op name.  These ops are opaque:
compiled as their own kernels, not fused (TVM decomposes them instead).

    batch_norm(x, gamma, beta, mean, var)[.., c, ..] = gamma[c] * (x - mean[c]) / sqrt(var[c] + eps) + beta[c]

is injective (`axis`, default 1, names the axis the 1-D parameters run along).  The running
statistics stay inputs (rather than being pre-multiplied by the converter) so that a graph pass
may fold them into a preceding convolution's weights.  Training mode is rejected by the converter.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .. import te
from .common import broadcast_load, const_shape, normalize_axis
from .layout_rules import layer_norm_to_rows
from .registry import INJECTIVE, OPAQUE, OpError, TensorType, op


def stats_dtype(dtype: str) -> str:
    return "float64" if dtype == "float64" else "float32"


def _check_float(name: str, x: TensorType) -> None:
    if x is None or not x.dtype.startswith("float"):
        raise OpError(f"{name}: the input must be a float tensor, got {x.dtype if x else None}")


def moments(x: te.Tensor, axes: Sequence[int], name: str, squares: bool = False) -> tuple[te.Tensor, te.Tensor]:
    """Keep-dims stages (mean, var) of x over `axes` in the stats dtype.  With squares=True the
    second stage is E[x^2] instead of the centred variance."""
    shape = const_shape(x)
    acc = stats_dtype(x.dtype)
    count = float(np.prod([shape[a] for a in axes]))

    def reduce(value, stage):
        red = {a: te.reduce_axis((0, shape[a]), name=f"r{a}") for a in axes}
        kept = tuple(1 if a in red else d for a, d in enumerate(shape))

        def body(*i):
            idx = tuple(red[a] if a in red else i[a] for a in range(len(shape)))
            return te.sum(value(idx, i), axis=list(red.values()))

        total = te.compute(kept, body, name=f"{stage}_sum")
        return te.compute(kept, lambda *i: total[i] / te.const(count, acc), name=stage)

    mean = reduce(lambda idx, i: x[idx].astype(acc), f"{name}_mean")
    if squares:
        second = reduce(lambda idx, i: x[idx].astype(acc) * x[idx].astype(acc), f"{name}_sqmean")
    else:
        def centred(idx, i):
            d = x[idx].astype(acc) - mean[tuple(0 if a in axes else v for a, v in enumerate(i))]
            return d * d
        second = reduce(centred, f"{name}_var")
    return mean, second


def _kept(i: tuple, axes: Sequence[int]) -> tuple:
    return tuple(0 if a in axes else v for a, v in enumerate(i))


def _np_moments(x: np.ndarray, axes: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    acc = x.astype(stats_dtype(x.dtype.name))
    mean = np.mean(acc, axis=axes, keepdims=True)
    return acc, mean, np.mean((acc - mean) ** 2, axis=axes, keepdims=True)


@op("instance_norm", OPAQUE, attr_defaults={"epsilon": 1e-5})
class instance_norm:
    @staticmethod
    def infer(x: TensorType, scale: TensorType, bias: TensorType, epsilon: float = 1e-5) -> TensorType:
        _check_float("instance_norm", x)
        if len(x.shape) < 3:
            raise OpError(f"instance_norm: x must be (N, C, D1, ...), got shape {tuple(x.shape)}")
        for what, p in (("scale", scale), ("bias", bias)):
            if p is None or tuple(p.shape) != (x.shape[1],):
                raise OpError(f"instance_norm: {what} must have shape ({x.shape[1]},), got "
                              f"{tuple(p.shape) if p is not None else None}")
        return TensorType(tuple(x.shape), x.dtype)

    @staticmethod
    def compute(x: te.Tensor, scale: te.Tensor, bias: te.Tensor, epsilon: float = 1e-5) -> te.Tensor:
        axes = tuple(range(2, len(x.shape)))
        acc = stats_dtype(x.dtype)
        mean, var = moments(x, axes, "instance_norm")
        kept = tuple(mean.shape)

        # per image and channel, once: a = scale / sqrt(var + eps), b = bias - mean * a, so that
        # each element is one multiply-add (a square root and a division per element took 2.2x
        # ONNX Runtime's time).  Reductions over one element, so that lowering keeps them stages.
        def coefficient(which):
            def entry(*i):
                one = te.reduce_axis((0, 1), name="one")
                a = scale[i[1] + one.var].astype(acc) / te.sqrt(var[i] + te.const(float(epsilon), acc))
                value = a if which == "a" else bias[i[1] + one.var].astype(acc) - mean[i] * a
                return te.sum(value, axis=one)
            return te.compute(kept, entry, name=f"instance_norm_{which}")

        a, b = coefficient("a"), coefficient("b")

        def body(*i):
            k = _kept(i, axes)
            return (x[i].astype(acc) * a[k] + b[k]).astype(x.dtype)

        return te.compute(const_shape(x), body, name="instance_norm", tag="instance_norm")

    @staticmethod
    def reference(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, epsilon: float = 1e-5) -> np.ndarray:
        axes = tuple(range(2, x.ndim))
        acc, mean, var = _np_moments(x, axes)
        view = (-1,) + (1,) * len(axes)
        y = scale.astype(acc.dtype).reshape(view) * (acc - mean) / np.sqrt(var + epsilon)
        return (y + bias.astype(acc.dtype).reshape(view)).astype(x.dtype)


def _ln_axes(x_shape: tuple, axis: int) -> tuple:
    return tuple(range(normalize_axis(axis, len(x_shape), "layer_norm"), len(x_shape)))


@op("layer_norm", OPAQUE, attr_defaults={"axis": -1, "epsilon": 1e-5, "stash": False})
class layer_norm:
    alter_layout = staticmethod(layer_norm_to_rows)

    @staticmethod
    def infer(x: TensorType, scale: TensorType, bias: TensorType | None = None, axis: int = -1,
              epsilon: float = 1e-5, stash: bool = False):
        _check_float("layer_norm", x)
        axes = _ln_axes(tuple(x.shape), axis)
        norm_shape = tuple(x.shape[a] for a in axes)
        for what, p in (("scale", scale), ("bias", bias)):
            if p is None and what == "bias":
                continue
            if p is None:
                raise OpError("layer_norm: the scale input is required")
            try:
                if np.broadcast_shapes(tuple(p.shape), norm_shape) != norm_shape:
                    raise ValueError
            except ValueError:
                raise OpError(f"layer_norm: {what} {tuple(p.shape)} does not broadcast to the normalized "
                              f"shape {norm_shape}") from None
        y = TensorType(tuple(x.shape), x.dtype)
        if not stash:
            return y
        stat = TensorType(tuple(1 if a in axes else d for a, d in enumerate(x.shape)), "float32")
        return y, stat, stat

    @staticmethod
    def compute(x: te.Tensor, scale: te.Tensor, bias: te.Tensor | None = None, axis: int = -1,
                epsilon: float = 1e-5, stash: bool = False):
        shape = const_shape(x)
        axes = _ln_axes(shape, axis)
        acc = stats_dtype(x.dtype)
        mean, var = moments(x, axes, "layer_norm")
        inv = te.compute(mean.shape, lambda *i: te.const(1.0, acc) / te.sqrt(var[i] + te.const(float(epsilon), acc)),
                         name="layer_norm_inv_std")

        def body(*i):
            k = _kept(i, axes)
            y = (x[i].astype(acc) - mean[k]) * inv[k] * broadcast_load(scale, i, shape).astype(acc)
            if bias is not None:
                y = y + broadcast_load(bias, i, shape).astype(acc)
            return y.astype(x.dtype)

        y = te.compute(shape, body, name="layer_norm", tag="layer_norm")
        if not stash:
            return y
        cast = [te.compute(t.shape, lambda *i, t=t: t[i].astype("float32"), name=n)
                for t, n in ((mean, "layer_norm_mean_out"), (inv, "layer_norm_inv_std_out"))] \
            if acc != "float32" else [mean, inv]
        return y, cast[0], cast[1]

    @staticmethod
    def reference(x: np.ndarray, scale: np.ndarray, bias: np.ndarray | None = None, axis: int = -1,
                  epsilon: float = 1e-5, stash: bool = False):
        axes = _ln_axes(x.shape, axis)
        acc, mean, var = _np_moments(x, axes)
        inv = 1.0 / np.sqrt(var + epsilon)
        y = (acc - mean) * inv * scale.astype(acc.dtype)
        if bias is not None:
            y = y + bias.astype(acc.dtype)
        y = y.astype(x.dtype)
        return (y, mean.astype(np.float32), inv.astype(np.float32)) if stash else y


def mvn_axes(axes: Sequence[int] | None, ndim: int) -> tuple:
    axes = (0, 2, 3) if axes is None else tuple(axes)
    return tuple(sorted({normalize_axis(int(a), ndim, "mean_variance_normalization") for a in axes}))


@op("mean_variance_normalization", OPAQUE, attr_defaults={"axes": (0, 2, 3)})
class mean_variance_normalization:
    @staticmethod
    def infer(x: TensorType, axes=(0, 2, 3)) -> TensorType:
        _check_float("mean_variance_normalization", x)
        mvn_axes(axes, len(x.shape))
        return TensorType(tuple(x.shape), x.dtype)

    @staticmethod
    def compute(x: te.Tensor, axes=(0, 2, 3)) -> te.Tensor:
        axes = mvn_axes(axes, len(x.shape))
        acc = stats_dtype(x.dtype)
        mean, sq = moments(x, axes, "mvn", squares=True)

        def body(*i):
            k = _kept(i, axes)
            std = te.sqrt(sq[k] - mean[k] * mean[k])
            return ((x[i].astype(acc) - mean[k]) / (std + te.const(1e-9, acc))).astype(x.dtype)

        return te.compute(const_shape(x), body, name="mean_variance_normalization",
                          tag="mean_variance_normalization")

    @staticmethod
    def reference(x: np.ndarray, axes=(0, 2, 3)) -> np.ndarray:
        axes = mvn_axes(axes, x.ndim)
        acc = x.astype(stats_dtype(x.dtype.name))
        mean = np.mean(acc, axis=axes, keepdims=True)
        std = np.sqrt(np.mean(acc * acc, axis=axes, keepdims=True) - mean * mean)
        return ((acc - mean) / (std + 1e-9)).astype(x.dtype)


# -- batch_norm: statistics given as inputs; injective ------------------------------------------
def _check_channel_param(name: str, what: str, x: TensorType, p: TensorType, axis: int) -> None:
    if p is None:
        raise OpError(f"{name}: the {what} input is required")
    if tuple(p.shape) != (x.shape[axis],):
        raise OpError(f"{name}: {what} must have shape ({x.shape[axis]},) (the size of axis {axis} of "
                      f"x {tuple(x.shape)}), got {tuple(p.shape)}")
    if p.dtype != x.dtype:
        raise OpError(f"{name}: {what} dtype {p.dtype} differs from x dtype {x.dtype}")


def _channel_view(p: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    """A 1-D parameter reshaped to broadcast along `axis` of an ndim-D array."""
    shape = [1] * ndim
    shape[axis] = -1
    return p.reshape(shape)


@op("batch_norm", INJECTIVE, attr_defaults={"epsilon": 1e-5, "axis": 1})
class batch_norm:
    @staticmethod
    def infer(x: TensorType, gamma: TensorType, beta: TensorType, mean: TensorType, var: TensorType,
              epsilon: float = 1e-5, axis: int = 1) -> TensorType:
        if not x.dtype.startswith("float"):
            raise OpError(f"batch_norm: x must be a float tensor, got {x.dtype}")
        ax = normalize_axis(axis, len(x.shape), "batch_norm")
        for what, p in (("scale", gamma), ("bias", beta), ("mean", mean), ("var", var)):
            _check_channel_param("batch_norm", what, x, p, ax)
        return TensorType(tuple(x.shape), x.dtype)

    @staticmethod
    def compute(x: te.Tensor, gamma: te.Tensor, beta: te.Tensor, mean: te.Tensor, var: te.Tensor,
                epsilon: float = 1e-5, axis: int = 1) -> te.Tensor:
        ax = normalize_axis(axis, len(x.shape), "batch_norm")
        eps = te.const(float(epsilon), x.dtype)

        def body(*i):
            c = i[ax]
            return gamma[c] * (x[i] - mean[c]) / te.sqrt(var[c] + eps) + beta[c]

        return te.compute(const_shape(x), body, name="batch_norm", tag="batch_norm")

    @staticmethod
    def reference(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, mean: np.ndarray, var: np.ndarray,
                  epsilon: float = 1e-5, axis: int = 1) -> np.ndarray:
        ax = normalize_axis(axis, x.ndim, "batch_norm")
        g, b, m, v = (_channel_view(p, x.ndim, ax) for p in (gamma, beta, mean, var))
        eps = x.dtype.type(epsilon)
        return (g * (x - m) / np.sqrt(v + eps) + b).astype(x.dtype)
