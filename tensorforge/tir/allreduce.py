"""Cross-thread reduction: a reduction whose reduce leaf is bound to threadIdx.* becomes a
shared-memory tree all-reduce inside one block (the loop nest tir/build.py emits for it).

Algorithm (n = extent of the bound leaf t, buf a `shared` buffer of n slots per value):
    for t (bound):  acc = identity; for the other (serial) reduce leaves: acc = acc (+) src
                    buf[t] = acc                        (acc: a `local` register per thread)
    p = largest power of two <= n
    for t (bound):  if t < n - p: buf[t] = buf[t] (+) buf[t + p]        (only when n != p)
    for s = p/2, p/4, ..., 1:
        for t (bound): if t < s: buf[t] = buf[t] (+) buf[t + s]
    for t (bound):  if t == 0: out[i...] = buf[0]
Each `for t` is a separate loop bound to the same thread axis, so lower_thread_binding maps
them onto the same threads of one kernel and insert_barriers puts a barrier between every two
steps (each reads slots the previous one wrote).  Within a step thread t writes slot t and
reads slot t + s >= s, which no thread of that step writes: no race.  Run one loop after
another (the interpreter, a serial reading) the program computes the same value.

Invariant: after the step with stride s, buf[t] for t < s holds the combination of all slots
congruent to t modulo s; after s = 1, buf[0] holds the whole reduction.

Restrictions (each an error naming the stage): one reduce leaf bound to a thread axis, and it
is the outermost reduce leaf; no data leaf after the reduce leaves; no data leaf bound to a
threadIdx axis (the block's threads all work on one output element).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ..ir.expr import DATA, REDUCE, Expr, IntImm, Var, const
from . import nodes as N

if TYPE_CHECKING:
    from ..te.schedule import Stage


def thread_reduce_position(st: "Stage") -> int | None:
    """The position of `st`'s reduce leaf bound to a threadIdx axis, or None."""
    for k, leaf in enumerate(st.leaf_iter_vars):
        attr = st.iter_var_attrs.get(leaf)
        if leaf.kind == REDUCE and attr is not None and attr.bind_thread is not None \
                and attr.bind_thread.thread_tag.startswith("threadIdx"):
            return k
    return None


def emit_allreduce(lw, st: "Stage", nest: Callable, conds_at: dict, attached_at: dict, pos: int) -> N.Stmt:
    """The loops of stage `st` (reduce leaf at `pos` bound to a thread axis) as a tree all-reduce
    through shared memory; `lw` is the lowering (tir/build.py), `nest` its loop-nest builder."""
    from ..te.schedule import ScheduleError
    leaves = st.leaf_iter_vars
    first_reduce = next(k for k, leaf in enumerate(leaves) if leaf.kind == REDUCE)
    if pos != first_reduce:
        raise ScheduleError(f"cross-thread reduction on stage {st.name}: the reduce axis bound to a "
                            f"thread ({leaves[pos].name}) must be the outermost reduce axis")
    if any(leaf.kind == DATA for leaf in leaves[pos:]):
        raise ScheduleError(f"cross-thread reduction on stage {st.name}: data axes must come before "
                            "the reduce axes")
    for leaf in leaves[:pos]:
        attr = st.iter_var_attrs.get(leaf)
        if attr is not None and attr.bind_thread is not None and attr.bind_thread.thread_tag.startswith("threadIdx"):
            raise ScheduleError(f"cross-thread reduction on stage {st.name}: data axis {leaf.name} is bound "
                                f"to {attr.bind_thread.thread_tag}; bind data axes to blockIdx.* only")
    bound = leaves[pos]
    thread = st.iter_var_attrs[bound].bind_thread
    assert thread is not None      # thread_reduce_position found it bound
    tag = thread.thread_tag
    n_expr = lw.info[st].dom[bound].extent
    if not isinstance(n_expr, IntImm):
        raise ScheduleError(f"cross-thread reduction on stage {st.name}: the extent of {bound.name} "
                            f"({n_expr}) must be a constant")
    n = int(n_expr.value)
    info = lw.info[st]
    red = lw.body_of(st)[0]
    bufs = [N.Buffer(f"{buf.name}.red", (n,), buf.dtype, N.SHARED) for buf in info.buffers]
    t = bound.var

    accs = [N.Buffer(f"{buf.name}.acc", (1,), buf.dtype, N.LOCAL) for buf in info.buffers]

    def combine_into(slot: Expr, other: list[Expr], bufs: list[N.Buffer] = bufs) -> N.Stmt:
        old = [N.BufferLoad(b, (slot,)) for b in bufs]
        combined = red.combiner.combine(old, other)
        if len(combined) == 1:
            return N.BufferStore(bufs[0], combined[0], (slot,))
        temps = [Var(f"{b.name}_v{k}", b.dtype) for k, b in enumerate(bufs)]
        stmt: N.Stmt = N.seq(*[N.BufferStore(b, v, (slot,)) for b, v in zip(bufs, temps)])
        for v, c in reversed(list(zip(temps, combined))):
            stmt = N.LetStmt(v, c, stmt)
        return stmt

    def thread_loop(body_of_t: Callable[[Var], N.Stmt]) -> N.Stmt:
        v = Var(t.name, t.dtype)
        return N.For(v, const(0), const(n), N.THREAD_BINDING, body_of_t(v), tag)

    # per-thread partial: identity, then the serial reduce leaves inside (conditions on them apply)
    zero = const(0)
    update = combine_into(zero, [lw._rewrite(st, s) for s in red.source], accs)
    cond = red.condition
    if not (isinstance(cond, IntImm) and cond.value):
        update = N.IfThenElse(lw._rewrite(st, cond), update)
    inner = nest(update, list(range(pos + 1, len(leaves))), True)
    conds = conds_at.get(pos, [])
    for c in conds:
        inner = N.IfThenElse(c, inner)
    body = N.seq(*[N.BufferStore(a, ident, (zero,)) for a, ident in zip(accs, red.combiner.identity)], inner,
                 *[N.BufferStore(b, N.BufferLoad(a, (zero,)), (t,)) for a, b in zip(accs, bufs)])
    for a in reversed(accs):
        body = N.Allocate(a, body)
    body = lw._with_attached(attached_at.get(pos, []), body)
    steps: list[N.Stmt] = [N.For(t, const(0), const(n), N.THREAD_BINDING, body, tag)]
    p = 1
    while p * 2 <= n:
        p *= 2
    if p != n:
        steps.append(thread_loop(lambda v: N.IfThenElse(v < n - p, combine_into(v, [N.BufferLoad(b, (v + p,)) for b in bufs]))))
    def fold(stride: int) -> Callable[[Var], N.Stmt]:
        return lambda v: N.IfThenElse(v < stride, combine_into(v, [N.BufferLoad(b, (v + stride,)) for b in bufs]))

    s = p // 2
    while s >= 1:
        steps.append(thread_loop(fold(s)))
        s //= 2
    index = lw._out_index(st)
    out = N.seq(*[N.BufferStore(dst, N.BufferLoad(b, (const(0),)), index) for dst, b in zip(info.buffers, bufs)])
    steps.append(thread_loop(lambda v: N.IfThenElse(v == 0, out)))
    stmt: N.Stmt = N.seq(*steps)
    for b in reversed(bufs):
        stmt = N.Allocate(b, stmt)
    stmt = nest(stmt, list(range(pos)), True)
    if pos == 0 and st.attach_type == "root":
        # a reduction to one value: its steps must be one kernel, so run them in one block
        stmt = N.For(Var("block", "int32"), const(0), const(1), N.THREAD_BINDING, stmt, "blockIdx.x")
    return stmt
