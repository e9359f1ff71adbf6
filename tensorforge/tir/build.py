"""Schedule -> loop program: bound inference and loop-nest generation (the `te -> tir` arrow).

Algorithm (the method Halide and TVM share):
 1. Inline: every stage marked `compute_inline` is substituted into the bodies of its readers.
 2. Bound inference, consumers before producers.  A stage at the root computes its whole shape.
    A stage attached at loop `iv` of stage P computes the union of the regions its consumers
    read during one iteration of `iv`: loop variables at or outside `iv` stay symbols, those
    inside are widened to their ranges (interval arithmetic).  The region fixes the ranges of the
    stage's root axes; splits and fuses carry them down to the leaves.
 3. Loop generation: one loop per leaf, in leaf order.  Root axes are rebuilt from the leaves
    (parent = outer * factor + inner; fused -> (fused // n, fused % n)).  Where a split does not
    divide, or a region may leave the tensor's domain, a guard is placed right after the
    innermost loop it depends on.  Reductions get an init nest (over the data axes that come
    after the first reduction loop) and an update nest.  Attached stages are emitted, with their
    buffers, at the top of the loop they are attached to.
Invariant: every element a consumer reads has been written by the time it is read, and no
element outside a tensor's domain is computed or read.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence, cast

from .. import arith
from ..arith.structural import Interner
from ..ir.dtype import itemsize
from ..ir.expr import DATA, REDUCE, And, Expr, IntImm, IterVar, Let, Range, Reduce, Select, TensorLoad, Var, const
from ..ir.functor import Mutator, Visitor, free_vars, post_order_visit, substitute
from ..te.schedule import INLINE, ROOT, SCOPE, Schedule, ScheduleError, Split, Stage
from ..te.tensor import ComputeOp, PlaceholderOp, Tensor
from . import nodes as N
from .allreduce import emit_allreduce, thread_reduce_position

_KIND_OF_ATTR = {"serial": N.SERIAL, "parallel": N.PARALLEL, "vectorized": N.VECTORIZED,
                 "unrolled": N.UNROLLED, "thread_binding": N.THREAD_BINDING}


# memory scope -> thread tags (by prefix) whose threads all see one buffer of that scope
_SHARING_THREADS = {"shared": ("threadIdx.", "vthread"), "global": ("threadIdx.", "vthread", "blockIdx.")}


def _ceildiv(a: Expr, b: Expr) -> Expr:
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return const(-(-a.value // b.value), a.dtype)
    return (a + b - 1) // b


def _compute_op(st: Stage) -> ComputeOp:
    """The operation of a stage that gets loops (placeholders are parameters, never lowered)."""
    if not isinstance(st.op, ComputeOp):
        raise ScheduleError(f"stage {st.name} is a placeholder; it has no loops to generate")
    return st.op


def _attach_point(st: Stage) -> tuple[Stage, IterVar]:
    """The stage and the loop that `st` is computed in (it was attached with compute_at)."""
    if st.attach_stage is None or st.attach_ivar is None:
        raise ScheduleError(f"stage {st.name} is attached to a loop but the schedule does not say which")
    return st.attach_stage, st.attach_ivar


def _mul_extent(a: Expr, b: Expr) -> Expr:
    """a * b for loop extents: constants multiply as Python integers (an int64 constant when
    the product does not fit in int32, never a wrapped one)."""
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return const(a.value * b.value)
    return a * b


class _StageInfo:
    """What bound inference learned about one emitted stage."""

    def __init__(self, stage: Stage):
        self.stage = stage
        self.dom: dict[IterVar, Range] = {}
        self.values: dict[IterVar, Expr] = {}   # root iter var -> expression of leaf vars
        self.region_min: list[Expr] = []       # per data axis: offset of the buffer
        self.conditions: list[Expr] = []
        self.buffers: list[N.Buffer] = []
        self.is_param = False


class _Lowering:
    def __init__(self, sch: Schedule, args: Sequence[Tensor], name: str):
        self.sch, self.name = sch, name
        self.args = list(args)
        for a in self.args:
            if not isinstance(a, Tensor):
                raise TypeError(f"lower/build arguments must be tensors, got {a!r}")
        self.analyzer = arith.Analyzer()
        self.body_cache: dict[Stage, tuple] = {}
        self.info: dict[Stage, _StageInfo] = {}
        self.leaf_dom: dict[Var, arith.Interval] = {}

    # -- helpers --------------------------------------------------------------------------------
    def stage_of(self, t: Tensor) -> Stage:
        st = self.sch.stage_map.get(t.op)
        if st is None:
            raise ScheduleError(f"tensor {t.name} is read but is not part of the schedule")
        return st

    def body_of(self, stage: Stage) -> tuple:
        """The stage's body with every inlined producer substituted."""
        cached = self.body_cache.get(stage)
        if cached is None:
            expander = _InlineExpander(self)
            cached = tuple(expander.expand(b) for b in _compute_op(stage).body)
            self.body_cache[stage] = cached
        return cached

    def loads(self, stage: Stage) -> list[TensorLoad]:
        found: list[TensorLoad] = []

        def fn(n):
            if isinstance(n, TensorLoad):
                found.append(n)

        for b in self.body_of(stage):
            post_order_visit(b, fn)
        return found

    # -- entry ----------------------------------------------------------------------------------
    def run(self) -> N.PrimFunc:
        stages = [st for st in self.sch.stages if isinstance(st.op, ComputeOp) and st.attach_type != INLINE]
        self.emitted = stages
        self.consumers: dict[Stage, list[Stage]] = {st: [] for st in self.sch.stages}
        for st in stages:
            for ld in self.loads(st):
                producer = self.stage_of(ld.tensor)
                if st not in self.consumers[producer]:
                    self.consumers[producer].append(st)
        self._bind_params()
        self._check_attachments(stages)
        for st in reversed(stages):
            self._infer_bounds(st)
        for st in stages:
            info = self.info[st]
            if not info.is_param:
                shape = tuple(info.dom[iv].extent for iv in _compute_op(st).axis)
                info.buffers = [N.Buffer(t.name, shape, t.dtype, st.scope) for t in st.op.outputs]
        body = N.seq(*[self._emit(st) for st in stages if st.attach_type == ROOT])
        for st in reversed(stages):
            if st.attach_type == ROOT and not self.info[st].is_param:
                for buf in reversed(self.info[st].buffers):
                    body = N.Allocate(buf, body)
        func = N.PrimFunc(self.name, tuple(self.params), body, tuple(self.shape_vars))
        self._check_free_vars(func)
        return func

    def _bind_params(self) -> None:
        self.params: list[N.Buffer] = []
        self.param_of: dict[Tensor, N.Buffer] = {}
        seen_names: dict[str, int] = {}
        for t in self.args:
            if t in self.param_of:
                raise ValueError(f"tensor {t.name} appears twice in the argument list")
            name = t.name
            if name in seen_names:
                seen_names[name] += 1
                name = f"{name}_{seen_names[name]}"
            else:
                seen_names[name] = 0
            buf = N.Buffer(name, t.shape, t.dtype)
            self.params.append(buf)
            self.param_of[t] = buf
        for st in self.sch.stages:
            if isinstance(st.op, PlaceholderOp) and st.op.output(0) not in self.param_of:
                raise ValueError(f"placeholder {st.name} is read by the computation but is not in the argument list")
            if st.is_output:
                for t in st.origin_op.outputs:
                    if t not in self.param_of and st.op.output(t.value_index) not in self.param_of:
                        raise ValueError(f"output {t.name} is not in the argument list")
        self.shape_vars: list[Var] = []
        for buf in self.params:
            for dim in buf.shape:
                for v in sorted(free_vars(dim), key=lambda v: v.name):
                    if v not in self.shape_vars:
                        self.shape_vars.append(v)

    def _param_for(self, st: Stage, index: int) -> N.Buffer | None:
        for op in (st.op, st.origin_op):
            buf = self.param_of.get(op.output(index)) if index < op.num_outputs else None
            if buf is not None:
                return buf
        return None

    def _check_attachments(self, stages: list[Stage]) -> None:
        for st in self.sch.stages:
            if st.attach_type == SCOPE:
                parent, iv = _attach_point(st)
                if parent.attach_type == INLINE:
                    raise ScheduleError(f"stage {st.name} is computed at stage {parent.name}, which is inlined")
                if iv not in parent.leaf_iter_vars:
                    raise ScheduleError(f"stage {st.name} is computed at axis {iv.name} of stage {parent.name}, "
                                        "which is no longer a loop of it (it was split or fused afterwards)")
                for c in self.consumers[st]:
                    if not self._inside(c, parent, parent.leaf_iter_vars.index(iv)):
                        raise ScheduleError(
                            f"stage {st.name} is computed at {parent.name}.{iv.name} but stage {c.name}, "
                            "which reads it, is outside that loop; attach it to a loop that encloses every reader")
                if self._param_for(st, 0) is not None:
                    raise ScheduleError(f"stage {st.name} is an argument, so it must be computed at the root")

    def _inside(self, c: Stage, parent: Stage, pos: int) -> bool:
        while True:
            if c is parent:
                return True
            if c.attach_type != SCOPE:
                return False
            c_parent, c_iv = _attach_point(c)
            if c_parent is parent:
                return parent.leaf_iter_vars.index(c_iv) >= pos
            c = c_parent

    # -- bound inference ------------------------------------------------------------------------
    def _fixed_vars(self, st: Stage) -> set:
        """Loop variables that enclose the attach point of `st` (held as symbols).

        Loops bound to GPU threads that can see the stage's memory are not held: all threads of
        a block share a `shared` buffer, so its region is the union over threadIdx and vthread
        (the block fetches it cooperatively); a `global` buffer is seen by every block as well.
        """
        visible = _SHARING_THREADS.get(st.scope, ())
        fixed: set = set()
        while st.attach_type == SCOPE:
            parent, iv = _attach_point(st)
            pos = parent.leaf_iter_vars.index(iv)
            for leaf in parent.leaf_iter_vars[:pos + 1]:
                attr = parent.iter_var_attrs.get(leaf)
                tag = attr.bind_thread.thread_tag if attr and attr.bind_thread is not None else ""
                if not (tag and visible and tag.startswith(visible)):
                    fixed.add(leaf.var)
            st = parent
        return fixed

    def _infer_bounds(self, st: Stage) -> None:
        info = _StageInfo(st)
        self.info[st] = info
        op = _compute_op(st)
        info.is_param = self._param_for(st, 0) is not None
        if info.is_param:
            params = [self._param_for(st, k) for k in range(op.num_outputs)]
            missing = [t.name for t, buf in zip(op.outputs, params) if buf is None]
            if missing:
                raise ValueError(f"output {missing[0]} of {st.name} is not in the argument list; "
                                 f"pass every output of {st.name} or none of them")
            info.buffers = [buf for buf in params if buf is not None]
        if st.attach_type == SCOPE:
            mins, exts = self._region(st)
        else:
            mins, exts = [const(0)] * len(op.axis), list(op.shape)
        for iv, lo, ext in zip(op.axis, mins, exts):
            info.dom[iv] = Range(lo, ext)
        info.region_min = list(mins)
        for iv in op.reduce_axis:
            info.dom[iv] = cast(Range, iv.dom)  # reduce axes always have a domain
        # carry ranges down to the leaves
        for rel in st.relations:
            if isinstance(rel, Split):
                ext = info.dom[rel.parent].extent
                if rel.factor is not None:
                    info.dom[rel.outer] = Range(const(0), self._simplify(_ceildiv(ext, rel.factor)))
                    info.dom[rel.inner] = Range(const(0), rel.factor)
                else:
                    nparts = cast(Expr, rel.nparts)  # a split has either a factor or nparts
                    info.dom[rel.outer] = Range(const(0), nparts)
                    info.dom[rel.inner] = Range(const(0), self._simplify(_ceildiv(ext, nparts)))
            else:
                info.dom[rel.fused] = Range(const(0), self._simplify(
                    _mul_extent(info.dom[rel.outer].extent, info.dom[rel.inner].extent)))
        for leaf in st.leaf_iter_vars:
            ext = info.dom[leaf].extent
            self.leaf_dom[leaf.var] = arith.Interval(const(0), self._simplify(ext - 1))
            self.analyzer.bind(leaf.var, Range(const(0), ext))
        # rebuild the root axes from the leaves
        values: dict[IterVar, Expr] = {leaf: leaf.var for leaf in st.leaf_iter_vars}
        for rel in reversed(st.relations):
            if isinstance(rel, Split):
                factor = info.dom[rel.inner].extent
                values[rel.parent] = values[rel.outer] * factor + values[rel.inner]
            else:
                n = info.dom[rel.inner].extent
                values[rel.outer] = values[rel.fused] // n
                values[rel.inner] = values[rel.fused] % n
        # a split that does not divide its parent's extent runs past it: guard the parent's value
        # (an intermediate axis too, or its overflow would alias a valid value of the root axis)
        for rel in st.relations:
            if isinstance(rel, Split):
                ext = info.dom[rel.parent].extent
                covered = _mul_extent(info.dom[rel.outer].extent, info.dom[rel.inner].extent)
                if not self.analyzer.can_prove(covered <= ext):
                    self._add_guard(info, values[rel.parent] < ext)
        for iv in list(op.axis) + list(op.reduce_axis):
            rng = info.dom[iv]
            value = self._simplify(rng.min + values[iv])
            info.values[iv] = value
            if iv.kind == DATA and st.attach_type == SCOPE:
                # an attached region may reach past the tensor's domain: compute only inside it
                self._add_guard(info, value >= 0)
                self._add_guard(info, value < cast(Range, iv.dom).extent)

    def _add_guard(self, info: _StageInfo, cond: Expr) -> None:
        cond = self._simplify(cond)
        if not (isinstance(cond, IntImm) and cond.value) and not self.analyzer.can_prove(cond):
            info.conditions.append(cond)

    def _region(self, st: Stage) -> tuple[list[Expr], list[Expr]]:
        """The region of `st` that its consumers read in one iteration of its attach loop."""
        fixed = self._fixed_vars(st)
        relax = {v: iv for v, iv in self.leaf_dom.items() if v not in fixed}
        op = _compute_op(st)
        ndim = len(op.axis)
        lows: list[list[Expr]] = [[] for _ in range(ndim)]
        highs: list[list[Expr]] = [[] for _ in range(ndim)]
        whole = [False] * ndim
        for c in self.consumers[st]:
            cinfo = self.info[c]
            root_values = {iv.var: cinfo.values[iv] for iv in cinfo.values}
            for ld in self.loads(c):
                if self.stage_of(ld.tensor) is not st:
                    continue
                for d, idx in enumerate(ld.indices):
                    # simplified first: a read through fused axes, ((f // W) * W + f % W) with
                    # f = fo * t + fi, is the range of f, not whole rows of W
                    interval = self._relax(self._simplify(substitute(idx, root_values)), relax)
                    if interval is None:
                        whole[d] = True
                    else:
                        lows[d].append(interval.min)
                        highs[d].append(interval.max)
        mins, exts = [], []
        bounds = arith.Analyzer()
        for v, iv in self.leaf_dom.items():
            bounds.bind(v, iv)
        for d, shape in enumerate(op.shape):
            if whole[d] or not lows[d]:
                mins.append(const(0))
                exts.append(shape)
                continue
            lo, hi = lows[d][0], highs[d][0]
            for x in lows[d][1:]:
                lo = lo if self.analyzer.can_prove(lo <= x) else x if self.analyzer.can_prove(x <= lo) else arith_min(lo, x)
            for x in highs[d][1:]:
                hi = hi if self.analyzer.can_prove(hi >= x) else x if self.analyzer.can_prove(x >= hi) else arith_max(hi, x)
            lo, ext = self._simplify(lo), self._simplify(hi - lo + 1)
            if not isinstance(ext, IntImm):
                upper = bounds.const_int_bound(ext)[1]
                if upper is None:
                    mins.append(const(0))
                    exts.append(shape)
                    continue
                ext = const(upper)
            if isinstance(shape, IntImm) and isinstance(ext, IntImm) and ext.value >= shape.value:
                lo, ext = const(0), shape
            mins.append(lo)
            exts.append(ext)
        return mins, exts

    def _relax(self, e: Expr, relax: dict) -> "arith.Interval | None":
        interval = self.analyzer.eval_interval(e, relax)
        for _ in range(16):
            if interval is None:
                return None
            names = free_vars(interval.min) | free_vars(interval.max)
            if not any(v in relax for v in names):
                return interval
            lo = self.analyzer.eval_interval(interval.min, relax)
            hi = self.analyzer.eval_interval(interval.max, relax)
            if lo is None or hi is None:
                return None
            interval = arith.Interval(lo.min, hi.max)
        return None

    def _simplify(self, e: Expr) -> Expr:
        return self.analyzer.simplify(e)

    # -- loop generation ------------------------------------------------------------------------
    def _emit(self, st: Stage) -> N.Stmt:
        info = self.info[st]
        leaves = st.leaf_iter_vars
        pos_of = {leaf.var: k for k, leaf in enumerate(leaves)}

        def position(cond: Expr) -> int:
            return max((pos_of[v] for v in free_vars(cond) if v in pos_of), default=-1)

        conds_at: dict[int, list[Expr]] = {}
        for c in info.conditions:
            conds_at.setdefault(position(c), []).append(c)
        attached_at: dict[int, list[Stage]] = {}
        for other in self.emitted:
            if other.attach_type == SCOPE and other.attach_stage is st:
                attached_at.setdefault(leaves.index(_attach_point(other)[1]), []).append(other)

        op = _compute_op(st)
        is_reduce = isinstance(op.body[0], Reduce)
        first_reduce = next((k for k, leaf in enumerate(leaves) if leaf.kind == REDUCE), len(leaves))

        def nest(body: N.Stmt, positions: list[int], with_attached: bool, cond_filter=None) -> N.Stmt:
            for k in reversed(positions):
                conds = [c for c in conds_at.get(k, []) if cond_filter is None or cond_filter(c)]
                if conds:
                    cond = conds[0]
                    for c in conds[1:]:
                        cond = cond & c
                    body = N.IfThenElse(cond, body)
                if with_attached:
                    body = self._with_attached(attached_at.get(k, []), body)
                body = self._loop(st, leaves[k], body)
            return body

        top_conds = conds_at.get(-1, [])
        if st.tensorized is not None:
            body = self._emit_tensorized(st, nest, first_reduce, is_reduce)
        elif not is_reduce:
            body = nest(self._store_plain(st), list(range(len(leaves))), True)
        elif (bound := thread_reduce_position(st)) is not None:
            body = emit_allreduce(self, st, nest, conds_at, attached_at, bound)
        else:
            outer = list(range(first_reduce))
            rest = list(range(first_reduce, len(leaves)))
            reduce_vars = {leaf.var for leaf in leaves if leaf.kind == REDUCE}
            data_only = lambda c: not any(v in reduce_vars for v in free_vars(c))  # noqa: E731
            init = nest(self._store_init(st), [k for k in rest if leaves[k].kind != REDUCE], False, data_only)
            update = nest(self._store_update(st), rest, True)
            body = nest(N.seq(init, update), outer, True)
        for c in top_conds:
            body = N.IfThenElse(c, body)
        return body

    def _emit_tensorized(self, st: Stage, nest, first_reduce: int, is_reduce: bool) -> N.Stmt:
        """The loops outside the tensorized axis around the intrinsic's statements: its body when
        the whole reduction lies inside, else reset (or the plain init loops) before the outer
        reduction loops and update inside them (tir/tensorize.py)."""
        from .tensorize import plan
        leaves = st.leaf_iter_vars
        p = plan(self, st)
        if not is_reduce or p.position <= first_reduce:
            return nest(p.body, list(range(p.position)), True)
        rest = list(range(first_reduce, len(leaves)))
        reduce_vars = {leaf.var for leaf in leaves if leaf.kind == REDUCE}
        data_only = lambda c: not any(v in reduce_vars for v in free_vars(c))  # noqa: E731
        if p.reset is not None:
            init = nest(p.reset, [k for k in rest[:p.position - first_reduce] if leaves[k].kind != REDUCE],
                        False, data_only)
        else:
            init = nest(self._store_init(st), [k for k in rest if leaves[k].kind != REDUCE], False, data_only)
        update = nest(p.update, rest[:p.position - first_reduce], True)
        return nest(N.seq(init, update), list(range(first_reduce)), True)

    def _with_attached(self, stages: list[Stage], body: N.Stmt) -> N.Stmt:
        if not stages:
            return body
        body = N.seq(*[self._emit(s) for s in stages], body)
        for s in reversed(stages):
            for buf in reversed(self.info[s].buffers):
                body = N.Allocate(buf, body)
        return body

    def _loop(self, st: Stage, leaf: IterVar, body: N.Stmt) -> N.Stmt:
        attr = st.iter_var_attrs.get(leaf)
        if attr and attr.prefetches:
            body = N.seq(*self._prefetches(st, leaf, attr.prefetches), body)
        kind = _KIND_OF_ATTR[attr.kind] if attr else N.SERIAL
        tag = attr.bind_thread.thread_tag if attr and attr.bind_thread is not None else ""
        ann = tuple(("pragma_" + name, value) for name, value in attr.pragmas) if attr else ()
        ext = self.info[st].dom[leaf].extent
        return N.For(leaf.var, const(0), ext, kind, body, tag, ann)

    def _prefetches(self, st: Stage, leaf: IterVar, wanted: list) -> list[N.Stmt]:
        """`Stage.prefetch` at the loop over `leaf`: for each read of each tensor, its indices at
        iteration `leaf + offset` with the loops inside `leaf` at their first iteration, and one
        prefetch per 64-byte line of the run its last index sweeps over those loops."""
        leaves = st.leaf_iter_vars
        inner = leaves[leaves.index(leaf) + 1:]
        relax = {iv.var: self.leaf_dom[iv.var] for iv in inner if iv.var in self.leaf_dom}
        first = {iv.var: const(0) for iv in inner}
        out: list[N.Stmt] = []
        seen: list[tuple] = []
        for tensor, offset in wanted:
            for load in self.loads(st):
                if load.tensor.op is not tensor.op or load.tensor.value_index != tensor.value_index:
                    continue
                lowered = self._rewrite(st, load)
                if not isinstance(lowered, N.BufferLoad):
                    continue
                start = tuple(self._simplify(substitute(substitute(i, first), {leaf.var: leaf.var + offset}))
                              for i in lowered.indices)
                if any(all(arith.structural_equal(a, b) for a, b in zip(key, start)) for key in seen):
                    continue                  # the same element read twice: one prefetch
                seen.append(start)
                span = self._relax(lowered.indices[-1], relax) if lowered.indices else None
                width = 1
                if span is not None:
                    w = self._simplify(span.max - span.min + 1)
                    width = w.value if isinstance(w, IntImm) and w.value > 0 else 1
                per_line = max(1, 64 // itemsize(lowered.buffer.dtype))
                for m in range(0, width, per_line):
                    index = start[:-1] + (self._simplify(start[-1] + m),)
                    out.append(N.Prefetch(N.BufferLoad(lowered.buffer, index)))
        return out

    def _rewrite(self, st: Stage, e: Expr) -> Expr:
        """Root vars -> leaf expressions, tensor loads -> buffer loads."""
        info = self.info[st]
        e = substitute(e, {iv.var: v for iv, v in info.values.items()})
        return _LoadLowerer(self).visit(e)

    def _out_index(self, st: Stage) -> tuple:
        info = self.info[st]
        return tuple(self._simplify(info.values[iv] - lo) for iv, lo in zip(_compute_op(st).axis, info.region_min))

    def _store_plain(self, st: Stage) -> N.Stmt:
        info = self.info[st]
        index = self._out_index(st)
        return N.seq(*[N.BufferStore(buf, self._rewrite(st, b), index)
                       for buf, b in zip(info.buffers, self.body_of(st))])

    def _store_init(self, st: Stage) -> N.Stmt:
        info = self.info[st]
        index = self._out_index(st)
        red = self.body_of(st)[0]
        return N.seq(*[N.BufferStore(buf, ident, index)
                       for buf, ident in zip(info.buffers, red.combiner.identity)])

    def _store_update(self, st: Stage) -> N.Stmt:
        info = self.info[st]
        index = self._out_index(st)
        red: Reduce = self.body_of(st)[0]
        old = [N.BufferLoad(buf, index) for buf in info.buffers]
        src = [self._rewrite(st, s) for s in red.source]
        combined = red.combiner.combine(old, src)
        if len(combined) == 1:
            stmt: N.Stmt = N.BufferStore(info.buffers[0], combined[0], index)
        else:
            temps = [Var(f"{buf.name}_v{k}", buf.dtype) for k, buf in enumerate(info.buffers)]
            stmt = N.seq(*[N.BufferStore(buf, t, index) for buf, t in zip(info.buffers, temps)])
            for t, c in reversed(list(zip(temps, combined))):
                stmt = N.LetStmt(t, c, stmt)
        cond = red.condition
        if not (isinstance(cond, IntImm) and cond.value):
            stmt = N.IfThenElse(self._rewrite(st, cond), stmt)
        return stmt

    def _check_free_vars(self, func: N.PrimFunc) -> None:
        bound: set = set(self.shape_vars)

        def fn(n):
            if isinstance(n, N.For):
                bound.add(n.loop_var)
            elif isinstance(n, (N.LetStmt, Let)):
                bound.add(n.var)

        post_order_visit(func.body, fn)
        for v in free_vars(func.body):
            if v not in bound and v.dtype != "handle":
                raise ValueError(f"variable {v.name} is neither a loop variable nor a dimension of an "
                                 "argument; pass a tensor whose shape holds it")


def arith_min(a: Expr, b: Expr) -> Expr:
    from ..ir.expr import Min
    return Min(a, b)


def arith_max(a: Expr, b: Expr) -> Expr:
    from ..ir.expr import Max
    return Max(a, b)


# An inlined producer whose expanded body has more expression nodes than this (its loads count as
# one node each, whatever their indices) is bound to a variable where its reader loads it more
# than once at the same indices (see _InlineExpander).
_BIND_ABOVE = 64


class _InlineExpander(Mutator):
    """Expands a stage's body: the loads of inlined producers become the producers' bodies, with
    the producers' axes replaced by the indices of the load, through any depth of inlining.

    A producer loaded more than once at the same indices in one scope (the stage's body, or one
    source of a reduction), counted through the whole expansion (a diamond: SiLU exported as
    x * Sigmoid(x) reads x directly and through the Sigmoid), and at least once where the load is
    evaluated whatever the data (not only in a branch of a Select or on the right of && or ||),
    is expanded once and bound with a Let when its expansion is larger than _BIND_ABOVE nodes.
    Without that a chain of ops that read their input k times grows as k^n: a NaN-propagating
    maximum reads its operand three times, and eight chained Max nodes fused into one kernel
    printed 600 KB of C.  Smaller expansions are copied, as the kernels were tuned.
    """

    def __init__(self, lowering: _Lowering):
        self.lowering = lowering
        self.interner = Interner()
        self.bound: dict[int, Var] = {}
        self.mapping: dict = {}             # the axes of the producer being expanded -> indices

    def expand(self, expr: Expr) -> Expr:
        return self._scope(expr)

    def _scope(self, expr: Expr) -> Expr:
        found = _Occurrences(self)
        found.visit(expr)
        outer, lets = self.bound, []
        self.bound = dict(outer)
        for key in found.order:             # nested producers first: a bound value uses their variables
            load = found.loads[key]
            if (found.count[key] < 2 or key not in found.unconditional or key in found.pinned
                    or key in outer):
                continue
            value = self._inline(load.tensor, tuple(self.visit(i) for i in load.indices))
            if _expr_size(value) <= _BIND_ABOVE:
                continue
            var = Var(f"{load.tensor.name}_v", value.dtype)
            lets.append((var, value))
            self.bound[key] = var
        body = self.visit(expr)
        self.bound = outer
        for var, value in reversed(lets):
            body = Let(var, value, body)
        return body

    def is_inlined(self, node: TensorLoad) -> bool:
        return self.lowering.stage_of(node.tensor).attach_type == INLINE

    def key(self, node: TensorLoad, mapping: dict) -> tuple[int, TensorLoad]:
        """The structural number of the load with its indices in the scope's variables, and that load."""
        load = TensorLoad(node.tensor, tuple(substitute(i, mapping) for i in node.indices))
        return self.interner.key(load), load

    def visit_Var(self, node: Var):
        return self.mapping.get(node, node)

    def visit_Reduce(self, node: Reduce):
        source = tuple(self._scope(s) for s in node.source)
        condition = self.visit(node.condition)
        if condition is node.condition and all(a is b for a, b in zip(source, node.source)):
            return node
        return dataclasses.replace(node, source=source, condition=condition)

    def visit_TensorLoad(self, node: TensorLoad):
        if not self.is_inlined(node):
            return self.generic_visit(node)
        if self.bound:
            var = self.bound.get(self.key(node, self.mapping)[0])
            if var is not None:
                return var
        return self._inline(node.tensor, tuple(self.visit(i) for i in node.indices))

    def _inline(self, tensor: Tensor, indices: tuple) -> Expr:
        op = _compute_op(self.lowering.stage_of(tensor))
        saved, self.mapping = self.mapping, {iv.var: i for iv, i in zip(op.axis, indices)}
        try:
            return self.visit(op.body[tensor.value_index])
        finally:
            self.mapping = saved


class _Occurrences(Visitor):
    """The loads of inlined producers in one scope of _InlineExpander, through the producers'
    bodies (each walked once per distinct load; reductions are scopes of their own): how often
    each occurs, which occur where they are evaluated whatever the data (outside a Select's
    branches and the right side of && and ||), which have indices that use a variable a Let inside
    the scope binds (pinned: they cannot be bound at its top), in the order their walks finish.
    The walk's state: `mapping` (the axes of the producer walked -> the load's indices),
    `guarded` (inside a branch) and `counting` (off while a second walk only marks loads as
    evaluated anyway)."""

    def __init__(self, expander: _InlineExpander):
        self.expander = expander
        self.count: dict[int, int] = {}
        self.loads: dict[int, TensorLoad] = {}
        self.unconditional: set[int] = set()
        self.pinned: set[int] = set()
        self.order: list[int] = []
        self.let_vars: set[Var] = set()
        self.mapping: dict = {}
        self.guarded = False
        self.counting = True

    def visit_Reduce(self, node: Reduce) -> None:
        pass

    def visit_Select(self, node: Select) -> None:
        self.visit(node.condition)
        self._guarded(node.true_value, node.false_value)

    def visit_And(self, node: And) -> None:
        self.visit(node.a)
        self._guarded(node.b)

    visit_Or = visit_And

    def visit_Let(self, node: Let) -> None:
        self.let_vars.add(node.var)
        self.generic_visit(node)

    def _guarded(self, *exprs: Expr) -> None:
        saved, self.guarded = self.guarded, True
        for e in exprs:
            self.visit(e)
        self.guarded = saved

    def visit_TensorLoad(self, node: TensorLoad) -> None:
        self.generic_visit(node)
        if not self.expander.is_inlined(node):
            return
        key, load = self.expander.key(node, self.mapping)
        first = key not in self.count
        if first:
            self.count[key] = 0
            self.loads[key] = load
            if any(free_vars(i) & self.let_vars for i in load.indices):
                self.pinned.add(key)
        self.count[key] += self.counting
        upgraded = not self.guarded and key not in self.unconditional
        if not self.guarded:
            self.unconditional.add(key)
        if first or upgraded:               # a second walk only marks what is evaluated anyway
            op = _compute_op(self.expander.lowering.stage_of(node.tensor))
            saved = self.mapping, self.counting
            self.mapping = {iv.var: i for iv, i in zip(op.axis, load.indices)}
            self.counting = self.counting and first
            self.visit(op.body[node.tensor.value_index])
            self.mapping, self.counting = saved
        if first:
            self.order.append(key)


def _expr_size(expr: Expr) -> int:
    """The number of expression nodes under `expr`, a load counting as one whatever its indices."""
    counter = _DataSize()
    counter.visit(expr)
    return counter.count


class _DataSize(Visitor):
    def __init__(self):
        self.count = 0

    def visit(self, node) -> None:
        self.count += isinstance(node, Expr)
        if not isinstance(node, TensorLoad):
            self.generic_visit(node)


class _LoadLowerer(Mutator):
    def __init__(self, lowering: _Lowering):
        self.lowering = lowering

    def visit_TensorLoad(self, node: TensorLoad):
        node = self.generic_visit(node)
        low = self.lowering
        st = low.stage_of(node.tensor)
        if isinstance(st.op, PlaceholderOp):
            return N.BufferLoad(low.param_of[st.op.output(0)], node.indices)
        info = low.info[st]
        buf = info.buffers[node.tensor.value_index]
        index = tuple(low._simplify(i - lo) for i, lo in zip(node.indices, info.region_min))
        return N.BufferLoad(buf, index)


def schedule_to_primfunc(sch: Schedule, args: Sequence[Tensor], name: str = "main") -> N.PrimFunc:
    """Bound inference and loop generation; the result still has multi-dimensional accesses."""
    return _Lowering(sch, args, name).run()
