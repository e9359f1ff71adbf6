"""conv2d_int8: an int8 convolution with a power-of-two requantizing epilogue (ops -> TE).

    conv2d_int8(x, w, bias)[n, o, i, j] = int8(clip((acc[n, o, i, j] >> shift) + bias[o], 0, 127))
    acc = sum_{c, di, dj} int32(x_pad[n, c, i*s + di, j*s + dj]) * int32(w[o, c, di, dj])

x is int8 NCHW, w int8 OIHW, bias int32 [O]; the shift is arithmetic (rounds toward -inf) and
padding adds zeros.  This is the layer the accelerator computes (ACCEL.md section 4.9: GEMM,
SHR, ADD, MAX 0, MIN 127, the truncating store), so a graph of these runs the same function on
the CPU and, where the channels fit its blocks, on the accelerator (backends/accel/offload.py).

The op is "opaque" to fusion though it has a compute: it always forms a kernel of its own, so
the offload pass can hand whole kernels to the accelerator and the CPU build runs the same
kernels as one C function each.
"""
from __future__ import annotations

import numpy as np

from .. import te
from .common import const_shape
from .nn_conv import conv_attrs, conv_out_shape, conv_reference
from .nn_window import pad_stage, padded_extent
from .registry import OPAQUE, OpError, TensorType, op


def _checked(x: TensorType, w: TensorType, bias: TensorType, strides, padding, shift) -> tuple:
    if x is None or w is None or bias is None:
        raise OpError("conv2d_int8: needs x, w and bias")
    for what, t, dtype in (("x", x, "int8"), ("w", w, "int8"), ("bias", bias, "int32")):
        if t.dtype != dtype:
            raise OpError(f"conv2d_int8: {what} has dtype {t.dtype}; expected {dtype}")
    s, p, d, _ = conv_attrs("conv2d_int8", 2, tuple(x.shape), tuple(w.shape), strides, padding, None, 1)
    if tuple(bias.shape) != (w.shape[0],):
        raise OpError(f"conv2d_int8: bias has shape {tuple(bias.shape)}; expected ({w.shape[0]},)")
    if not isinstance(shift, (int, np.integer)) or not 0 <= int(shift) < 31:
        raise OpError(f"conv2d_int8: shift must be an integer in [0, 31), got {shift!r}")
    return s, p, d


@op("conv2d_int8", OPAQUE, attr_defaults={"strides": None, "padding": None, "shift": 0})
class conv2d_int8:
    """clip((conv(x, w) >> shift) + bias, 0, 127) in int8, accumulated in int32."""

    @staticmethod
    def infer(x: TensorType, w: TensorType, bias: TensorType, strides=None, padding=None,
              shift: int = 0) -> TensorType:
        s, p, d = _checked(x, w, bias, strides, padding, shift)
        return TensorType(conv_out_shape("conv2d_int8", tuple(x.shape), tuple(w.shape), s, p, d), "int8")

    @staticmethod
    def compute(x: te.Tensor, w: te.Tensor, bias: te.Tensor, strides=None, padding=None,
                shift: int = 0) -> te.Tensor:
        xshape, wshape = const_shape(x), const_shape(w)
        s, p, d, _ = conv_attrs("conv2d_int8", 2, xshape, wshape, strides, padding, None, 1)
        out_shape = conv_out_shape("conv2d_int8", xshape, wshape, s, p, d)
        padded = pad_stage(x, p[:2], padded_extent(xshape[2:], out_shape[2:], wshape[2:], s, d), 0)
        rc = te.reduce_axis((0, wshape[1]), name="rc")
        ry = te.reduce_axis((0, wshape[2]), name="ry")
        rx = te.reduce_axis((0, wshape[3]), name="rx")
        acc = te.compute(out_shape, lambda n, o, i, j: te.sum(
            padded[n, rc, i * s[0] + ry, j * s[1] + rx].astype("int32") * w[o, rc, ry, rx].astype("int32"),
            axis=[rc, ry, rx]), name="conv2d_int8_acc", tag="conv2d_int8")
        div = te.const(1 << int(shift), "int32")        # >> shift is floor division by 2**shift
        lo, hi = te.const(0, "int32"), te.const(127, "int32")
        return te.compute(out_shape, lambda n, o, i, j: te.min(te.max(acc[n, o, i, j] // div + bias[o], lo), hi)
                          .astype("int8"), name="conv2d_int8")

    @staticmethod
    def reference(x: np.ndarray, w: np.ndarray, bias: np.ndarray, strides=None, padding=None,
                  shift: int = 0) -> np.ndarray:
        s, p, d, _ = conv_attrs("conv2d_int8", 2, x.shape, w.shape, strides, padding, None, 1)
        acc = conv_reference(x.astype(np.int64), w.astype(np.int64), s, p, d, 1).astype(np.int32)
        return np.clip((acc >> int(shift)) + bias.astype(np.int32)[None, :, None, None], 0, 127).astype(np.int8)
