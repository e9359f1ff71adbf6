"""Normalizations by a sum of powers: lp_normalization and lrn (local response normalization).

    lp_normalization(x)  = x / ||x||_p along `axis` (p = 1 or 2); 0 where the norm is 0
    lrn(x)[n, c, ..]     = x / (bias + alpha / size * sum_{c' in window(c)} x[n, c', ..]^2) ^ beta
                           window(c) = [c - floor((size-1)/2), c + ceil((size-1)/2)] clipped to [0, C)

TE stages: "lp_normalization_norm" / "lrn_square_sum" (reductions), then the elementwise output
stage tagged with the op name.  Opaque (compiled on their own), as in TVM.
"""
from __future__ import annotations

import numpy as np

from .. import te
from .common import const_shape, normalize_axis
from .registry import OPAQUE, OpError, TensorType, op


def _check_float(name: str, x: TensorType) -> None:
    if not x.dtype.startswith("float"):
        raise OpError(f"{name}: the input must be a float tensor, got {x.dtype}")


def _check_p(p: int) -> int:
    if int(p) not in (1, 2):
        raise OpError(f"lp_normalization: p must be 1 or 2, got {p}")
    return int(p)


@op("lp_normalization", OPAQUE, attr_defaults={"axis": -1, "p": 2})
class lp_normalization:
    @staticmethod
    def infer(x: TensorType, axis: int = -1, p: int = 2) -> TensorType:
        _check_float("lp_normalization", x)
        normalize_axis(axis, len(x.shape), "lp_normalization")
        _check_p(p)
        return TensorType(tuple(x.shape), x.dtype)

    @staticmethod
    def compute(x: te.Tensor, axis: int = -1, p: int = 2) -> te.Tensor:
        shape = const_shape(x)
        ax = normalize_axis(axis, len(shape), "lp_normalization")
        p = _check_p(p)
        r = te.reduce_axis((0, shape[ax]), name="r")
        kept = tuple(1 if a == ax else d for a, d in enumerate(shape))

        def power_sum(*i):
            v = x[tuple(r if a == ax else i[a] for a in range(len(shape)))]
            return te.sum(te.abs(v) if p == 1 else v * v, axis=r)

        total = te.compute(kept, power_sum, name="lp_normalization_sum")
        norm = te.compute(kept, lambda *i: total[i] if p == 1 else te.sqrt(total[i]), name="lp_normalization_norm")
        zero = te.const(0, x.dtype)

        def body(*i):
            n = norm[tuple(0 if a == ax else i[a] for a in range(len(shape)))]
            return te.if_then_else(n == zero, zero, x[i] / n)

        return te.compute(shape, body, name="lp_normalization", tag="lp_normalization")

    @staticmethod
    def reference(x: np.ndarray, axis: int = -1, p: int = 2) -> np.ndarray:
        ax = normalize_axis(axis, x.ndim, "lp_normalization")
        p = _check_p(p)
        a = np.abs(x)
        norm = np.sum(a, axis=ax, keepdims=True) if p == 1 else np.sqrt(np.sum(a * a, axis=ax, keepdims=True))
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where(norm == 0, 0, x / np.where(norm == 0, 1, norm))
        return out.astype(x.dtype)


def _lrn_window(size: int) -> tuple[int, int]:
    """(channels before c, channels after c) in the window around channel c."""
    return (size - 1) // 2, size // 2


@op("lrn", OPAQUE, attr_defaults={"alpha": 1e-4, "beta": 0.75, "bias": 1.0})
class lrn:
    @staticmethod
    def infer(x: TensorType, size: int, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0) -> TensorType:
        _check_float("lrn", x)
        if len(x.shape) < 3:
            raise OpError(f"lrn: x must be (N, C, D1, ...), got shape {tuple(x.shape)}")
        if int(size) < 1:
            raise OpError(f"lrn: size must be positive, got {size}")
        return TensorType(tuple(x.shape), x.dtype)

    @staticmethod
    def compute(x: te.Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0) -> te.Tensor:
        shape = const_shape(x)
        before, _ = _lrn_window(int(size))
        r = te.reduce_axis((0, int(size)), name="rc")
        zero = te.const(0, x.dtype)

        def square_sum(*i):
            c = i[1] - before + r
            v = x[(i[0], c, *i[2:])]
            return te.sum(te.if_then_else(te.all(c >= 0, c < shape[1]), v * v, zero), axis=r)

        ss = te.compute(shape, square_sum, name="lrn_square_sum")
        dt = x.dtype

        def body(*i):
            base = te.const(float(bias), dt) + te.const(float(alpha) / int(size), dt) * ss[i]
            return x[i] / te.pow(base, te.const(float(beta), dt))

        return te.compute(shape, body, name="lrn", tag="lrn")

    @staticmethod
    def reference(x: np.ndarray, size: int, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0) -> np.ndarray:
        before, after = _lrn_window(int(size))
        sq = (x.astype(np.float64) ** 2)
        padded = np.pad(sq, [(0, 0), (before, after)] + [(0, 0)] * (x.ndim - 2))
        ss = sum(padded[:, k:k + x.shape[1]] for k in range(int(size)))
        return (x / (bias + alpha / int(size) * ss) ** beta).astype(x.dtype)
