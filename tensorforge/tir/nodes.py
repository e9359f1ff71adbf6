"""The loop program: buffers, statements and the PrimFunc that holds them.

`tir/build.py` produces these from a schedule; `tir/passes/` rewrite them; `codegen/` prints them;
`tir/interp.py` runs them on NumPy.  All nodes are immutable.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..ir import dtype as dt
from ..ir.expr import Expr, Node, Var, convert
from ..ir.printer import register_expr_printer

GLOBAL, LOCAL, SHARED = "global", "local", "shared"


@dataclass(frozen=True, eq=False)
class Buffer:
    """A named region of memory: `shape` in elements of `dtype`, in memory `scope`.

    `data` is the pointer variable the code generators print.  After storage flattening every
    buffer access has one index; `shape` keeps the logical shape for printing and checking.
    """

    name: str
    shape: tuple
    dtype: str
    scope: str = GLOBAL
    data: Var = field(default=None)  # type: ignore[assignment]
    align: int = 64

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(convert(s) for s in self.shape))
        if self.data is None:
            object.__setattr__(self, "data", Var(self.name, "handle"))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"Buffer({self.name}, {list(self.shape)}, {self.dtype}, {self.scope})"


@dataclass(frozen=True, eq=False, repr=False)
class BufferLoad(Expr):
    """`buffer[indices]`; a Ramp index loads a vector."""

    buffer: Buffer
    indices: tuple

    @property
    def dtype(self) -> str:  # type: ignore[override]
        n = max((dt.lanes(i.dtype) for i in self.indices), default=1)
        return dt.with_lanes(self.buffer.dtype, n)


register_expr_printer(
    BufferLoad, lambda e, sub: f"{e.buffer.name}[{', '.join(sub(i) for i in e.indices)}]")


@dataclass(frozen=True, eq=False, repr=False)
class AddressOf(Expr):
    """`&buffer[indices]`: a pointer to one element (tensor intrinsics pass operands this way)."""

    load: BufferLoad

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return "handle"


register_expr_printer(AddressOf, lambda e, sub: f"&{sub(e.load)}")


@dataclass(frozen=True, eq=False, repr=False)
class CallExtern(Expr):
    """A call of the C function `name` (a helper a tensor intrinsic defines)."""

    dtype: str
    name: str
    args: tuple


register_expr_printer(CallExtern, lambda e, sub: f"{e.name}({', '.join(sub(a) for a in e.args)})")


class Stmt(Node):
    __slots__ = ()

    def __repr__(self) -> str:
        from .printer import stmt_str
        return stmt_str(self)


@dataclass(frozen=True, eq=False, repr=False)
class BufferStore(Stmt):
    buffer: Buffer
    value: Expr
    indices: tuple


SERIAL, PARALLEL, VECTORIZED, UNROLLED, THREAD_BINDING = (
    "serial", "parallel", "vectorized", "unrolled", "thread_binding")


@dataclass(frozen=True, eq=False, repr=False)
class For(Stmt):
    """`for loop_var in [min, min + extent)`; `kind` is serial, parallel, vectorized, unrolled or
    thread_binding (then `thread_tag` names the axis, e.g. "threadIdx.x")."""

    loop_var: Var
    min: Expr
    extent: Expr
    kind: str
    body: Stmt
    thread_tag: str = ""
    annotations: tuple = ()  # (key, value) pairs, e.g. pragmas


@dataclass(frozen=True, eq=False, repr=False)
class Allocate(Stmt):
    """`buffer` exists (is allocated) for the duration of `body`."""

    buffer: Buffer
    body: Stmt


@dataclass(frozen=True, eq=False, repr=False)
class IfThenElse(Stmt):
    condition: Expr
    then_case: Stmt
    else_case: Stmt | None = None


@dataclass(frozen=True, eq=False, repr=False)
class SeqStmt(Stmt):
    seq: tuple


@dataclass(frozen=True, eq=False, repr=False)
class LetStmt(Stmt):
    var: Var
    value: Expr
    body: Stmt


@dataclass(frozen=True, eq=False, repr=False)
class Evaluate(Stmt):
    value: Expr


@dataclass(frozen=True, eq=False, repr=False)
class Prefetch(Stmt):
    """A hint: bring the cache line holding `load`'s element closer to the core (for reading).
    It reads nothing and writes nothing, so it never changes a result; the C printer spells it
    `__builtin_prefetch`, the interpreter and the GPU dialects skip it.  `Stage.prefetch` makes
    these."""

    load: BufferLoad


@dataclass(frozen=True, eq=False, repr=False)
class AttrStmt(Stmt):
    """An annotation on `body`, e.g. key="pragma_<name>" with a value."""

    key: str
    value: Any
    body: Stmt


@dataclass(frozen=True, eq=False, repr=False)
class Barrier(Stmt):
    """Every thread of a GPU block waits here until all have arrived, and writes to memory
    `scope` ("shared") before it are visible to all of them after it."""

    scope: str = SHARED


@dataclass(frozen=True, eq=False, repr=False)
class Tensorized(Stmt):
    """A loop nest replaced by the tensor intrinsic `intrin` (its `phase`: body, reset or
    update).  Code generators print `impl`, the intrinsic's code with its buffers bound to the
    matched regions; the reference interpreter runs `reference`, the intrinsic's own compute
    over the same regions, offsets and strides.  `helpers` are (name, C text) pairs `impl`
    calls; `requires` names the CPU features they need."""

    intrin: str
    phase: str
    impl: Stmt
    reference: Stmt
    helpers: tuple = ()
    requires: tuple = ()


def seq(*stmts: Stmt | None) -> Stmt:
    """A SeqStmt of the non-empty statements, flattened; a single statement stays itself."""
    flat: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, SeqStmt):
            flat.extend(s.seq)
        else:
            flat.append(s)
    if len(flat) == 1:
        return flat[0]
    return SeqStmt(tuple(flat))


NOP = SeqStmt(())


@dataclass(frozen=True, eq=False, repr=False)
class PrimFunc:
    """A kernel: parameter buffers (in call order), the symbolic shape variables it reads from
    them, and its body."""

    name: str
    params: tuple          # tuple[Buffer]
    body: Stmt
    shape_vars: tuple = ()  # tuple[Var]: symbolic dimensions, passed as extra int arguments
    attrs: tuple = ()

    def with_body(self, body: Stmt) -> "PrimFunc":
        return PrimFunc(self.name, self.params, body, self.shape_vars, self.attrs)

    def __repr__(self) -> str:
        from .printer import func_str
        return func_str(self)

    __str__ = __repr__
