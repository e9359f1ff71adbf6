"""Host kernels: the steps a compiled model runs in NumPy instead of generated code.

Some ops do not fit a tensor expression (a scatter whose targets are index values known only
at run time, a sort).  The graph executor runs them as "opaque" steps that name one of the
kernels below.  They live in the runtime, not with the ops, so that a loaded model needs
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
    order = np.take(_order(x, a, bool(largest)), np.arange(int(k)), axis=a)
    return np.take_along_axis(x, order, axis=a), order.astype(np.int64)


KERNELS: dict[str, Callable] = {"scatter_elements": scatter_elements, "scatter_nd": scatter_nd,
                                "topk": topk, "cast_narrow": host_convert.cast_narrow,
                                "bitcast": host_convert.bitcast,
                                "quantize_narrow": host_convert.quantize_narrow,
                                "dequantize_narrow": host_convert.dequantize_narrow}
KERNELS["max_pool_with_indices"] = host_pool.max_pool_with_indices


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
