"""Index arithmetic shared by the layout and indexing ops (reshape, gather, pad, ...), on TE index
expressions: row-major ravel/unravel, the reshape index map, negative-index wrapping and clamping,
and the plain-Python shape checks the `infer` functions share.

No op is registered here; the registry imports the module like any other and finds none.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .. import te
from ..ir import dtype as dt
from ..ir.expr import Expr
from .registry import OpError

INT32_MAX = 2 ** 31 - 1


def index_dtype(*shapes: Sequence[int]) -> str:
    """int32 when every flat index of every shape fits in it, else int64."""
    biggest = max((int(np.prod(s, dtype=np.int64)) for s in shapes), default=0)
    return "int32" if biggest <= INT32_MAX else "int64"


def ravel(index: Sequence[Expr], shape: Sequence[int], dtype: str = "int32") -> Expr:
    """The row-major flat offset of `index` in `shape`."""
    flat: Expr = te.const(0, dtype)
    for i, d in zip(index, shape):
        flat = flat * d + te.cast(i, dtype)
    return flat


def unravel(flat: Expr, shape: Sequence[int]) -> list[Expr]:
    """The row-major multi-index of the flat offset `flat` in `shape`."""
    out: list[Expr] = []
    rest = flat
    for k in range(len(shape) - 1, -1, -1):
        d = int(shape[k])
        if k == 0:
            out.append(rest)
        elif d == 1:
            out.append(te.const(0, flat.dtype))
        else:
            out.append(rest % d)
            rest = rest // d
    return out[::-1]


def reshape_index(index: Sequence[Expr], out_shape: Sequence[int], in_shape: Sequence[int]) -> tuple:
    """The input index that output `index` reads when `in_shape` is reshaped to `out_shape`.

    When the two shapes differ only in size-1 dimensions (squeeze, unsqueeze, most flattens of
    a size-1 batch) each non-unit output axis maps straight to an input axis, without division.
    """
    if not all(isinstance(d, (int, np.integer)) for d in (*in_shape, *out_shape)):
        return _symbolic_reshape_index(index, out_shape, in_shape)
    in_shape, out_shape = tuple(int(d) for d in in_shape), tuple(int(d) for d in out_shape)
    if 0 in in_shape:                       # no element: the index is never evaluated
        return tuple(te.const(0, "int32") for _ in in_shape)
    if [d for d in in_shape if d != 1] == [d for d in out_shape if d != 1]:
        kept = [i for i, d in zip(index, out_shape) if d != 1]
        result, it = [], iter(kept)
        for d in in_shape:
            result.append(te.const(0, "int32") if d == 1 else next(it))
        return tuple(result)
    dtype = index_dtype(in_shape)
    return tuple(unravel(ravel(index, out_shape, dtype), in_shape))


def _symbolic_reshape_index(index: Sequence[Expr], out_shape: Sequence, in_shape: Sequence) -> tuple:
    """reshape_index where some dimensions are shape expressions (a kernel for any size,
    shape_generic.py): a reshape that adds or drops size-1 axes, each other axis the same on both
    sides; or one whose leading axes are the same on both sides and whose other axes are
    constants ([n, 85] -> [n, 5, 17]): those are raveled and unraveled.  OpError otherwise."""
    from .common import same_dim as same

    def const(d) -> bool:
        return isinstance(d, (int, np.integer))

    def unit(d) -> bool:
        return const(d) and d == 1

    kept_in, kept_out = [d for d in in_shape if not unit(d)], [d for d in out_shape if not unit(d)]
    if len(kept_in) == len(kept_out) and all(same(a, b) for a, b in zip(kept_in, kept_out)):
        it = iter([i for i, d in zip(index, out_shape) if not unit(d)])
        return tuple(te.const(0, "int32") if unit(d) else next(it) for d in in_shape)
    lead = 0
    while lead < min(len(in_shape), len(out_shape)) and same(in_shape[lead], out_shape[lead]):
        lead += 1
    rest_in, rest_out = in_shape[lead:], out_shape[lead:]
    if not all(const(d) for d in (*rest_in, *rest_out)) or \
            int(np.prod(rest_in, dtype=np.int64)) != int(np.prod(rest_out, dtype=np.int64)) or not rest_in:
        raise OpError(f"reshape of {tuple(in_shape)} to {tuple(out_shape)} needs constant shapes")
    inner = unravel(ravel(index[lead:], rest_out, index_dtype(rest_in)), rest_in) if rest_out else \
        [te.const(0, "int32") for _ in rest_in]
    return tuple(index[:lead]) + tuple(inner)


def wrap_index(i: Expr, dim: int) -> Expr:
    """A possibly negative index counted from the end (ONNX convention) made non-negative."""
    if dt.is_uint(i.dtype):
        return i
    return te.if_then_else(i < 0, i + dim, i)


def clamp_index(i: Expr, dim: int) -> Expr:
    """`i` clamped into [0, dim) so that out-of-range indices never read outside a buffer."""
    return te.min(te.max(i, 0), max(int(dim) - 1, 0))


def safe_index(i: Expr, dim: int) -> Expr:
    """Wrap a negative index, then clamp (bad input reads a border element, never out of bounds).
    An index narrower than 32 bits is widened first: its type may not hold `dim` (int8 -1 + 256)."""
    if dt.is_integer(i.dtype) and dt.bits(i.dtype) < 32:
        i = i.astype("int32")
    return clamp_index(wrap_index(i, dim), dim)


def normalize_axes(axes: Sequence[int], ndim: int, op: str, unique: bool = True) -> tuple:
    """Axes made non-negative; OpError for an axis out of range or repeated."""
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < ndim:
            raise OpError(f"{op}: axis {a} is out of range for a tensor of rank {ndim}")
        out.append(a % ndim)
    if unique and len(set(out)) != len(out):
        raise OpError(f"{op}: axes {tuple(axes)} repeat an axis")
    return tuple(out)


def check_int_tuple(value, op: str, name: str) -> tuple:
    """`value` as a tuple of Python ints; OpError when it is not a sequence of integers."""
    try:
        items = tuple(value)
    except TypeError:
        raise OpError(f"{op}: attribute {name} must be a sequence of integers, got {value!r}") from None
    out = []
    for v in items:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise OpError(f"{op}: attribute {name} must hold integers, got {value!r}")
        out.append(int(v))
    return tuple(out)


def check_index_dtype(dtype: str, op: str, what: str = "indices") -> None:
    if not (dtype.startswith("int") or dtype.startswith("uint")):
        raise OpError(f"{op}: {what} must have an integer dtype, got {dtype}")
