"""Readable text for expressions (Python-like, with the fewest parentheses the precedence
allows).  Expression kinds defined above this package (a buffer load in `tir`) register their
own form with `register_expr_printer`."""
from __future__ import annotations

from typing import Callable

from . import expr as E

# Printers of expression classes defined in higher packages: class -> fn(node, expr_str) -> text.
_EXTRA: dict[type, Callable] = {}


def register_expr_printer(cls: type, fn: Callable) -> None:
    """Print nodes of class `cls` as `fn(node, expr_str)`."""
    _EXTRA[cls] = fn


_PREC = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 4, "<=": 4, ">": 4, ">=": 4,
         "+": 5, "-": 5, "*": 6, "/": 6, "//": 6, "%": 6}


def expr_str(e) -> str:
    return _expr(e, 0)


def _expr(e, parent: int) -> str:
    if isinstance(e, E.Var):
        return e.name
    if isinstance(e, E.IntImm):
        if e.dtype == "bool":
            return "True" if e.value else "False"
        return str(e.value) if e.dtype in ("int32",) else f"{e.dtype}({e.value})"
    if isinstance(e, E.FloatImm):
        return repr(e.value) + ("f" if e.dtype == "float32" else "") if e.dtype in (
            "float32", "float64") else f"{e.dtype}({e.value})"
    if isinstance(e, E.StringImm):
        return repr(e.value)
    if isinstance(e, (E.Min, E.Max)):
        return f"{e.symbol}({_expr(e.a, 0)}, {_expr(e.b, 0)})"
    if isinstance(e, E.BinaryOp):
        p = _PREC[e.symbol]
        text = f"{_expr(e.a, p)} {e.symbol} {_expr(e.b, p + 1)}"
        return f"({text})" if p < parent else text
    if isinstance(e, E.Not):
        return f"!{_expr(e.a, 9)}"
    if isinstance(e, E.Cast):
        return f"{e.dtype}({_expr(e.value, 0)})"
    if isinstance(e, E.Select):
        return f"select({_expr(e.condition, 0)}, {_expr(e.true_value, 0)}, {_expr(e.false_value, 0)})"
    if isinstance(e, E.Call):
        return f"{e.op}({', '.join(_expr(a, 0) for a in e.args)})"
    if isinstance(e, E.Let):
        return f"(let {e.var.name} = {_expr(e.value, 0)} in {_expr(e.body, 0)})"
    if isinstance(e, E.Ramp):
        return f"ramp({_expr(e.base, 0)}, {_expr(e.stride, 0)}, {e.lanes})"
    if isinstance(e, E.Broadcast):
        return f"broadcast({_expr(e.value, 0)}, {e.lanes})"
    if isinstance(e, E.TensorLoad):
        return f"{e.tensor.name}[{', '.join(_expr(i, 0) for i in e.indices)}]"
    if isinstance(e, E.Reduce):
        axes = ", ".join(f"{a.var.name}:[{_expr(a.dom.min, 0)}, {_expr(a.dom.extent, 0)})" for a in e.axis)
        src = ", ".join(_expr(s, 0) for s in e.source)
        cond = "" if E.is_const_int(e.condition, 1) else f", where={_expr(e.condition, 0)}"
        idx = f"[{e.value_index}]" if len(e.source) > 1 else ""
        return f"{e.combiner.name}({src}, axis=[{axes}]{cond}){idx}"
    extra = _EXTRA.get(type(e))
    if extra is not None:
        return extra(e, expr_str)
    return f"<{type(e).__name__}>"
