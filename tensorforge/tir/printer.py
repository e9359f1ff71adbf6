"""Readable text for expressions, statements and PrimFuncs (what `print(tensorforge.lower(...))`
shows).  Python-like: loops as `for i in range(n):`, buffers indexed with brackets."""
from __future__ import annotations

from ..te import expr as E
from . import nodes as N

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
    if isinstance(e, N.BufferLoad):
        return f"{e.buffer.name}[{', '.join(_expr(i, 0) for i in e.indices)}]"
    if isinstance(e, E.Reduce):
        axes = ", ".join(f"{a.var.name}:[{_expr(a.dom.min, 0)}, {_expr(a.dom.extent, 0)})" for a in e.axis)
        src = ", ".join(_expr(s, 0) for s in e.source)
        cond = "" if E.is_const_int(e.condition, 1) else f", where={_expr(e.condition, 0)}"
        idx = f"[{e.value_index}]" if len(e.source) > 1 else ""
        return f"{e.combiner.name}({src}, axis=[{axes}]{cond}){idx}"
    return f"<{type(e).__name__}>"


def stmt_str(s, indent: int = 0) -> str:
    lines: list[str] = []
    _stmt(s, indent, lines)
    return "\n".join(lines)


def _stmt(s, ind: int, out: list[str]) -> None:
    pad = "  " * ind
    if isinstance(s, N.SeqStmt):
        for x in s.seq:
            _stmt(x, ind, out)
    elif isinstance(s, N.For):
        kind = "" if s.kind == N.SERIAL else f"  # {s.kind}" + (f" {s.thread_tag}" if s.thread_tag else "")
        ann = "".join(f" {k}={v}" for k, v in s.annotations)
        start = "" if E.is_const_int(s.min, 0) else f"{expr_str(s.min)}, "
        end = expr_str(s.extent) if not start else expr_str(s.min + s.extent)
        out.append(f"{pad}for {s.loop_var.name} in range({start}{end}):{kind}{ann}")
        _stmt(s.body, ind + 1, out)
    elif isinstance(s, N.BufferStore):
        idx = ", ".join(expr_str(i) for i in s.indices)
        out.append(f"{pad}{s.buffer.name}[{idx}] = {expr_str(s.value)}")
    elif isinstance(s, N.Allocate):
        b = s.buffer
        out.append(f"{pad}{b.name} = allocate([{', '.join(expr_str(x) for x in b.shape)}], "
                   f"{b.dtype}, {b.scope!r})")
        _stmt(s.body, ind, out)
    elif isinstance(s, N.IfThenElse):
        out.append(f"{pad}if {expr_str(s.condition)}:")
        _stmt(s.then_case, ind + 1, out)
        if s.else_case is not None:
            out.append(f"{pad}else:")
            _stmt(s.else_case, ind + 1, out)
    elif isinstance(s, N.LetStmt):
        out.append(f"{pad}{s.var.name} = {expr_str(s.value)}")
        _stmt(s.body, ind, out)
    elif isinstance(s, N.Evaluate):
        out.append(f"{pad}{expr_str(s.value)}")
    elif isinstance(s, N.AttrStmt):
        out.append(f"{pad}# attr {s.key} = {s.value}")
        _stmt(s.body, ind, out)
    else:
        out.append(f"{pad}<{type(s).__name__}>")


def func_str(f) -> str:
    params = ", ".join(f"{b.name}: {b.dtype}[{', '.join(expr_str(x) for x in b.shape)}]" for b in f.params)
    head = f"def {f.name}({params}):"
    return head + "\n" + stmt_str(f.body, 1)
