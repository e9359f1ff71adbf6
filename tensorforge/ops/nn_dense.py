"""Matrix products: dense (a fully connected layer) and matmul (NumPy's batched, broadcasting matmul).

    dense(x, w)[i, j]   = sum_k x[i, k] * w[j, k]          x (M, K), w (N, K): x @ w.T
    matmul(a, b)[.., i, j] = sum_k a[.., i, k] * b[.., k, j]

`matmul` follows numpy.matmul: leading (batch) axes broadcast, a 1-D `a` is a row vector and a
1-D `b` a column vector whose axis is dropped from the result.  Attributes transpose_a /
transpose_b swap the last two axes of an operand of rank >= 2 first (so ONNX Gemm's transA /
transB need no transpose node).  Both ops accumulate in the input dtype (integers wrap, as
ONNX's MatMul does), except float16 and bfloat16, which accumulate in float32 and round once
(as NumPy's matmul, so ONNX's reference, does).  The main stage is named and tagged "dense" /
"matmul"; pattern complex-out-fusable.
"""
from __future__ import annotations

import numpy as np

from .. import te
from .common import broadcast_shape, const_shape
from .registry import COMPLEX, OpError, TensorType, op

HALF = ("float16", "bfloat16")      # 16-bit floats: their products accumulate in float32


def _check_dtypes(name: str, a: TensorType, b: TensorType) -> None:
    if a is None or b is None:
        raise OpError(f"{name}: needs two inputs")
    if a.dtype != b.dtype:
        raise OpError(f"{name}: operand dtypes differ ({a.dtype} and {b.dtype})")
    if a.dtype == "bool":
        raise OpError(f"{name}: bool operands are not supported")


def _accumulate(a: np.ndarray) -> np.dtype:
    return np.dtype(np.float32) if a.dtype.name in HALF else a.dtype


@op("dense", COMPLEX, schedule={"cpu": "dense.cpu", "gpu": "matmul.gpu"})
class dense:
    """x (M, K) times w (N, K) transposed."""

    @staticmethod
    def infer(x: TensorType, w: TensorType) -> TensorType:
        _check_dtypes("dense", x, w)
        if len(x.shape) != 2 or len(w.shape) != 2:
            raise OpError(f"dense: x and w must be 2-D, got shapes {tuple(x.shape)} and {tuple(w.shape)}")
        if x.shape[1] != w.shape[1]:
            raise OpError(f"dense: x {tuple(x.shape)} and w {tuple(w.shape)} disagree on the reduced "
                          f"axis ({x.shape[1]} vs {w.shape[1]}); w must be (units, {x.shape[1]})")
        return TensorType((x.shape[0], w.shape[0]), x.dtype)

    @staticmethod
    def compute(x: te.Tensor, w: te.Tensor) -> te.Tensor:
        m, k = const_shape(x)
        n = const_shape(w)[0]
        rk = te.reduce_axis((0, k), name="k")
        acc = _te_accumulate(x.dtype)
        out = te.compute((m, n), lambda i, j: te.sum(x[i, rk].astype(acc) * w[j, rk].astype(acc), axis=rk),
                         name="dense", tag="dense")
        return _cast_back(out, x.dtype)

    @staticmethod
    def reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        acc = _accumulate(x)
        return np.matmul(x.astype(acc), w.astype(acc).T).astype(x.dtype)


def _operand_dims(shape: tuple, transpose: bool) -> tuple[tuple, int, int]:
    """(batch shape, rows, cols) of a matmul operand of rank >= 2 after the optional transpose."""
    rows, cols = shape[-2], shape[-1]
    return tuple(shape[:-2]), (cols if transpose else rows), (rows if transpose else cols)


def matmul_shape(a: tuple, b: tuple, transpose_a: bool = False, transpose_b: bool = False) -> tuple:
    """Result shape of numpy.matmul on `a` and `b` (after the optional transposes)."""
    if len(a) == 0 or len(b) == 0:
        raise OpError("matmul: operands must have rank >= 1 (got a scalar)")
    a_batch, m, ka = _operand_dims(a, transpose_a) if len(a) >= 2 else ((), 1, a[0])
    b_batch, kb, n = _operand_dims(b, transpose_b) if len(b) >= 2 else ((), b[0], 1)
    if ka != kb:
        raise OpError(f"matmul: the reduced axes differ: a {tuple(a)} has {ka}, b {tuple(b)} has {kb}"
                      f"{' (after transposes)' if transpose_a or transpose_b else ''}")
    batch = broadcast_shape(a_batch, b_batch, op="matmul (batch axes)")
    return batch + ((m,) if len(a) >= 2 else ()) + ((n,) if len(b) >= 2 else ())


@op("matmul", COMPLEX, schedule={"cpu": "matmul.cpu", "gpu": "matmul.gpu"}, attr_defaults={"transpose_a": False, "transpose_b": False})
class matmul:
    """numpy.matmul with optional transposes of the last two axes."""

    @staticmethod
    def infer(a: TensorType, b: TensorType, transpose_a: bool = False, transpose_b: bool = False) -> TensorType:
        _check_dtypes("matmul", a, b)
        return TensorType(matmul_shape(tuple(a.shape), tuple(b.shape), transpose_a, transpose_b), a.dtype)

    @staticmethod
    def compute(a: te.Tensor, b: te.Tensor, transpose_a: bool = False, transpose_b: bool = False) -> te.Tensor:
        acc = _te_accumulate(a.dtype)
        out = matmul_reduction(a, b, "matmul", lambda x, y, i, j: x.astype(acc) * y.astype(acc),
                               transpose_a, transpose_b)
        return _cast_back(out, a.dtype)

    @staticmethod
    def reference(a: np.ndarray, b: np.ndarray, transpose_a: bool = False, transpose_b: bool = False) -> np.ndarray:
        acc = _accumulate(a)
        a2 = np.swapaxes(a, -1, -2) if transpose_a and a.ndim >= 2 else a
        b2 = np.swapaxes(b, -1, -2) if transpose_b and b.ndim >= 2 else b
        return np.matmul(a2.astype(acc), b2.astype(acc)).astype(a.dtype)


def matmul_reduction(a: te.Tensor, b: te.Tensor, name: str, product, transpose_a: bool = False,
                     transpose_b: bool = False) -> te.Tensor:
    """The stage out[batch.., i, j] = sum_k product(a[batch.., i, k], b[batch.., k, j], i, j)
    with NumPy matmul's broadcasting of batch axes and its 1-D operands (whose i or j is None),
    named and tagged `name`, reducing over the axis "k"."""
    ashape, bshape = const_shape(a), const_shape(b)
    out_shape = matmul_shape(ashape, bshape, transpose_a, transpose_b)
    k = ashape[-2] if (transpose_a and len(ashape) >= 2) else ashape[-1]
    rk = te.reduce_axis((0, k), name="k")
    nbatch = len(out_shape) - (len(ashape) >= 2) - (len(bshape) >= 2)
    batch_shape = out_shape[:nbatch]

    def body(*idx):
        batch, rest = idx[:nbatch], list(idx[nbatch:])
        i = rest.pop(0) if len(ashape) >= 2 else None
        j = rest.pop(0) if len(bshape) >= 2 else None
        return te.sum(product(_load(a, batch, batch_shape, i, rk, transpose_a),
                              _load(b, batch, batch_shape, rk, j, transpose_b), i, j), axis=rk)

    return te.compute(out_shape, body, name=name, tag=name)


def _load(t: te.Tensor, batch: tuple, batch_shape: tuple, row, col, transpose: bool):
    """t[batch..., row, col] with t's batch axes broadcast to `batch_shape`; a 1-D operand reads
    only the axis that is not None; `transpose` swaps row and col for operands of rank >= 2."""
    shape = const_shape(t)
    if len(shape) == 1:  # exactly one of row / col is the reduce axis, the other None
        return t[row if col is None else col]
    if transpose:
        row, col = col, row
    offset = len(batch_shape) - (len(shape) - 2)
    idx = [0 if shape[k] == 1 and batch_shape[offset + k] != 1 else batch[offset + k]
           for k in range(len(shape) - 2)]
    return t[(*idx, row, col)]


def _te_accumulate(dtype: str) -> str:
    """float16 and bfloat16 products are summed in float32 and rounded once, as NumPy's matmul
    (so ONNX's reference) does."""
    return "float32" if dtype in HALF else dtype


def _cast_back(out: te.Tensor, dtype: str) -> te.Tensor:
    if out.dtype == dtype:
        return out
    return te.compute(const_shape(out), lambda *i: out[i].astype(dtype), name=f"{out.op.name}_cast")
