"""Virtual threads: a loop bound to `vthread` becomes interleaved code (the paper's section 4).

A virtual thread is a data-parallel axis that the hardware does not run in parallel: its
iterations are written out one after another, as close to the statements as possible, so that
each statement appears once per virtual thread with the vthread variable replaced by 0, 1, ...
The independent copies sit next to each other and give the compiler instruction-level
parallelism (on GPUs: several register tiles per thread, strided so that shared-memory reads of
neighbouring threads do not conflict).

Algorithm, for `for v in vthread(n): S`, pushing the loop down through S:
* a statement that does not mention v runs once (a cooperative fetch attached inside the
  vthread loop reads a region that bound inference made independent of v);
* a loop, let or `if` whose header does not mention v keeps its place and the vthread loop moves
  into its body (the iterations of distinct virtual threads touch distinct data, so reordering
  them across the loop is sound);
* a buffer allocated inside S in a non-shared scope gets one copy per virtual thread: its size
  is multiplied by n and every access is offset by v * size;
* any other statement is repeated n times with v substituted.
Runs after storage flattening (one index per access).  Invariant: each virtual thread executes
its own statements in its original order.
"""
from __future__ import annotations

from ...arith import Analyzer
from ...ir.expr import IntImm, Var, const
from ...ir.functor import Mutator, substitute, uses_var
from .. import nodes as N


def inject_virtual_threads(func: N.PrimFunc) -> N.PrimFunc:
    body = _Injector(func.name).visit(func.body)
    return func if body is func.body else func.with_body(body)


class _Injector(Mutator):
    def __init__(self, func_name: str):
        self.func_name = func_name

    def visit_For(self, node: N.For):
        node = self.generic_visit(node)      # inner vthread loops first
        if node.kind != N.THREAD_BINDING or not node.thread_tag.startswith("vthread"):
            return node
        if not isinstance(node.extent, IntImm) or not isinstance(node.min, IntImm):
            raise ValueError(f"{self.func_name}: loop {node.loop_var.name} bound to {node.thread_tag} "
                             f"has extent {node.extent}; a virtual thread needs a constant extent")
        n = node.extent.value
        var = node.loop_var
        body = substitute(node.body, {var: var + node.min}) if node.min.value else node.body
        return _inject(body, var, n)


def _inject(s: N.Stmt, v: Var, n: int) -> N.Stmt:
    """A statement equivalent to `for v in range(n): s` with the loop pushed as deep as it goes."""
    if n == 1:
        return substitute(s, {v: const(0, v.dtype)})
    if not uses_var(s, v):
        return s
    if isinstance(s, N.SeqStmt):
        return N.seq(*[_inject(x, v, n) for x in s.seq])
    if isinstance(s, N.For) and not uses_var(s.min, v) and not uses_var(s.extent, v):
        return N.For(s.loop_var, s.min, s.extent, s.kind, _inject(s.body, v, n), s.thread_tag, s.annotations)
    if isinstance(s, N.LetStmt) and not uses_var(s.value, v):
        return N.LetStmt(s.var, s.value, _inject(s.body, v, n))
    if isinstance(s, N.AttrStmt):
        return N.AttrStmt(s.key, s.value, _inject(s.body, v, n))
    if isinstance(s, N.IfThenElse) and not uses_var(s.condition, v):
        return N.IfThenElse(s.condition, _inject(s.then_case, v, n),
                            None if s.else_case is None else _inject(s.else_case, v, n))
    if isinstance(s, N.Allocate):
        if s.buffer.scope == N.SHARED:
            return N.Allocate(s.buffer, _inject(s.body, v, n))
        return _expand(s, v, n)
    return N.seq(*[substitute(s, {v: const(k, v.dtype)}) for k in range(n)])


def _expand(s: N.Allocate, v: Var, n: int) -> N.Stmt:
    """One copy of the buffer per virtual thread: n times the size, accesses offset by v * size."""
    old = s.buffer
    size = const(1)
    for d in old.shape:
        size = size * d
    size = Analyzer().simplify(size)
    new = N.Buffer(old.name, (Analyzer().simplify(size * n),), old.dtype, old.scope, Var(old.data.name, "handle"), old.align)
    body = _Rebase(old, new, v * size).visit(s.body)
    return N.Allocate(new, _inject(body, v, n))


class _Rebase(Mutator):
    def __init__(self, old: N.Buffer, new: N.Buffer, offset):
        self.old, self.new, self.offset = old, new, offset

    def _index(self, indices: tuple) -> tuple:
        if len(indices) != 1:
            raise ValueError(f"buffer {self.old.name}: the virtual-thread pass runs on flattened "
                             "buffers (one index per access)")
        return (self.offset + indices[0],)

    def visit_BufferLoad(self, node: N.BufferLoad):
        node = self.generic_visit(node)
        if node.buffer is not self.old:
            return node
        return N.BufferLoad(self.new, self._index(node.indices))

    def visit_BufferStore(self, node: N.BufferStore):
        node = self.generic_visit(node)
        if node.buffer is not self.old:
            return node
        return N.BufferStore(self.new, node.value, self._index(node.indices))
