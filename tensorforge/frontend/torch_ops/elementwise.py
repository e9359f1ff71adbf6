"""ATen elementwise ops -> tensorforge's elementwise ops: arithmetic, comparisons, where, unary
math and activations (relu ... leaky_relu, elu, gelu, rrelu in eval mode), the inverse
hyperbolic functions, log2 / log10, isnan / isinf, rounding, atan2, hypot, clamp, the bitwise
and / or / xor, and fill and copy (a tensor of self's shape and dtype).

Operands are cast to the dtype PyTorch computed for the node (type promotion: int / float is a
float, a float tensor plus a Python int stays float); Python scalars become 0-d constants.
"""
from __future__ import annotations

import numpy as np

from ..torch_convert import aten
from .common import as_value, broadcast_to, cast

_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "maximum": "maximum", "minimum": "minimum",
           "logical_and": "logical_and", "logical_or": "logical_or", "logical_xor": "logical_xor"}
_COMPARE = {"eq": "equal", "lt": "less", "le": "less_or_equal", "gt": "greater", "ge": "greater_or_equal"}
_UNARY = {"relu": "relu", "tanh": "tanh", "sigmoid": "sigmoid", "exp": "exp", "log": "log", "sqrt": "sqrt",
          "neg": "neg", "abs": "abs", "erf": "erf", "sin": "sin", "cos": "cos", "tan": "tan",
          "reciprocal": "reciprocal", "floor": "floor", "ceil": "ceil", "sign": "sign",
          "logical_not": "logical_not", "silu": "swish", "hardswish": "hard_swish", "mish": "mish",
          "asin": "asin", "acos": "acos", "atan": "atan", "sinh": "sinh", "cosh": "cosh",
          "asinh": "asinh", "acosh": "acosh", "atanh": "atanh"}
_BITWISE = {"bitwise_and": ("bitwise_and", "logical_and"), "bitwise_or": ("bitwise_or", "logical_or"),
            "bitwise_xor": ("bitwise_xor", "logical_xor")}


def _operands(ctx, a, b, dtype: str):
    """Both operands as Values of `dtype` (a scalar operand takes it directly)."""
    like = a if hasattr(a, "dtype") else b
    a, b = as_value(ctx, a, like, dtype), as_value(ctx, b, like, dtype)
    return cast(ctx, a, dtype), cast(ctx, b, dtype)


@aten(*_BINARY)
def binary(ctx, a: dict):
    name = ctx.op.split(".")[1]
    dtype = ctx.out_dtypes[0]
    x, y = _operands(ctx, a["self"], a["other"], dtype)
    alpha = a.get("alpha", 1)
    if name in ("add", "sub") and alpha not in (None, 1):
        y = ctx.add1("mul", [y, as_value(ctx, alpha, dtype=dtype)])
    return ctx.add1(_BINARY[name], [x, y])


@aten("rsub")
def rsub(ctx, a: dict):
    dtype = ctx.out_dtypes[0]
    x, y = _operands(ctx, a["self"], a["other"], dtype)
    if a.get("alpha", 1) not in (None, 1):
        x = ctx.add1("mul", [x, as_value(ctx, a["alpha"], dtype=dtype)])
    return ctx.add1("sub", [y, x])


@aten("div")
def div(ctx, a: dict):
    dtype = ctx.out_dtypes[0]
    mode = a.get("rounding_mode")
    if mode is not None and not dtype.startswith("float"):
        raise ctx.unsupported(f"integer division with rounding_mode={mode!r} is not supported")
    x, y = _operands(ctx, a["self"], a["other"], dtype)
    q = ctx.add1("div", [x, y])
    if mode == "floor":
        return ctx.add1("floor", [q])
    if mode == "trunc":
        return ctx.add1("mul", [ctx.add1("sign", [q]), ctx.add1("floor", [ctx.add1("abs", [q])])])
    return q


@aten("remainder", "fmod")
def remainder(ctx, a: dict):
    dtype = ctx.out_dtypes[0]
    x, y = _operands(ctx, a["self"], a["other"], dtype)
    return ctx.add1("mod", [x, y], {"fmod": int(ctx.op.split(".")[1] == "fmod")})


@aten("pow")
def pow_(ctx, a: dict):
    dtype = ctx.out_dtypes[0]
    base, exponent = a["self"], a["exponent"]
    if isinstance(exponent, (int, float)) and hasattr(base, "dtype"):
        base = cast(ctx, base, dtype)
        if exponent == 1:
            return base
        if exponent == 2:
            return ctx.add1("mul", [base, base])
        if exponent == 0.5:
            return ctx.add1("sqrt", [base])
    x, y = _operands(ctx, base, exponent, dtype)
    return ctx.add1("pow", [x, y])


@aten(*_COMPARE, "ne")
def compare(ctx, a: dict):
    name = ctx.op.split(".")[1]
    x, y = a["self"], a["other"]
    like = x if hasattr(x, "dtype") else y
    dtype = like.dtype
    if hasattr(x, "dtype") and hasattr(y, "dtype") and x.dtype != y.dtype:
        import numpy as np
        dtype = np.result_type(x.dtype, y.dtype).name
    x, y = _operands(ctx, x, y, dtype)
    if name == "ne":
        return ctx.add1("logical_not", [ctx.add1("equal", [x, y])])
    return ctx.add1(_COMPARE[name], [x, y])


@aten("where")
def where(ctx, a: dict):
    dtype = ctx.out_dtypes[0]
    x, y = _operands(ctx, a["self"], a["other"], dtype)
    return ctx.add1("where", [a["condition"], x, y])


@aten(*_UNARY)
def unary(ctx, a: dict):
    name = ctx.op.split(".")[1]
    x = cast(ctx, a["self"], ctx.out_dtypes[0]) if name != "logical_not" else a["self"]
    if name == "logical_not" and x.dtype != "bool":
        x = ctx.add1("cast", [x], {"dtype": "bool"})
    return ctx.add1(_UNARY[name], [x])


@aten("isnan", "isinf")
def isnan_isinf(ctx, a: dict):
    """isnan / isinf: the graph op on floats; an integer or bool tensor is neither (all False)."""
    x = a["self"]
    if not x.dtype.startswith("float"):
        return ctx.const(np.zeros(ctx.out_shape, dtype=bool))
    return ctx.add1(ctx.op.split(".")[1], [x])


@aten("log1p", "expm1")
def log1p_expm1(ctx, a: dict):
    """log(1 + x) and exp(x) - 1 (softplus and mish decompose to log1p): the graph has no fused
    form, and in float32 the sum loses only what the absolute tolerance of a model allows."""
    x = cast(ctx, a["self"], ctx.out_dtypes[0])
    one = ctx.const(np.asarray(1, x.dtype))
    if ctx.op.split(".")[1] == "log1p":
        return ctx.add1("log", [ctx.add1("add", [x, one])])
    return ctx.add1("sub", [ctx.add1("exp", [x]), one])


@aten("bitwise_not")
def bitwise_not(ctx, a: dict):
    x = a["self"]
    return ctx.add1("logical_not" if x.dtype == "bool" else "bitwise_not", [x])


@aten("rsqrt")
def rsqrt(ctx, a: dict):
    return ctx.add1("reciprocal", [ctx.add1("sqrt", [cast(ctx, a["self"], ctx.out_dtypes[0])])])


@aten("gelu")
def gelu(ctx, a: dict):
    return ctx.add1("gelu", [a["self"]], {"approximate": a.get("approximate") or "none"})


@aten("leaky_relu")
def leaky_relu(ctx, a: dict):
    return ctx.add1("leaky_relu", [a["self"]], {"alpha": float(a.get("negative_slope", 0.01))})


@aten("rrelu_with_noise_functional")
def rrelu(ctx, a: dict):
    """nn.RReLU / F.rrelu in eval mode -> (leaky relu with slope (lower + upper) / 2, the noise
    tensor unchanged).  Training mode draws a random slope per element: not supported."""
    if a.get("training"):
        raise ctx.unsupported("rrelu in training mode (a random slope per element) is not supported; "
                              "call model.eval() first")
    slope = (float(a["lower"]) + float(a["upper"])) / 2
    return ctx.add1("leaky_relu", [a["self"]], {"alpha": slope}), a["noise"]


@aten("elu")
def elu(ctx, a: dict):
    """scale * (x if x > 0 else alpha * (exp(input_scale * x) - 1)): nn.ELU, and nn.SELU (which
    decomposes to elu with SELU's scale and alpha)."""
    x = a["self"]
    alpha, scale, input_scale = (float(a.get(k, 1.0)) for k in ("alpha", "scale", "input_scale"))
    if input_scale != 1.0:
        negative = ctx.add1("mul", [ctx.add1("sub", [ctx.add1("exp", [ctx.add1("mul", [x, as_value(ctx, input_scale, x)])]),
                                                     as_value(ctx, 1.0, x)]), as_value(ctx, alpha, x)])
        y = ctx.add1("where", [ctx.add1("greater", [x, as_value(ctx, 0.0, x)]), x, negative])
    else:
        y = ctx.add1("elu", [x], {"alpha": alpha})
    return y if scale == 1.0 else ctx.add1("mul", [y, as_value(ctx, scale, x)])


@aten("round", "trunc")
def round_trunc(ctx, a: dict):
    """round (half to even, as PyTorch) and trunc (toward zero); `decimals` scales first."""
    x = cast(ctx, a["self"], ctx.out_dtypes[0])
    if ctx.op.split(".")[1] == "trunc":
        return ctx.add1("mul", [ctx.add1("sign", [x]), ctx.add1("floor", [ctx.add1("abs", [x])])])
    decimals = int(a.get("decimals", 0) or 0)
    if decimals:
        factor = as_value(ctx, 10.0 ** decimals, x)
        return ctx.add1("div", [ctx.add1("round", [ctx.add1("mul", [x, factor])]), factor])
    return ctx.add1("round", [x])


@aten("atan2")
def atan2(ctx, a: dict):
    """atan2(y, x): atan(y / x) moved by pi into the left half-plane; 0 at the origin (as PyTorch)."""
    dtype = ctx.out_dtypes[0]
    y, x = _operands(ctx, a["self"], a["other"], dtype)
    zero, pi = as_value(ctx, 0.0, x), as_value(ctx, np.pi, x)
    base = ctx.add1("atan", [ctx.add1("div", [y, x])])
    shift = ctx.add1("where", [ctx.add1("less", [y, zero]), ctx.add1("neg", [pi]), pi])
    left = ctx.add1("add", [base, shift])
    out = ctx.add1("where", [ctx.add1("less", [x, zero]), left, base])
    origin = ctx.add1("logical_and", [ctx.add1("equal", [x, zero]), ctx.add1("equal", [y, zero])])
    return ctx.add1("where", [origin, zero, out])


@aten("hypot")
def hypot(ctx, a: dict):
    """hypot(a, b) = m * sqrt(1 + (n / m)^2) with m = max(|a|, |b|) and n = min(|a|, |b|), in the
    result's float dtype: the plain sqrt(a^2 + b^2) overflows where |a| or |b| passes the square
    root of the dtype's largest value (1.8e19 in float32). As C's hypot: 0 where both are 0, and
    infinity where either is infinite, even beside a NaN."""
    x, y = _operands(ctx, a["self"], a["other"], ctx.out_dtypes[0])
    ax, ay = ctx.add1("abs", [x]), ctx.add1("abs", [y])
    big, small = ctx.add1("maximum", [ax, ay]), ctx.add1("minimum", [ax, ay])
    ratio = ctx.add1("div", [small, big])
    one = ctx.const(np.asarray(1, x.dtype))
    scaled = ctx.add1("mul", [big, ctx.add1("sqrt", [ctx.add1("add", [one, ctx.add1("mul", [ratio, ratio])])])])
    zero, inf = ctx.const(np.asarray(0, x.dtype)), ctx.const(np.asarray(np.inf, x.dtype))
    out = ctx.add1("where", [ctx.add1("equal", [big, zero]), zero, scaled])
    either_inf = ctx.add1("logical_or", [ctx.add1("isinf", [x]), ctx.add1("isinf", [y])])
    return ctx.add1("where", [either_inf, inf, out])


@aten("hardsigmoid")
def hardsigmoid(ctx, a: dict):
    return ctx.add1("hard_sigmoid", [a["self"]], {"alpha": 1.0 / 6.0, "beta": 0.5})


@aten("softplus")
def softplus(ctx, a: dict):
    x, beta = a["self"], float(a.get("beta", 1.0))
    if beta == 1.0:
        return ctx.add1("softplus", [x])
    scaled = ctx.add1("mul", [x, as_value(ctx, beta, x)])
    return ctx.add1("div", [ctx.add1("softplus", [scaled]), as_value(ctx, beta, x)])


@aten("hardtanh", "clamp", "clip")
def clamp(ctx, a: dict):
    x = a["self"]
    lo = a.get("min_val", a.get("min"))
    hi = a.get("max_val", a.get("max"))
    if hasattr(lo, "dtype") or hasattr(hi, "dtype"):       # tensor bounds (F.cosine_similarity's eps)
        dtype = ctx.out_dtypes[0]
        x = cast(ctx, x, dtype)
        if lo is not None:
            x = ctx.add1("maximum", [x, cast(ctx, as_value(ctx, lo, x, dtype), dtype)])
        if hi is not None:
            x = ctx.add1("minimum", [x, cast(ctx, as_value(ctx, hi, x, dtype), dtype)])
        return x
    return ctx.add1("clip", [x], {"min": None if lo is None else float(lo), "max": None if hi is None else float(hi)})


@aten("log2", "log10")
def log2_log10(ctx, a: dict):
    """log(x) / log(base), in the result's float dtype."""
    x = cast(ctx, a["self"], ctx.out_dtypes[0])
    base = 2.0 if ctx.op.split(".")[1] == "log2" else 10.0
    return ctx.add1("div", [ctx.add1("log", [x]), as_value(ctx, np.log(base), x)])


@aten(*_BITWISE)
def bitwise(ctx, a: dict):
    """and / or / xor of integers bit by bit; of bools (PyTorch's `mask & other`) the logical op."""
    dtype = ctx.out_dtypes[0]
    x, y = _operands(ctx, a["self"], a["other"], dtype)
    integer_op, bool_op = _BITWISE[ctx.op.split(".")[1]]
    return ctx.add1(bool_op if dtype == "bool" else integer_op, [x, y])


@aten("fill")
def fill(ctx, a: dict):
    """A tensor of self's shape and dtype holding `value` (a number, or a 0-d tensor)."""
    value, dtype = a["value"], ctx.out_dtypes[0]
    if not hasattr(value, "dtype"):
        return ctx.const(np.full(ctx.out_shape, value, dtype=dtype))
    return _broadcast(ctx, value, dtype)


@aten("copy")
def copy(ctx, a: dict):
    """src broadcast to self's shape and cast to self's dtype (self's values are not read)."""
    return _broadcast(ctx, a["src"], ctx.out_dtypes[0])


def _broadcast(ctx, v, dtype: str):
    """v cast to `dtype` and broadcast to the node's output shape."""
    v = cast(ctx, v, dtype)
    if ctx.is_const(v):
        return ctx.const(np.broadcast_to(ctx.value_of(v), ctx.out_shape).copy())
    return broadcast_to(ctx, v, ctx.out_shape)
