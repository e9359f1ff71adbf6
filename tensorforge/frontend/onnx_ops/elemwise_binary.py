"""ONNX binary and N-input elementwise ops -> tensorforge broadcasting ops (frontend -> Graph).

Arithmetic, comparisons, boolean logic, bitwise ops, Max/Min/Sum/Mean and Where map one to
one.  Opsets 1-6 express broadcasting with `broadcast`/`axis` attributes; `legacy_broadcast`
rewrites those into NumPy broadcasting.  BitShift picks left_shift or right_shift from its `direction`.
"""
from __future__ import annotations

from ..onnx import converter
from .elemwise_util import legacy_broadcast

BINARY = {
    "Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow",
    "Equal": "equal", "Less": "less", "LessOrEqual": "less_or_equal", "Greater": "greater",
    "GreaterOrEqual": "greater_or_equal", "And": "logical_and", "Or": "logical_or",
    "Xor": "logical_xor", "BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or",
    "BitwiseXor": "bitwise_xor",
}


@converter(*BINARY)
def convert_binary(ctx, inputs, attrs):
    a, b = legacy_broadcast(ctx, inputs[0], inputs[1], attrs)
    return ctx.add1(BINARY[ctx.op_type], [a, b])


@converter("Mod", since=10)
def convert_mod(ctx, inputs, attrs):
    fmod = int(attrs.get("fmod", 0))
    if fmod not in (0, 1):
        raise ValueError(f"Mod: fmod must be 0 or 1, got {fmod}")
    return ctx.add1("mod", [inputs[0], inputs[1]], {"fmod": fmod})


@converter("BitShift", since=11)
def convert_bitshift(ctx, inputs, attrs):
    direction = attrs.get("direction", "")
    if direction not in ("LEFT", "RIGHT"):
        raise ValueError(f"BitShift: direction must be 'LEFT' or 'RIGHT', got {direction!r}")
    op = "left_shift" if direction == "LEFT" else "right_shift"
    return ctx.add1(op, [inputs[0], inputs[1]])


VARIADIC = {"Max": "maximum", "Min": "minimum", "Sum": "sum", "Mean": "mean"}


@converter(*VARIADIC)
def convert_variadic(ctx, inputs, attrs):
    return ctx.add1(VARIADIC[ctx.op_type], [v for v in inputs if v is not None])


@converter("Where", since=9)
def convert_where(ctx, inputs, attrs):
    return ctx.add1("where", inputs[:3])
