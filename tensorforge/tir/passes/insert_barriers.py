"""Barrier insertion: a block-wide barrier wherever threads of a GPU block could see shared
memory in the wrong state.

Threads of a block share `shared` buffers; a cooperative fetch writes an element from one thread
that another thread then reads.  Two hazards need a barrier between two statements:
* read after write: a statement reads a shared buffer that an earlier one wrote;
* write after read: a statement overwrites a shared buffer that an earlier one read (the next
  iteration's fetch must wait until every thread finished reading the current tile).

Algorithm: in every statement sequence inside a kernel, walk the children in order keeping the
shared buffers written and read since the last barrier; before a child that reads a pending
write or writes a pending read, put a barrier and clear both sets.  For a loop body, walk its
sequence a second time from the state at its end (the next iteration) up to its first barrier;
a hazard there puts a barrier at the end of the body.  A child is treated as a whole (its reads
and writes anywhere inside), which is conservative: it can only add barriers.

Barriers are placed only between children of a sequence, never inside a condition that was not
already there; a sequence under an `if` on the thread index would make threads miss it, so the
schedules bind fetch loops with the guard inside the fetch (as lower_thread_binding emits).
"""
from __future__ import annotations

import dataclasses

from ...ir.functor import post_order_visit
from .. import nodes as N
from ..kernel import KERNEL_ATTR


def insert_barriers(func: N.PrimFunc) -> N.PrimFunc:
    shared: set = set()
    post_order_visit(func.body, lambda n: shared.add(n.buffer.data)
                     if isinstance(n, N.Allocate) and n.buffer.scope == N.SHARED else None)
    if not shared:
        return func
    return func.with_body(_Sync(shared).stmt(func.body, in_kernel=False))


def _accesses(s: N.Stmt, shared: set) -> tuple[set, set]:
    reads: set = set()
    writes: set = set()

    def fn(n):
        if isinstance(n, N.BufferLoad) and n.buffer.data in shared:
            reads.add(n.buffer.data)
        elif isinstance(n, N.BufferStore) and n.buffer.data in shared:
            writes.add(n.buffer.data)

    post_order_visit(s, fn)
    return reads, writes


class _Sync:
    def __init__(self, shared: set):
        self.shared = shared

    def stmt(self, s: N.Stmt, in_kernel: bool) -> N.Stmt:
        if isinstance(s, N.AttrStmt):
            inner = in_kernel or s.key == KERNEL_ATTR
            return N.AttrStmt(s.key, s.value, self.stmt(s.body, inner))
        if not in_kernel:
            if isinstance(s, N.Allocate):
                return N.Allocate(s.buffer, self.stmt(s.body, False))
            if isinstance(s, N.SeqStmt):
                return N.seq(*[self.stmt(x, False) for x in s.seq])
            return s
        if isinstance(s, N.SeqStmt):
            children, _ = self.sequence([self.stmt(x, True) for x in s.seq], set(), set())
            return N.seq(*children)
        if isinstance(s, N.For):
            return N.For(s.loop_var, s.min, s.extent, s.kind, self.loop_body(s.body), s.thread_tag,
                         s.annotations)
        if isinstance(s, N.IfThenElse):
            return N.IfThenElse(s.condition, self.stmt(s.then_case, True),
                                None if s.else_case is None else self.stmt(s.else_case, True))
        if isinstance(s, (N.Allocate, N.LetStmt)):
            return dataclasses.replace(s, body=self.stmt(s.body, True))
        return s

    def sequence(self, children: list, reads: set, writes: set) -> tuple[list, tuple[set, set]]:
        """Children with barriers inserted, and the (reads, writes) pending at the end."""
        out: list = []
        for c in children:
            if isinstance(c, N.Barrier):
                reads, writes = set(), set()
                out.append(c)
                continue
            r, w = _accesses(c, self.shared)
            if (r & writes) or (w & reads):
                out.append(N.Barrier(N.SHARED))
                reads, writes = set(), set()
            reads, writes = reads | r, writes | w
            out.append(c)
        return out, (reads, writes)

    def loop_body(self, body: N.Stmt) -> N.Stmt:
        body = self.stmt(body, True)
        children = list(body.seq) if isinstance(body, N.SeqStmt) else [body]
        _, (reads, writes) = self.sequence(children, set(), set())
        if not reads and not writes:
            return body
        # the next iteration, from the state this one ends in, up to its first barrier
        for c in children:
            if isinstance(c, N.Barrier):
                break
            r, w = _accesses(c, self.shared)
            if (r & writes) or (w & reads):
                return N.seq(body, N.Barrier(N.SHARED))
            reads, writes = reads | r, writes | w
        return body
