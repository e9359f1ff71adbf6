"""ONNX unary math ops and activations -> tensorforge elementwise ops (frontend -> Graph).

These map one to one.  The graph ops take ONNX's attribute names and defaults, so a converter
passes the attributes the node sets; legacy ones of opsets 1-5 (`consumed_inputs`) are dropped.
PRelu's slope broadcasts to X; a constant 1-D slope that only matches one of X's dimensions
(the channel slope of models exported before opset 7) is reshaped to align with that dimension.
"""
from __future__ import annotations

from ..onnx import converter
from .elemwise_util import pick, widen_narrow

UNARY = {
    "Abs": "abs", "Neg": "neg", "Sign": "sign", "Exp": "exp", "Log": "log", "Sqrt": "sqrt",
    "Reciprocal": "reciprocal", "Floor": "floor", "Ceil": "ceil", "Round": "round",
    "Sin": "sin", "Cos": "cos", "Tan": "tan", "Asin": "asin", "Acos": "acos", "Atan": "atan",
    "Sinh": "sinh", "Cosh": "cosh", "Asinh": "asinh", "Acosh": "acosh", "Atanh": "atanh",
    "Erf": "erf", "Not": "logical_not", "BitwiseNot": "bitwise_not",
}


@converter(*UNARY)
def convert_unary(ctx, inputs, attrs):
    return ctx.add1(UNARY[ctx.op_type], [inputs[0]])


@converter("IsNaN")
def convert_isnan(ctx, inputs, attrs):
    return ctx.add1("isnan", [widen_narrow(ctx, inputs[0])])


@converter("IsInf", since=10)
def convert_isinf(ctx, inputs, attrs):
    return ctx.add1("isinf", [widen_narrow(ctx, inputs[0])], pick(attrs, ("detect_positive", "detect_negative")))


# -- activations ---------------------------------------------------------------------------------

PLAIN = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Softplus": "softplus",
         "Softsign": "softsign", "HardSwish": "hard_swish", "Mish": "mish"}

WITH_ATTRS = {
    "LeakyRelu": ("leaky_relu", ("alpha",)),
    "Elu": ("elu", ("alpha",)),
    "Selu": ("selu", ("alpha", "gamma")),
    "Celu": ("celu", ("alpha",)),
    "HardSigmoid": ("hard_sigmoid", ("alpha", "beta")),
    "ThresholdedRelu": ("thresholded_relu", ("alpha",)),
    "Shrink": ("shrink", ("bias", "lambd")),
    "Gelu": ("gelu", ("approximate",)),
    "Swish": ("swish", ("alpha",)),
}


@converter(*PLAIN)
def convert_plain(ctx, inputs, attrs):
    return ctx.add1(PLAIN[ctx.op_type], [inputs[0]])


@converter(*WITH_ATTRS)
def convert_with_attrs(ctx, inputs, attrs):
    op, names = WITH_ATTRS[ctx.op_type]
    return ctx.add1(op, [inputs[0]], pick(attrs, names))


def _unidirectional(x_shape: tuple, s_shape: tuple) -> bool:
    if len(s_shape) > len(x_shape):
        return False
    tail = x_shape[len(x_shape) - len(s_shape):]
    return all(s in (1, d) for s, d in zip(s_shape, tail))


@converter("PRelu")
def convert_prelu(ctx, inputs, attrs):
    x, slope = inputs[0], inputs[1]
    if not _unidirectional(x.shape, slope.shape) and len(slope.shape) == 1 and ctx.is_const(slope):
        matches = [k for k, d in enumerate(x.shape) if d == slope.shape[0]]
        if len(matches) == 1:   # align the slope with the one dimension of its length
            value = ctx.value_of(slope, "slope")
            slope = ctx.const(value.reshape((-1,) + (1,) * (len(x.shape) - matches[0] - 1)))
    return ctx.add1("prelu", [x, slope])
