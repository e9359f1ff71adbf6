"""Linear quantization (ops -> TE): quantize_linear, dequantize_linear and requantize.

    quantize_linear(x, scale, zp)[i]   = saturate(round(x[i] / scale[p(i)]) + zp[p(i)])
    dequantize_linear(q, scale, zp)[i] = (q[i] - zp[p(i)]) * scale[p(i)]
    requantize(acc, mult, zp)[i]       = saturate(round(acc[i] * mult[p(i)]) + zp[p(i)])

`round` is round half to even (C's nearbyint, NumPy's rint) and `saturate` clips to the range of
the integer result dtype (ONNX's QuantizeLinear).  `p(i)` picks the parameter element that
element i uses: the only one (per tensor: scale holds one element), the one of its channel (per
axis: scale is 1-D with x.shape[axis] elements), or the one of its block (blocked: scale has x's
rank, and along `axis` one element per `block_size` elements of x).  The zero point, when given,
has the scale's shape; absent, it is 0.

The arithmetic is float32 (float64 when x is float64): x is converted, divided by the scale,
rounded, shifted by the zero point, clipped and converted to the integer dtype, the order ONNX
Runtime uses.  `requantize` is the epilogue of an integer product: an int32 accumulator times a
precomputed multiplier (input scale * weight scale / output scale), the form ONNX Runtime's
QLinearConv / QLinearMatMul use, so the two agree to the last bit.
All three are injective: they fuse into the producer's or consumer's kernel.
"""
from __future__ import annotations

import numpy as np

from .. import te
from ..ir import dtype as dt
from ..ir.expr import Cast
from ..ir.functor import substitute
from ..te.tensor import ComputeOp
from .common import const_shape, normalize_axis
from .elemwise_base import FLOATS, check_attrs
from .registry import INJECTIVE, OpDef, OpError, TensorType, register

QUANT_TYPES = ("int8", "uint8", "int16", "uint16", "int32")


def param_mode(op: str, x: tuple, p: tuple, axis: int, block_size: int, what: str = "scale") -> str:
    """'tensor', 'axis' or 'block': how the parameter of shape `p` maps onto x of shape `x`;
    OpError naming the op when the shapes do not fit any."""
    size = int(np.prod(p)) if p else 1
    if block_size:
        if block_size < 0:
            raise OpError(f"{op}: block_size must not be negative, got {block_size}")
        ax = normalize_axis(axis, len(x), op)
        want = tuple(-(-x[d] // block_size) if d == ax else x[d] for d in range(len(x)))
        if tuple(p) != want:
            raise OpError(f"{op}: with block_size={block_size} along axis {axis}, {what} must have shape "
                          f"{want} for x {tuple(x)}, got {tuple(p)}")
        return "block"
    if size == 1 and len(p) <= 1:
        return "tensor"
    ax = normalize_axis(axis, len(x), op)
    if len(p) != 1 or p[0] != x[ax]:
        raise OpError(f"{op}: {what} of shape {tuple(p)} fits neither one value per tensor nor one per "
                      f"element of axis {axis} ({x[ax]} for x {tuple(x)})")
    return "axis"


def param_index(mode: str, idx: tuple, p_rank: int, axis: int, block_size: int) -> tuple:
    """The index into a parameter for element `idx` of x (TE expressions or ints)."""
    if mode == "tensor":
        return (0,) * p_rank
    ax = axis % len(idx)
    if mode == "axis":
        return (idx[ax],)
    return tuple(i // block_size if d == ax else i for d, i in enumerate(idx))


def np_param(p: np.ndarray, x_shape: tuple, mode: str, axis: int, block_size: int) -> np.ndarray:
    """The parameter broadcast to x's shape (NumPy twin of param_index)."""
    if mode == "tensor":
        return p.reshape(())
    ax = axis % len(x_shape)
    if mode == "axis":
        return p.reshape([-1 if d == ax else 1 for d in range(len(x_shape))])
    return np.repeat(p, block_size, axis=ax)[tuple(slice(0, n) for n in x_shape)]


def _float_of(dtype: str) -> str:
    return "float64" if dtype == "float64" else "float32"


def _check_params(op: str, x: TensorType, scale: TensorType, zp: TensorType | None, axis: int,
                  block_size: int) -> str:
    if x is None or scale is None:
        raise OpError(f"{op}: needs x and scale")
    if scale.dtype not in FLOATS:
        raise OpError(f"{op}: scale has dtype {scale.dtype}; expected one of {', '.join(FLOATS)}")
    mode = param_mode(op, tuple(x.shape), tuple(scale.shape), axis, block_size)
    if zp is not None:
        param_mode(op, tuple(x.shape), tuple(zp.shape), axis, block_size, "zero point")
    return mode


def _saturate_expr(v, dtype: str):
    """v clamped to the dtype's range and cast to it, through int32: the clamped value is an
    integer the int32 holds exactly, and a vector float -> int32 -> 8-bit conversion is two
    instructions where GCC 12 does float -> 8-bit one lane at a time."""
    info = np.iinfo(dtype)
    return te.min(te.max(v, float(info.min)), float(info.max)).astype("int32").astype(dtype)


def _saturate_np(v: np.ndarray, dtype: str) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.clip(v, info.min, info.max).astype(dtype)


def _scaled_round(op: str, divide: bool):
    """(infer, compute, reference) of saturate(round(x / scale or x * scale) + zp)."""
    def infer(x: TensorType, scale: TensorType, zero_point: TensorType | None = None, axis: int = 1,
              block_size: int = 0, dtype: str = "uint8") -> TensorType:
        _check_params(op, x, scale, zero_point, axis, block_size)
        if dtype not in QUANT_TYPES:
            raise OpError(f"{op}: dtype must be one of {', '.join(QUANT_TYPES)}, got {dtype!r}")
        if zero_point is not None and zero_point.dtype != dtype:
            raise OpError(f"{op}: zero point dtype {zero_point.dtype} differs from the result dtype {dtype}")
        if x.dtype not in FLOATS + ("int32",):
            raise OpError(f"{op}: x has dtype {x.dtype}; expected a float or int32")
        return TensorType(tuple(x.shape), dtype)

    def compute(x: te.Tensor, scale: te.Tensor, zero_point: te.Tensor | None = None, axis: int = 1,
                block_size: int = 0, dtype: str = "uint8") -> te.Tensor:
        shape = const_shape(x)
        mode = param_mode(op, shape, const_shape(scale), axis, block_size)
        zmode = param_mode(op, shape, const_shape(zero_point), axis, block_size) if zero_point is not None else ""
        fl = _float_of(x.dtype)

        def body(*i):
            p = param_index(mode, i, len(scale.shape), axis, block_size)
            s = scale[p].astype(fl)
            v = te.round(x[i].astype(fl) / s if divide else x[i].astype(fl) * s)
            if zero_point is not None:
                v = v + zero_point[param_index(zmode, i, len(zero_point.shape), axis, block_size)].astype(fl)
            return _saturate_expr(v, dtype)

        return te.compute(shape, body, name=op, tag=op)

    def reference(x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None = None, axis: int = 1,
                  block_size: int = 0, dtype: str = "uint8") -> np.ndarray:
        mode = param_mode(op, x.shape, scale.shape, axis, block_size)
        fl = _float_of(x.dtype.name)
        s = np_param(scale, x.shape, mode, axis, block_size).astype(fl)
        v = np.rint(x.astype(fl) / s if divide else x.astype(fl) * s)
        if zero_point is not None:
            zmode = param_mode(op, x.shape, zero_point.shape, axis, block_size)
            v = v + np_param(zero_point, x.shape, zmode, axis, block_size).astype(fl)
        return _saturate_np(v, dtype)

    return infer, compute, reference


def _register_scaled(op: str, divide: bool) -> None:
    infer, compute, reference = _scaled_round(op, divide)

    def checked_infer(*args, **attrs):
        check_attrs(op, attrs, ("axis", "block_size", "dtype"))
        return infer(*args, **attrs)

    register(OpDef(op, INJECTIVE, checked_infer, reference, compute,
                   attr_defaults={"axis": 1, "block_size": 0, "dtype": "uint8"}))


_register_scaled("quantize_linear", divide=True)
_register_scaled("requantize", divide=False)


def _before_cast(x: te.Tensor, index: tuple):
    """x[index] as the float it was rounded and saturated from, when a quantize_linear or a
    requantize makes x (an integer-valued float inside the 8-bit range, so the cast to 8 bits and
    back is exact); else None.  A dequantize fused after a quantize then reads the float: with
    the round trip (float -> uint8 -> float of a clamped value) GCC 12 leaves the fused loop
    scalar, with branches, which made a conv's residual epilogue cost four times its product."""
    op = x.op
    if not isinstance(op, ComputeOp) or op.tag not in ("quantize_linear", "requantize") or op.reduce_axis:
        return None
    body = op.body[x.value_index]
    if not isinstance(body, Cast) or body.dtype != x.dtype:
        return None
    inner = body.value
    if isinstance(inner, Cast) and inner.dtype == "int32":      # _saturate_expr's way through int32
        inner = inner.value
    if not dt.is_float(inner.dtype):
        return None
    return substitute(inner, {iv.var: i for iv, i in zip(op.axis, index)})


class _Dequantize:
    @staticmethod
    def infer(x: TensorType, scale: TensorType, zero_point: TensorType | None = None, axis: int = 1,
              block_size: int = 0, dtype: str = "") -> TensorType:
        _check_params("dequantize_linear", x, scale, zero_point, axis, block_size)
        if x.dtype not in QUANT_TYPES:
            raise OpError(f"dequantize_linear: x has dtype {x.dtype}; expected one of {', '.join(QUANT_TYPES)}")
        if zero_point is not None and zero_point.dtype != x.dtype:
            raise OpError(f"dequantize_linear: zero point dtype {zero_point.dtype} differs from x's {x.dtype}")
        out = dtype or scale.dtype
        if out not in FLOATS:
            raise OpError(f"dequantize_linear: dtype must be one of {', '.join(FLOATS)}, got {out!r}")
        return TensorType(tuple(x.shape), out)

    @staticmethod
    def compute(x: te.Tensor, scale: te.Tensor, zero_point: te.Tensor | None = None, axis: int = 1,
                block_size: int = 0, dtype: str = "") -> te.Tensor:
        shape = const_shape(x)
        mode = param_mode("dequantize_linear", shape, const_shape(scale), axis, block_size)
        zmode = param_mode("dequantize_linear", shape, const_shape(zero_point), axis, block_size) \
            if zero_point is not None else ""
        fl = _float_of(scale.dtype)
        out = dtype or scale.dtype

        def body(*i):
            p = param_index(mode, i, len(scale.shape), axis, block_size)
            before = _before_cast(x, i)
            v = before.astype(fl) if before is not None else x[i].astype(fl)
            if zero_point is not None:
                v = v - zero_point[param_index(zmode, i, len(zero_point.shape), axis, block_size)].astype(fl)
            return (v * scale[p].astype(fl)).astype(out)

        return te.compute(shape, body, name="dequantize_linear", tag="dequantize_linear")

    @staticmethod
    def reference(x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None = None, axis: int = 1,
                  block_size: int = 0, dtype: str = "") -> np.ndarray:
        mode = param_mode("dequantize_linear", x.shape, scale.shape, axis, block_size)
        fl = _float_of(scale.dtype.name)
        v = x.astype(fl)
        if zero_point is not None:
            zmode = param_mode("dequantize_linear", x.shape, zero_point.shape, axis, block_size)
            v = v - np_param(zero_point, x.shape, zmode, axis, block_size).astype(fl)
        return (v * np_param(scale, x.shape, mode, axis, block_size).astype(fl)).astype(dtype or scale.dtype)


def _dequantize_infer(*args, **attrs):
    check_attrs("dequantize_linear", attrs, ("axis", "block_size", "dtype"))
    return _Dequantize.infer(*args, **attrs)


register(OpDef("dequantize_linear", INJECTIVE, _dequantize_infer, _Dequantize.reference, _Dequantize.compute,
               attr_defaults={"axis": 1, "block_size": 0, "dtype": ""}))
