"""Functions usable inside `te.compute`: conditions, selection and math intrinsics."""
from __future__ import annotations

from typing import Any

from ..ir.expr import Expr, Max, Min, Select, _operands, call_intrin, convert, logical_and, logical_or


def all(*conds: Any) -> Expr:  # noqa: A001
    """The conjunction of the conditions (True for none)."""
    if not conds:
        return convert(True)
    out = convert(conds[0])
    out = logical_and(out, True) if out.dtype != "bool" else out
    for c in conds[1:]:
        out = logical_and(out, c)
    return out


def any(*conds: Any) -> Expr:  # noqa: A001
    """The disjunction of the conditions (False for none)."""
    if not conds:
        return convert(False)
    out = convert(conds[0])
    for c in conds[1:]:
        out = logical_or(out, c)
    return out


def if_then_else(cond: Any, then_value: Any, else_value: Any) -> Expr:
    """`then_value` where `cond` holds, else `else_value`; only the chosen side is evaluated, so a
    guarded out-of-bounds load is safe."""
    c = convert(cond)
    if c.dtype != "bool":
        c = c != 0
    t, e = _operands(then_value, else_value)
    return Select(c, t, e)


def max(a: Any, b: Any) -> Expr:  # noqa: A001
    return Max(*_operands(a, b))


def min(a: Any, b: Any) -> Expr:  # noqa: A001
    return Min(*_operands(a, b))


def _unary(op: str):
    def fn(x: Any) -> Expr:
        return call_intrin(op, x)
    fn.__name__ = op
    fn.__doc__ = f"Elementwise {op}."
    return fn


def _binary(op: str):
    def fn(x: Any, y: Any) -> Expr:
        return call_intrin(op, x, y)
    fn.__name__ = op
    fn.__doc__ = f"Elementwise {op}."
    return fn


exp, exp2, log, log2, log1p, expm1 = (_unary(n) for n in ("exp", "exp2", "log", "log2", "log1p", "expm1"))
sqrt, rsqrt, tanh, sigmoid, erf = (_unary(n) for n in ("sqrt", "rsqrt", "tanh", "sigmoid", "erf"))
abs, floor, ceil, round, trunc = (_unary(n) for n in ("abs", "floor", "ceil", "round", "trunc"))  # noqa: A001
sin, cos, tan, asin, acos, atan = (_unary(n) for n in ("sin", "cos", "tan", "asin", "acos", "atan"))
sinh, cosh, asinh, acosh, atanh = (_unary(n) for n in ("sinh", "cosh", "asinh", "acosh", "atanh"))
isnan, isinf = _unary("isnan"), _unary("isinf")
pow, atan2, fmod = _binary("pow"), _binary("atan2"), _binary("fmod")  # noqa: A001
power = pow
