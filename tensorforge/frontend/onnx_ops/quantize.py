"""ONNX quantization ops -> quantize_linear / dequantize_linear / requantize and the integer
products matmul_integer / conv_integer (frontend -> Graph).

* QuantizeLinear / DequantizeLinear (opsets 10-): per tensor, per axis (13+) and blocked (21+);
  the result type is the zero point's, else output_dtype (21+), else uint8 (Quantize) / the
  scale's type (Dequantize).  With a narrow result or input type (int4, uint4, int2, uint2,
  float8, float4) or a float8e8m0 scale they become quantize_narrow / dequantize_narrow, host
  kernels with ONNX's rounding and saturation (`saturate`, 19+, for float8).
  A dequantized 8-bit constant (a quantized weight) is kept as a node rather than folded, so
  that graph/passes/fold_qdq can turn the product it feeds into an integer one.
* DynamicQuantizeLinear (11+) is its ONNX function body: the range [min(x, 0), max(x, 0)] maps
  onto [0, 255]; scale = (max - min) / 255, zero point = saturate(round(-min / scale)).
* MatMulInteger / ConvInteger (10+) map one to one.
* QLinearMatMul / QLinearConv (10+) become the integer product, for QLinearConv plus the int32
  bias, then `requantize` by multiplier = a_scale * b_scale / y_scale, which the converter
  computes once in float32 when the scales are constants (ONNX Runtime's arithmetic), else as
  graph nodes.
"""
from __future__ import annotations

import numpy as np

from ...ir import dtype as dt
from ...ops.nn_window import resolve_auto_pad
from ..onnx import converter
from .elemwise_util import input_at, onnx_dtype
from .nn_common import int_tuple, unsupported


def _axis_attrs(ctx, attrs: dict) -> dict:
    block = int(attrs.get("block_size", 0))
    return {"axis": int(attrs.get("axis", 1)), "block_size": block}


@converter("QuantizeLinear", since=10)
def convert_quantize(ctx, inputs: list, attrs: dict):
    x, scale, zp = inputs[0], inputs[1], input_at(inputs, 2)
    if zp is not None:
        dtype = zp.dtype
    elif int(attrs.get("output_dtype", 0)):
        dtype = onnx_dtype(ctx, int(attrs["output_dtype"]))
    else:
        dtype = "uint8"
    if int(attrs.get("precision", 0)):
        prec = onnx_dtype(ctx, int(attrs["precision"]))
        if prec != "float32":
            raise unsupported(ctx, f"precision={prec} (only float32 arithmetic is supported)")
    if dt.is_narrow(dtype) or dt.is_narrow(scale.dtype):
        return ctx.add1("quantize_narrow", [x, scale, zp], {**_axis_attrs(ctx, attrs), "dtype": dtype,
                                                           "saturate": int(attrs.get("saturate", 1))})
    return ctx.add1("quantize_linear", [x, scale, zp], {**_axis_attrs(ctx, attrs), "dtype": dtype})


@converter("DequantizeLinear", since=10)
def convert_dequantize(ctx, inputs: list, attrs: dict):
    x, scale, zp = inputs[0], inputs[1], input_at(inputs, 2)
    out = onnx_dtype(ctx, int(attrs["output_dtype"])) if int(attrs.get("output_dtype", 0)) else ""
    if dt.is_narrow(x.dtype) or dt.is_narrow(scale.dtype):
        return ctx.add1("dequantize_narrow", [x, scale, zp], {**_axis_attrs(ctx, attrs), "dtype": out})
    # an 8-bit constant (a quantized weight) stays a node, for graph/passes/fold_qdq
    keep = ctx.is_const(x) and x.dtype in ("int8", "uint8")
    return ctx.add1("dequantize_linear", [x, scale, zp], {**_axis_attrs(ctx, attrs), "dtype": out}, fold=not keep)


@converter("DynamicQuantizeLinear", since=11)
def convert_dynamic_quantize(ctx, inputs: list, attrs: dict):
    x = inputs[0]
    zero = ctx.const(np.zeros((), np.float32))
    lo = ctx.add1("minimum", [ctx.add1("reduce_min", [x], {"axes": None, "keepdims": 0}), zero])
    hi = ctx.add1("maximum", [ctx.add1("reduce_max", [x], {"axes": None, "keepdims": 0}), zero])
    scale = ctx.add1("div", [ctx.add1("sub", [hi, lo]), ctx.const(np.asarray(255.0, np.float32))])
    zp = ctx.add1("quantize_linear", [ctx.add1("neg", [lo]), scale, None], {"dtype": "uint8"})
    y = ctx.add1("quantize_linear", [x, scale, zp], {"dtype": "uint8"})
    return [y, scale, zp]


@converter("MatMulInteger", since=10)
def convert_matmul_integer(ctx, inputs: list, attrs: dict):
    return ctx.add1("matmul_integer", [inputs[0], inputs[1], input_at(inputs, 2), input_at(inputs, 3)])


def _conv_attrs(ctx, attrs: dict, x, w) -> dict:
    rank = len(x.shape) - 2
    kernel = int_tuple(attrs, "kernel_shape", w.shape[2:], rank)
    if tuple(kernel) != tuple(w.shape[2:]):
        raise ValueError(f"kernel_shape {kernel} disagrees with the weight's spatial shape {w.shape[2:]}")
    strides = int_tuple(attrs, "strides", (1,) * rank, rank)
    dilations = int_tuple(attrs, "dilations", (1,) * rank, rank)
    pads = resolve_auto_pad(attrs.get("auto_pad", "NOTSET"), x.shape[2:], kernel, strides, dilations,
                            int_tuple(attrs, "pads", None), op=ctx.op_type)
    return {"strides": strides, "padding": pads, "dilations": dilations, "groups": int(attrs.get("group", 1))}


@converter("ConvInteger", since=10)
def convert_conv_integer(ctx, inputs: list, attrs: dict):
    x, w = inputs[0], inputs[1]
    return ctx.add1("conv_integer", [x, w, input_at(inputs, 2), input_at(inputs, 3)], _conv_attrs(ctx, attrs, x, w))


def _multiplier(ctx, a_scale, b_scale, y_scale):
    """a_scale * b_scale / y_scale as float32: one constant when all three are, else nodes."""
    if all(ctx.is_const(s) for s in (a_scale, b_scale, y_scale)):
        a, b, y = (np.asarray(ctx.value_of(s), np.float32) for s in (a_scale, b_scale, y_scale))
        return ctx.const((a * b / y).astype(np.float32))
    f32 = [s if s.dtype == "float32" else ctx.add1("cast", [s], {"dtype": "float32"})
           for s in (a_scale, b_scale, y_scale)]
    return ctx.add1("div", [ctx.add1("mul", [f32[0], f32[1]]), f32[2]])


def _requantize(ctx, acc, multiplier, y_zp, axis: int):
    n = int(np.prod(multiplier.shape))
    return ctx.add1("requantize", [acc, multiplier, y_zp],
                    {"axis": axis if n > 1 else 1, "dtype": y_zp.dtype})


@converter("QLinearMatMul", since=10)
def convert_qlinear_matmul(ctx, inputs: list, attrs: dict):
    a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp = inputs[:8]
    if int(np.prod(a_scale.shape)) > 1 or int(np.prod(y_scale.shape)) > 1:
        raise unsupported(ctx, "a_scale and y_scale must be scalars")
    acc = ctx.add1("matmul_integer", [a, b, a_zp, b_zp])
    return _requantize(ctx, acc, _multiplier(ctx, a_scale, b_scale, y_scale), y_zp, -1)


@converter("QLinearConv", since=10)
def convert_qlinear_conv(ctx, inputs: list, attrs: dict):
    x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp = inputs[:8]
    bias = input_at(inputs, 8)
    acc = ctx.add1("conv_integer", [x, w, x_zp, w_zp], _conv_attrs(ctx, attrs, x, w))
    if bias is not None:
        rank = len(x.shape) - 2
        shaped = ctx.const(ctx.value_of(bias, "B").reshape((-1,) + (1,) * rank)) if ctx.is_const(bias) \
            else ctx.add1("reshape", [bias], {"shape": (-1,) + (1,) * rank})
        acc = ctx.add1("add", [acc, shaped])
    return _requantize(ctx, acc, _multiplier(ctx, x_scale, w_scale, y_scale), y_zp, 1)
