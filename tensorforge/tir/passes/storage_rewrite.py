"""Shared-memory reuse (storage rewrite): inside one GPU kernel, `shared` buffers whose lifetimes
do not overlap share one allocation, so a kernel with several phases asks for the shared memory
of its largest phase, not of all of them (shared memory bounds how many blocks run at once).

Algorithm.  Run on flattened buffers (one index per access), after thread binding and before
barrier insertion.  A kernel's body is cut into units in program order: descending through
sequences, conditions, lets and allocations, each statement that is a loop or a leaf is one unit
(a loop is one unit as a whole: a buffer used anywhere in it is alive for all of it, across its
iterations).  A buffer lives from the first to the last unit that touches it.  Buffers are
taken by first use (the larger first among ties) and each goes into the first slot of its dtype whose last member's lifetime
ended before it starts (interval colouring); a slot is one allocation of its largest member's
size.  Every access of a member then goes to the slot's buffer, and the kernel's shared
allocations (hoisted to its top, where OpenCL requires them anyway) are one per slot.

Invariant: two buffers share a slot only when no unit touches both and every unit of one comes
before every unit of the other; the barrier pass, run next, sees the shared slot and puts a
barrier between the last read of one and the first write of the next (write after read).
"""
from __future__ import annotations

import dataclasses
import math

from ...ir.expr import IntImm
from ...ir.functor import Mutator, post_order_visit
from .. import nodes as N
from ..kernel import KERNEL_ATTR


def storage_rewrite(func: N.PrimFunc) -> N.PrimFunc:
    return func.with_body(_Kernels().visit(func.body))


class _Kernels(Mutator):
    def visit_AttrStmt(self, node: N.AttrStmt):
        if node.key != KERNEL_ATTR:
            return self.generic_visit(node)
        return N.AttrStmt(node.key, node.value, _share(node.body))


def _share(body: N.Stmt) -> N.Stmt:
    shared: list[N.Buffer] = []
    post_order_visit(body, lambda n: shared.append(n.buffer)
                     if isinstance(n, N.Allocate) and n.buffer.scope == N.SHARED else None)
    if len(shared) < 2 or not all(isinstance(d, IntImm) for b in shared for d in b.shape):
        return body
    by_data = {b.data: b for b in shared}
    stripped = _Strip(set(by_data)).visit(body)
    units: list[set] = []
    _units(stripped, units)
    life: dict = {}
    for k, used in enumerate(units):
        for data in used & set(by_data):
            first, _ = life.get(data, (k, k))
            life[data] = (first, k)
    slots: list[list] = []          # [dtype, end, members, size]
    slot_of: dict = {}
    def size_of(buf: N.Buffer) -> int:
        return math.prod(int(d.value) for d in buf.shape)

    # by first use; among buffers first used together the larger first (it keeps its name)
    for data in sorted(life, key=lambda d: (life[d][0], -size_of(by_data[d]), by_data[d].name)):
        buf = by_data[data]
        start, end = life[data]
        size = size_of(buf)
        slot = next((s for s in slots if s[0] == buf.dtype and s[1] < start), None)
        if slot is None:
            slot = [buf.dtype, end, [buf], size]
            slots.append(slot)
        else:
            slot[1], slot[3] = end, max(slot[3], size)
            slot[2].append(buf)
        slot_of[data] = slot
    if len(slots) == len(life):
        return body                 # nothing to share
    target = {}
    allocs = []
    for slot in slots:
        head = dataclasses.replace(slot[2][0], shape=(slot[3],))
        allocs.append(head)
        for member in slot[2]:
            target[member.data] = head
    out = _Redirect(target).visit(stripped)
    for buf in reversed(allocs):
        out = N.Allocate(buf, out)
    return out


class _Strip(Mutator):
    """The body without its `shared` allocations (they are re-added at the kernel's top)."""

    def __init__(self, datas: set):
        self.datas = datas

    def visit_SeqStmt(self, node: N.SeqStmt):
        return N.seq(*[self.visit(x) for x in node.seq])     # a removed allocation's sequence joins its parent's

    def visit_Allocate(self, node: N.Allocate):
        if node.buffer.data in self.datas:
            return self.visit(node.body)
        return self.generic_visit(node)


class _Redirect(Mutator):
    def __init__(self, target: dict):
        self.target = target

    def visit_BufferLoad(self, node: N.BufferLoad):
        node = self.generic_visit(node)
        buf = self.target.get(node.buffer.data)
        return node if buf is None else N.BufferLoad(buf, node.indices)

    def visit_BufferStore(self, node: N.BufferStore):
        node = self.generic_visit(node)
        buf = self.target.get(node.buffer.data)
        return node if buf is None else N.BufferStore(buf, node.value, node.indices)


def _units(s: N.Stmt, out: list) -> None:
    """Append, in program order, the set of buffer data vars each unit of `s` touches."""
    if isinstance(s, N.SeqStmt):
        for x in s.seq:
            _units(x, out)
    elif isinstance(s, N.IfThenElse):
        cond: set = set()
        post_order_visit(s.condition, lambda n: cond.add(n.buffer.data) if isinstance(n, N.BufferLoad) else None)
        if cond:
            out.append(cond)
        _units(s.then_case, out)
        if s.else_case is not None:
            _units(s.else_case, out)
    elif isinstance(s, N.LetStmt):
        out.append(_touched(s.value))     # read once, before the body
        _units(s.body, out)
    elif isinstance(s, (N.Allocate, N.AttrStmt)):
        _units(s.body, out)
    else:
        out.append(_touched(s))


def _touched(node) -> set:
    found: set = set()
    post_order_visit(node, lambda n: found.add(n.buffer.data)
                     if isinstance(n, (N.BufferLoad, N.BufferStore)) else None)
    return found
