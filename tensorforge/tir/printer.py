"""Readable text for statements and PrimFuncs (what `print(tensorforge.lower(...))`
shows).  Python-like: loops as `for i in range(n):`, buffers indexed with brackets."""
from __future__ import annotations

from ..ir import expr as E
from ..ir.printer import expr_str
from . import nodes as N


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
    elif isinstance(s, N.Tensorized):
        out.append(f"{pad}# tensorized: {s.intrin}.{s.phase}")
        _stmt(s.impl, ind, out)
    elif isinstance(s, N.AttrStmt):
        out.append(f"{pad}# attr {s.key} = {s.value}")
        _stmt(s.body, ind, out)
    elif isinstance(s, N.Barrier):
        out.append(f"{pad}barrier({s.scope!r})")
    elif isinstance(s, N.Prefetch):
        out.append(f"{pad}prefetch({expr_str(s.load)})")
    else:
        out.append(f"{pad}<{type(s).__name__}>")


def func_str(f) -> str:
    params = ", ".join(f"{b.name}: {b.dtype}[{', '.join(expr_str(x) for x in b.shape)}]" for b in f.params)
    head = f"def {f.name}({params}):"
    return head + "\n" + stmt_str(f.body, 1)
