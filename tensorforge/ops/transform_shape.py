"""Layout ops that only move elements: reshape, flatten, squeeze, unsqueeze, transpose, expand.

All are injective: each output element reads exactly one input element, at an index computed
from the output index (`index_math.reshape_index` for the reshape family).  Shapes and axes are
plain attributes (the ONNX converter reads them from constant inputs).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .. import te
from .common import broadcast_load, broadcast_shape, const_shape, element_count, same_dim, shape_of
from .index_math import check_int_tuple, normalize_axes, reshape_index
from .registry import INJECTIVE, OpError, TensorType, op


# -- reshape ------------------------------------------------------------------------------------
def resolve_reshape(in_shape: Sequence[int], shape: Sequence[int], allowzero: int = 0,
                    op_name: str = "reshape") -> tuple:
    """The target shape with ONNX's special entries resolved: 0 copies the input dimension
    (unless `allowzero`), one -1 is inferred from the element count."""
    shape = check_int_tuple(shape, op_name, "shape")
    if not all(isinstance(d, (int, np.integer)) for d in in_shape):
        return _resolve_symbolic(in_shape, shape, allowzero, op_name)
    out = []
    for k, d in enumerate(shape):
        if d == 0 and not allowzero:
            if k >= len(in_shape):
                raise OpError(f"{op_name}: shape {shape} copies dimension {k} (a 0 entry), "
                              f"but the input has rank {len(in_shape)}")
            d = int(in_shape[k])
        elif d < -1:
            raise OpError(f"{op_name}: shape {shape} has the invalid entry {d}")
        out.append(d)
    if out.count(-1) > 1:
        raise OpError(f"{op_name}: shape {shape} has more than one -1")
    if allowzero and -1 in out and 0 in out:
        raise OpError(f"{op_name}: shape {shape} mixes -1 with a literal 0 (allowzero=1)")
    total = int(np.prod(in_shape, dtype=np.int64))
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1], dtype=np.int64))
        if known == 0 or total % known:
            raise OpError(f"{op_name}: cannot reshape {tuple(in_shape)} ({total} elements) to {shape}")
        out[out.index(-1)] = total // known
    if int(np.prod(out, dtype=np.int64)) != total:
        raise OpError(f"{op_name}: cannot reshape {tuple(in_shape)} ({total} elements) to {tuple(out)}")
    return tuple(out)


def _resolve_symbolic(in_shape: Sequence, shape: tuple, allowzero: int, op_name: str) -> tuple:
    """resolve_reshape where input dimensions are shape expressions (shape_generic.py): 0 copies
    the dimension, -1 takes what is left of the element count once the dimensions that appear on
    both sides cancel ([n * 2, 1, 3] -> [0, -1] is [n * 2, 3]); OpError where the counts cannot be
    shown equal."""
    if allowzero or shape.count(-1) > 1 or any(d < -1 for d in shape):
        raise OpError(f"{op_name}: shape {shape} of a varying input needs constant shapes")
    out: list = [in_shape[k] if d == 0 and k < len(in_shape) else d for k, d in enumerate(shape)]
    known = [d for d in out if not (isinstance(d, int) and d == -1)]
    rest_in, rest_known = _cancel(list(in_shape), known)
    uncancelled = not all(isinstance(d, int) for d in rest_known)
    if uncancelled or (-1 not in out and (rest_in or rest_known) and not _counts_equal(rest_in, rest_known)):
        raise OpError(f"{op_name}: cannot show that {tuple(in_shape)} reshapes to {tuple(shape)}")
    if -1 in out:
        ints = int(np.prod(rest_known, dtype=np.int64))
        exprs = [d for d in rest_in if not isinstance(d, int)]
        count = int(np.prod([d for d in rest_in if isinstance(d, int)], dtype=np.int64))
        if ints == 0 or count % ints:
            raise OpError(f"{op_name}: cannot show that {tuple(in_shape)} reshapes to {tuple(shape)}")
        out[out.index(-1)] = element_count([*exprs, count // ints])
    return tuple(out)


def _cancel(a: list, b: list) -> tuple[list, list]:
    """`a` and `b` with the shape expressions that appear in both removed, one for one, and their
    constant 1s dropped."""
    a, b = list(a), list(b)
    for k in [k for k, d in enumerate(b) if not isinstance(d, int)][::-1]:
        match = next((j for j, e in enumerate(a) if same_dim(e, b[k])), None)
        if match is not None:
            del a[match], b[k]
    ones = lambda ds: [d for d in ds if not (isinstance(d, int) and d == 1)]  # noqa: E731
    return ones(a), ones(b)


def _counts_equal(a: list, b: list) -> bool:
    """Whether the products of `a` and `b` (after _cancel) are provably equal: constants only."""
    if not all(isinstance(d, int) for d in (*a, *b)):
        return False
    return int(np.prod(a, dtype=np.int64)) == int(np.prod(b, dtype=np.int64))


def _reshaped(x: te.Tensor, out_shape: tuple, name: str) -> te.Tensor:
    in_shape = shape_of(x)
    return te.compute(out_shape, lambda *i: x[reshape_index(i, out_shape, in_shape)], name=name, tag=name)


@op("reshape", pattern=INJECTIVE, attr_defaults={"allowzero": 0}, narrow=True)
class reshape:
    def infer(x: TensorType, shape: Sequence[int], allowzero: int = 0) -> TensorType:
        return TensorType(resolve_reshape(x.shape, shape, allowzero), x.dtype)

    def compute(x: te.Tensor, shape: Sequence[int], allowzero: int = 0) -> te.Tensor:
        return _reshaped(x, resolve_reshape(shape_of(x), shape, allowzero), "reshape")

    def reference(x: np.ndarray, shape: Sequence[int], allowzero: int = 0) -> np.ndarray:
        return x.reshape(resolve_reshape(x.shape, shape, allowzero))


# -- flatten ------------------------------------------------------------------------------------
def flatten_shape(shape: Sequence[int], axis: int) -> tuple:
    ndim = len(shape)
    if not -ndim <= axis <= ndim:
        raise OpError(f"flatten: axis {axis} is out of range for a tensor of rank {ndim}")
    axis = axis + ndim if axis < 0 else axis
    return (int(np.prod(shape[:axis], dtype=np.int64)), int(np.prod(shape[axis:], dtype=np.int64)))


@op("flatten", pattern=INJECTIVE, attr_defaults={"axis": 1}, narrow=True)
class flatten:
    """Reshape to 2-D: dimensions before `axis` become the rows, the rest the columns."""

    def infer(x: TensorType, axis: int = 1) -> TensorType:
        return TensorType(flatten_shape(x.shape, axis), x.dtype)

    def compute(x: te.Tensor, axis: int = 1) -> te.Tensor:
        return _reshaped(x, flatten_shape(const_shape(x), axis), "flatten")

    def reference(x: np.ndarray, axis: int = 1) -> np.ndarray:
        return x.reshape(flatten_shape(x.shape, axis))


# -- squeeze / unsqueeze ------------------------------------------------------------------------
def squeeze_shape(shape: Sequence[int], axes: Sequence[int] | None) -> tuple:
    if axes is None:
        return tuple(d for d in shape if d != 1)
    axes = normalize_axes(axes, len(shape), "squeeze")
    for a in axes:
        if shape[a] != 1:
            raise OpError(f"squeeze: axis {a} has size {shape[a]}, not 1 (input shape {tuple(shape)})")
    return tuple(d for k, d in enumerate(shape) if k not in axes)


def unsqueeze_shape(shape: Sequence[int], axes: Sequence[int]) -> tuple:
    ndim = len(shape) + len(axes)
    axes = normalize_axes(axes, ndim, "unsqueeze")
    it = iter(shape)
    return tuple(1 if k in axes else next(it) for k in range(ndim))


@op("squeeze", pattern=INJECTIVE, attr_defaults={"axes": None}, narrow=True)
class squeeze:
    """Remove size-1 axes (all of them when `axes` is None)."""

    def infer(x: TensorType, axes: Sequence[int] | None = None) -> TensorType:
        return TensorType(squeeze_shape(x.shape, axes), x.dtype)

    def compute(x: te.Tensor, axes: Sequence[int] | None = None) -> te.Tensor:
        return _reshaped(x, squeeze_shape(shape_of(x), axes), "squeeze")

    def reference(x: np.ndarray, axes: Sequence[int] | None = None) -> np.ndarray:
        return x.reshape(squeeze_shape(x.shape, axes))


@op("unsqueeze", pattern=INJECTIVE, narrow=True)
class unsqueeze:
    """Insert size-1 axes at positions `axes` of the output."""

    def infer(x: TensorType, axes: Sequence[int]) -> TensorType:
        return TensorType(unsqueeze_shape(x.shape, axes), x.dtype)

    def compute(x: te.Tensor, axes: Sequence[int]) -> te.Tensor:
        return _reshaped(x, unsqueeze_shape(shape_of(x), axes), "unsqueeze")

    def reference(x: np.ndarray, axes: Sequence[int]) -> np.ndarray:
        return x.reshape(unsqueeze_shape(x.shape, axes))


# -- transpose ----------------------------------------------------------------------------------
def check_perm(perm: Sequence[int] | None, ndim: int) -> tuple:
    if perm is None:
        return tuple(range(ndim - 1, -1, -1))
    perm = check_int_tuple(perm, "transpose", "perm")
    if sorted(p % ndim if ndim else p for p in perm) != list(range(ndim)) or \
            any(not -ndim <= p < ndim for p in perm):
        raise OpError(f"transpose: perm {perm} is not a permutation of the {ndim} axes")
    return tuple(p % ndim for p in perm)


@op("transpose", pattern=INJECTIVE, attr_defaults={"perm": None}, narrow=True)
class transpose:
    """Output axis k is input axis perm[k] (reversed axes when perm is None)."""

    def infer(x: TensorType, perm: Sequence[int] | None = None) -> TensorType:
        perm = check_perm(perm, len(x.shape))
        return TensorType(tuple(x.shape[p] for p in perm), x.dtype)

    def compute(x: te.Tensor, perm: Sequence[int] | None = None) -> te.Tensor:
        shape = shape_of(x)
        perm = check_perm(perm, len(shape))
        inverse = [perm.index(a) for a in range(len(shape))]
        out_shape = tuple(shape[p] for p in perm)
        return te.compute(out_shape, lambda *i: x[tuple(i[k] for k in inverse)], name="transpose",
                          tag="transpose")

    def reference(x: np.ndarray, perm: Sequence[int] | None = None) -> np.ndarray:
        return np.transpose(x, check_perm(perm, x.ndim))


# -- expand -------------------------------------------------------------------------------------
@op("expand", pattern=INJECTIVE, narrow=True)
class expand:
    """Broadcast `x` against `shape` (both ways, as ONNX Expand: the result has the broadcast of
    the two shapes)."""

    def infer(x: TensorType, shape: Sequence[int]) -> TensorType:
        shape = check_int_tuple(shape, "expand", "shape")
        return TensorType(broadcast_shape(x.shape, shape, op="expand"), x.dtype)

    def compute(x: te.Tensor, shape: Sequence[int]) -> te.Tensor:
        out_shape = broadcast_shape(const_shape(x), tuple(shape), op="expand")
        return te.compute(out_shape, lambda *i: broadcast_load(x, i, out_shape), name="expand", tag="expand")

    def reference(x: np.ndarray, shape: Sequence[int]) -> np.ndarray:
        return np.broadcast_to(x, broadcast_shape(x.shape, tuple(shape), op="expand")).copy()
