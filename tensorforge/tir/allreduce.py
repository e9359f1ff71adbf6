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

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from ..ir.expr import DATA, REDUCE, CommReducer, Expr, IntImm, Var, const
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
    t = bound.var

    accs = [N.Buffer(f"{buf.name}.acc", (1,), buf.dtype, N.LOCAL) for buf in info.buffers]
    index = lw._out_index(st)

    def partials(finish: N.Stmt) -> N.Stmt:
        """for t (bound): acc = identity; the serial reduce leaves into acc; then `finish`."""
        zero = const(0)
        update = _combine_into(red.combiner, accs, zero, [lw._rewrite(st, s) for s in red.source])
        cond = red.condition
        if not (isinstance(cond, IntImm) and cond.value):
            update = N.IfThenElse(lw._rewrite(st, cond), update)
        inner = nest(update, list(range(pos + 1, len(leaves))), True)
        for c in conds_at.get(pos, []):
            inner = N.IfThenElse(c, inner)
        body = N.seq(*[N.BufferStore(a, ident, (zero,)) for a, ident in zip(accs, red.combiner.identity)],
                     inner, finish)
        for a in reversed(accs):
            body = N.Allocate(a, body)
        body = lw._with_attached(attached_at.get(pos, []), body)
        return N.For(t, const(0), const(n), N.THREAD_BINDING, body, tag)

    # the shared-memory tree over all n partials (any device)
    bufs = [N.Buffer(f"{buf.name}.red", (n,), buf.dtype, N.SHARED) for buf in info.buffers]
    first = partials(N.seq(*[N.BufferStore(b, N.BufferLoad(a, (const(0),)), (t,)) for a, b in zip(accs, bufs)]))
    stmt = _tree(red.combiner, bufs, n, first, t, tag, info.buffers, index, n)
    forms = _warp_forms(red.combiner, accs, info.buffers, n, t, tag, index, partials)
    if forms is not None:
        stmt = N.AttrStmt(WARP_ATTR, forms, stmt)
    stmt = nest(stmt, list(range(pos)), True)
    if pos == 0 and st.attach_type == "root":
        # a reduction to one value: its steps must be one kernel, so run them in one block
        stmt = N.For(Var("block", "int32"), const(0), const(1), N.THREAD_BINDING, stmt, "blockIdx.x")
    return stmt


def _combine_into(combiner, bufs: list[N.Buffer], slot: Expr, other: list[Expr]) -> N.Stmt:
    """bufs[slot] = bufs[slot] (+) other (one store per value of the combiner)."""
    old = [N.BufferLoad(b, (slot,)) for b in bufs]
    combined = combiner.combine(old, other)
    if len(combined) == 1:
        return N.BufferStore(bufs[0], combined[0], (slot,))
    temps = [Var(f"{b.name}_v{k}", b.dtype) for k, b in enumerate(bufs)]
    stmt: N.Stmt = N.seq(*[N.BufferStore(b, v, (slot,)) for b, v in zip(bufs, temps)])
    for v, c in reversed(list(zip(temps, combined))):
        stmt = N.LetStmt(v, c, stmt)
    return stmt


def _tree(combiner, bufs: list[N.Buffer], n: int, first: N.Stmt, t: Var, tag: str, dsts, index,
          threads: int) -> N.Stmt:
    """`first` (which fills the n slots of `bufs`), the tree steps over them on the block's
    `threads` threads, then thread 0 writes slot 0 to `dsts` at `index`; `bufs` allocated
    around it all."""
    def thread_loop(body_of_t: Callable[[Var], N.Stmt]) -> N.Stmt:
        v = Var(t.name, t.dtype)
        return N.For(v, const(0), const(threads), N.THREAD_BINDING, body_of_t(v), tag)

    def fold(stride: int, limit: int) -> Callable[[Var], N.Stmt]:
        return lambda v: N.IfThenElse(v < limit, _combine_into(combiner, bufs, v,
                                                               [N.BufferLoad(b, (v + stride,)) for b in bufs]))

    steps: list[N.Stmt] = [first]
    p = 1
    while p * 2 <= n:
        p *= 2
    if p != n:
        steps.append(thread_loop(fold(p, n - p)))
    s = p // 2
    while s >= 1:
        steps.append(thread_loop(fold(s, s)))
        s //= 2
    out = N.seq(*[N.BufferStore(dst, N.BufferLoad(b, (const(0),)), index) for dst, b in zip(dsts, bufs)])
    steps.append(thread_loop(lambda v: N.IfThenElse(v == 0, out)))
    stmt: N.Stmt = N.seq(*steps)
    for b in reversed(bufs):
        stmt = N.Allocate(b, stmt)
    return stmt


# Warp forms -----------------------------------------------------------------------------------
# A device that reduces within a warp (CUDA shuffles, OpenCL sub-groups) needs far fewer
# shared-memory steps: each warp combines its W partials in registers, its first lane writes one
# slot, and the tree runs over n / W slots (none when one warp holds them all).  Which warp
# width a device has, and how it reduces, is the backend's to say, so the lowering writes the
# reduction once per width that divides n, with three placeholder calls the backend's
# select_allreduce pass (tir/passes/select_allreduce.py) replaces: WARP_REDUCE(x) (every lane
# gets the warp's combination of x; all lanes must reach it), WARP_LANE(t) (t's lane in its
# warp) and WARP_INDEX(t) (t's warp).  Unselected, the annotation is transparent: the tree above
# runs (the interpreter, and devices without warp reductions).

WARP_ATTR = "thread_allreduce_warp"
WARP_REDUCE, WARP_LANE, WARP_INDEX = "tf.warp_reduce", "tf.warp_lane", "tf.warp_index"
WARP_WIDTHS = (8, 16, 32, 64)


@dataclass(frozen=True, eq=False)
class WarpForms:
    """The value of a WARP_ATTR annotation: the same cross-thread reduction written for warps of
    each width in `forms` ((width, stmt), ...); `combiner` and `dtype` say what WARP_REDUCE
    combines."""

    combiner: CommReducer
    dtype: str
    forms: tuple

    def form(self, width: int) -> N.Stmt | None:
        return dict(self.forms).get(width)

    def __str__(self) -> str:
        return f"warp forms ({self.combiner.name}, {self.dtype}) for widths {[w for w, _ in self.forms]}"

    __repr__ = __str__


def _warp_forms(combiner, accs: list[N.Buffer], dsts, n: int, t: Var, tag: str, index,
                partials: Callable[[N.Stmt], N.Stmt]) -> WarpForms | None:
    """The WarpForms of a reduction over n threads, or None (several values, or not on
    threadIdx.x, whose ids are the lanes' linear ids)."""
    if len(accs) != 1 or tag != "threadIdx.x":
        return None
    acc, dst = accs[0], dsts[0]
    forms = []
    for width in WARP_WIDTHS:
        if n % width:
            continue
        m = n // width
        v = Var(f"{dst.name}_warp", acc.dtype)
        total = N.CallExtern(acc.dtype, WARP_REDUCE, (N.BufferLoad(acc, (const(0),)),))
        first_lane = N.CallExtern("int32", WARP_LANE, (t,)) == 0
        if m == 1:
            form = partials(N.LetStmt(v, total, N.IfThenElse(first_lane, N.BufferStore(dst, v, index))))
        else:
            slots = N.Buffer(f"{dst.name}.red", (m,), acc.dtype, N.SHARED)
            store = N.BufferStore(slots, v, (N.CallExtern("int32", WARP_INDEX, (t,)),))
            form = _tree(combiner, [slots], m, partials(N.LetStmt(v, total, N.IfThenElse(first_lane, store))),
                         t, tag, [dst], index, n)
        forms.append((width, form))
    return WarpForms(combiner, acc.dtype, tuple(forms)) if forms else None
