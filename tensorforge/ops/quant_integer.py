"""Integer products with zero points (ops -> TE): matmul_integer and conv_integer.

    matmul_integer(a, b, za, zb)[.., i, j] = sum_k (a[.., i, k] - za[i]) * (b[.., k, j] - zb[j])
    conv_integer(x, w, zx, zw)[n, m, *o]   = conv(x - zx, w - zw[m])      (zero padding of x - zx)

Operands are int8 or uint8, the result int32 (ONNX MatMulInteger / ConvInteger).  A zero point
is absent (0), one value per tensor, or for matmul one per row of a / column of b and for conv
one per output channel of w.  Padding pads x with its zero point, so padded cells add nothing.
Products and sums are int32; with 8-bit operands no sum of fewer than 2^16 products overflows.

The main stage is named and tagged "matmul_integer" / "conv_integer"; pattern complex-out-fusable,
so a requantizing epilogue (ops/quant_linear.requantize) fuses onto it.
"""
from __future__ import annotations

import numpy as np

from .. import te
from .common import const_shape
from .nn_conv import conv_attrs, conv_out_shape, conv_reference
from .nn_dense import matmul_reduction, matmul_shape
from .nn_window import pad_stage, padded_extent
from .registry import COMPLEX, OpError, TensorType, op

OPERAND_TYPES = ("int8", "uint8")


def _check_operand(op_name: str, what: str, t: TensorType | None, zp: TensorType | None, sizes: tuple) -> None:
    if t is None:
        raise OpError(f"{op_name}: input {what} is required")
    if t.dtype not in OPERAND_TYPES:
        raise OpError(f"{op_name}: {what} has dtype {t.dtype}; expected int8 or uint8")
    if zp is None:
        return
    if zp.dtype != t.dtype:
        raise OpError(f"{op_name}: the zero point of {what} has dtype {zp.dtype}, {what} has {t.dtype}")
    n = int(np.prod(zp.shape))
    if n not in sizes or len(zp.shape) > 1:
        raise OpError(f"{op_name}: the zero point of {what} has shape {tuple(zp.shape)}; expected a scalar"
                      + (f" or {sizes[1]} values" if len(sizes) > 1 else ""))


def _zp_load(zp: te.Tensor | None, k):
    """zp[k] (or its only element) widened to int32; 0 when absent."""
    if zp is None:
        return None
    n = int(np.prod(const_shape(zp)))
    idx = (0,) * len(zp.shape) if n == 1 else (k,)
    return zp[idx].astype("int32")


def _zp_np(zp: np.ndarray | None, shape: tuple) -> np.ndarray | int:
    if zp is None:
        return 0
    return zp.astype(np.int32).reshape(shape if zp.size > 1 else ())


@op("matmul_integer", COMPLEX)
class matmul_integer:
    """numpy.matmul of (a - za) and (b - zb) in int32."""

    @staticmethod
    def infer(a: TensorType, b: TensorType, a_zero_point: TensorType | None = None,
              b_zero_point: TensorType | None = None) -> TensorType:
        if a is None or b is None:
            raise OpError("matmul_integer: needs a and b")
        out = matmul_shape(tuple(a.shape), tuple(b.shape))
        rows = a.shape[-2] if len(a.shape) >= 2 else 1
        _check_operand("matmul_integer", "a", a, a_zero_point, (1, rows))
        _check_operand("matmul_integer", "b", b, b_zero_point, (1, b.shape[-1] if len(b.shape) >= 2 else 1))
        return TensorType(out, "int32")

    @staticmethod
    def compute(a: te.Tensor, b: te.Tensor, a_zero_point: te.Tensor | None = None,
                b_zero_point: te.Tensor | None = None) -> te.Tensor:
        def product(x, y, i, j):
            x, y = x.astype("int32"), y.astype("int32")
            za, zb = _zp_load(a_zero_point, i), _zp_load(b_zero_point, j)
            return (x if za is None else x - za) * (y if zb is None else y - zb)

        return matmul_reduction(a, b, "matmul_integer", product)

    @staticmethod
    def reference(a: np.ndarray, b: np.ndarray, a_zero_point: np.ndarray | None = None,
                  b_zero_point: np.ndarray | None = None) -> np.ndarray:
        x = a.astype(np.int32) - _zp_np(a_zero_point, (-1, 1))
        y = b.astype(np.int32) - _zp_np(b_zero_point, (-1,))
        return np.matmul(x, y).astype(np.int32)


_CONV_DEFAULTS = {"strides": None, "padding": None, "dilations": None, "groups": 1}


@op("conv_integer", COMPLEX, attr_defaults=_CONV_DEFAULTS)
class conv_integer:
    """Grouped N-d convolution of (x - zx) and (w - zw) in int32, NC+spatial layout."""

    @staticmethod
    def infer(x: TensorType, w: TensorType, x_zero_point: TensorType | None = None,
              w_zero_point: TensorType | None = None, strides=None, padding=None, dilations=None,
              groups: int = 1) -> TensorType:
        if x is None or w is None:
            raise OpError("conv_integer: needs x and w")
        _check_operand("conv_integer", "x", x, x_zero_point, (1,))
        _check_operand("conv_integer", "w", w, w_zero_point, (1, w.shape[0]))
        rank = len(x.shape) - 2
        s, p, d, _ = conv_attrs("conv_integer", rank, tuple(x.shape), tuple(w.shape), strides, padding,
                                dilations, groups)
        return TensorType(conv_out_shape("conv_integer", tuple(x.shape), tuple(w.shape), s, p, d), "int32")

    @staticmethod
    def compute(x: te.Tensor, w: te.Tensor, x_zero_point: te.Tensor | None = None,
                w_zero_point: te.Tensor | None = None, strides=None, padding=None, dilations=None,
                groups: int = 1) -> te.Tensor:
        xshape, wshape = const_shape(x), const_shape(w)
        rank = len(xshape) - 2
        s, p, d, g = conv_attrs("conv_integer", rank, xshape, wshape, strides, padding, dilations, groups)
        out_shape = conv_out_shape("conv_integer", xshape, wshape, s, p, d)
        zx = _zp_load(x_zero_point, 0)
        shifted = te.compute(xshape, lambda *i: x[i].astype("int32") - zx if zx is not None
                             else x[i].astype("int32"), name="shift")
        padded = pad_stage(shifted, p[:rank], padded_extent(xshape[2:], out_shape[2:], wshape[2:], s, d), 0)
        cin_g, cout_g = wshape[1], wshape[0] // g
        rc = te.reduce_axis((0, cin_g), name="rc")
        rk = [te.reduce_axis((0, wshape[2 + i]), name=f"r{'zyx'[3 - rank + i]}") for i in range(rank)]

        def body(*idx):
            n, m, o = idx[0], idx[1], idx[2:]
            chan = rc if g == 1 else (m // cout_g) * cin_g + rc
            src = [o[i] * s[i] + rk[i] * d[i] for i in range(rank)]
            wv = w[(m, rc, *rk)].astype("int32")
            zw = _zp_load(w_zero_point, m)
            return te.sum(padded[(n, chan, *src)] * (wv if zw is None else wv - zw), axis=[rc, *rk])

        return te.compute(out_shape, body, name="conv_integer", tag="conv_integer",
                          attrs={"strides": s, "padding": p, "dilations": d, "groups": g})

    @staticmethod
    def reference(x: np.ndarray, w: np.ndarray, x_zero_point: np.ndarray | None = None,
                  w_zero_point: np.ndarray | None = None, strides=None, padding=None, dilations=None,
                  groups: int = 1) -> np.ndarray:
        rank = x.ndim - 2
        s, p, d, g = conv_attrs("conv_integer", rank, x.shape, w.shape, strides, padding, dilations, groups)
        xs = x.astype(np.int32) - _zp_np(x_zero_point, ())
        ws = w.astype(np.int32) - _zp_np(w_zero_point, (-1,) + (1,) * (w.ndim - 1))
        return conv_reference(xs, ws, s, p, d, g).astype(np.int32)
