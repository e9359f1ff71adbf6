"""Tensorization: the loops of a stage from a tensorized axis inward -> a tensor intrinsic's code
(the `tensorize` primitive; tir/build.py calls `plan` while it generates the stage's loops).

Algorithm (TVM's tensorize, on this package's loop generation):
 1. The loops under the axis (the "region") pair with the intrinsic's axes by kind and order:
    the i-th data loop with the pattern's i-th data axis, the i-th reduction loop with its i-th
    reduction axis.  Their extents must be equal, and no guard or attached stage may sit inside.
 2. The stage's body, with root axes written in leaf loops and tensor reads as buffer loads, is
    walked beside the pattern's body with its axes replaced by the paired loops: the same
    operations, dtypes and constants, the same reducer.  Each load of a pattern input pairs with
    a load of a real buffer.
 3. For every pair (and the output), the real access relative to the region's first element
    (the indices with the region's loops at 0) must equal the pattern's indices, dimension by
    dimension from the innermost; real dimensions that the region does not move may be left
    over on the outside.  That fixes the intrinsic buffer's binding: elem_offset is the row-major
    offset of the region's first element, the strides are the real buffer's row strides of the
    matched dimensions.  Declared strides and offsets must equal them; symbolic ones are bound.
 4. The region becomes a `Tensorized` statement per phase (body, or reset and update): the
    intrinsic's code with its buffers bound (what code generators print) and the pattern's own
    compute over the same bound offsets and strides (what the reference interpreter runs, so a
    wrong binding shows up as a wrong result on any machine).
Invariant: the statement computes exactly what the replaced loops computed, on the same elements.
A mismatch raises ScheduleError naming the stage, the intrinsic and what differs.
"""
from __future__ import annotations

import dataclasses
import weakref
from dataclasses import dataclass
from typing import Any, cast

from ..arith.structural import structural_equal
from ..ir import expr as E
from ..ir.expr import DATA, REDUCE, Expr, IntImm, Reduce, TensorLoad, Var, const
from ..ir.functor import Mutator, substitute
from ..te.intrin import BufferDecl, TensorIntrin
from ..te.schedule import ScheduleError, Stage
from . import nodes as N


class IntrinBuffer:
    """One operand of a tensor intrinsic as `lower_fn` sees it: a pointer (`access_ptr`),
    element access with the declared strides (`load`, `store`), shape, dtype, strides and
    elem_offset (variables until the intrinsic is matched)."""

    def __init__(self, decl: BufferDecl):
        self.decl = decl
        self.name, self.shape, self.dtype = decl.name, decl.shape, decl.dtype
        self.strides, self.elem_offset, self.scope = decl.strides, decl.elem_offset, decl.scope
        self.buffer = N.Buffer(decl.name, (1,), decl.dtype, decl.scope)
        self.data = self.buffer.data

    def offset_of(self, indices) -> Expr:
        off = cast(Expr, self.elem_offset)      # bound by the match before the code is built
        for i, s in zip(indices, self.strides):
            off = off + E.convert(i) * s
        return off

    def access_ptr(self, offset: Any = 0) -> N.AddressOf:
        """A pointer to the operand's first element (plus `offset` elements)."""
        return N.AddressOf(N.BufferLoad(self.buffer, (self.elem_offset + E.convert(offset),)))

    def load(self, *indices: Any) -> N.BufferLoad:
        return N.BufferLoad(self.buffer, (self.offset_of(indices),))

    def store(self, value: Any, *indices: Any) -> N.BufferStore:
        return N.BufferStore(self.buffer, E.convert(value), (self.offset_of(indices),))

    def __repr__(self) -> str:
        return f"IntrinBuffer({self.name}, {list(self.shape)}, {self.dtype})"


@dataclass(frozen=True)
class _Lowered:
    ins: tuple          # IntrinBuffer per input
    outs: tuple         # IntrinBuffer per output
    body: N.Stmt | None
    reset: N.Stmt | None
    update: N.Stmt | None


_LOWERED: "weakref.WeakKeyDictionary[TensorIntrin, _Lowered]" = weakref.WeakKeyDictionary()


def lowered(intrin: TensorIntrin) -> _Lowered:
    """Call the intrinsic's `lower_fn` once and check what it returned."""
    got = _LOWERED.get(intrin)
    if got is not None:
        return got
    ins = tuple(IntrinBuffer(d) for d in intrin.in_buffers)
    outs = tuple(IntrinBuffer(d) for d in intrin.out_buffers)
    result = intrin.lower_fn(list(ins), list(outs))
    parts = tuple(result) if isinstance(result, (tuple, list)) else (result, None, None)
    if len(parts) != 3:
        raise ScheduleError(f"tensor intrinsic {intrin.name}: lower_fn must return a statement or "
                            f"(body, reset, update), got {len(parts)} values")
    parts = tuple(N.Evaluate(p) if isinstance(p, E.Expr) else p for p in parts)
    for what, p in zip(("body", "reset", "update"), parts):
        if p is not None and not isinstance(p, N.Stmt):
            raise ScheduleError(f"tensor intrinsic {intrin.name}: lower_fn's {what} must be a "
                                f"loop-program statement or expression, got {type(p).__name__}")
    got = _LOWERED[intrin] = _Lowered(ins, outs, *parts)
    return got


@dataclass
class Plan:
    """The tensorized region of a stage: where it starts and its statements per phase."""

    position: int
    body: N.Stmt | None
    reset: N.Stmt | None
    update: N.Stmt | None


@dataclass
class _Binding:
    buffer: N.Buffer
    elem_offset: Expr
    strides: tuple


def plan(low: Any, st: Stage) -> Plan:
    """Match the region under the stage's tensorized axis against its intrinsic (build.py's
    `_Lowering` `low` has inferred the bounds); ScheduleError when they differ."""
    return _Matcher(low, st).run()


class _Matcher:
    def __init__(self, low: Any, st: Stage):
        self.low, self.st = low, st
        assert st.tensorized is not None, "only tensorized stages are matched"
        self.iv, self.intrin = st.tensorized
        self.info = low.info[st]
        self.where = f"tensorize on stage {st.name} with {self.intrin.name}"

    def fail(self, why: str) -> None:
        raise ScheduleError(f"{self.where}: {why}")

    def run(self) -> Plan:
        st, intrin, low = self.st, self.intrin, self.low
        leaves = st.leaf_iter_vars
        if self.iv not in leaves:
            self.fail(f"axis {self.iv.name} is no longer a loop of the stage (it was split or fused "
                      "after tensorize); tensorize the loop that is there")
        pos = leaves.index(self.iv)
        region = leaves[pos:]
        self.region_vars = {leaf.var for leaf in region}
        self._check_region(pos, region)
        if st.op.num_outputs != 1 or intrin.op.num_outputs != 1:
            self.fail("operations with several outputs cannot be tensorized")
        # pair the pattern's axes with the region's loops
        data = [leaf for leaf in region if leaf.kind == DATA]
        red = [leaf for leaf in region if leaf.kind == REDUCE]
        p_axis, p_red = list(intrin.op.axis), list(intrin.op.reduce_axis)
        if len(data) != len(p_axis) or len(red) != len(p_red):
            names = ", ".join(leaf.name for leaf in region)
            self.fail(f"the loops under {self.iv.name} ({names}) are {len(data)} data and {len(red)} "
                      f"reduction loops, the intrinsic has {len(p_axis)} data and {len(p_red)} "
                      "reduction axes")
        for leaf, pax in zip(data + red, p_axis + p_red):
            ext = self.info.dom[leaf].extent
            if not low.analyzer.can_prove(_eq(ext, pax.dom.extent)):
                self.fail(f"loop {leaf.name} has extent {ext} but the intrinsic's axis "
                          f"{pax.var.name} has extent {pax.dom.extent}")
        self.var_map = {pax.var: leaf.var for leaf, pax in zip(data + red, p_axis + p_red)}
        # compare the bodies and collect the loads of each pattern input
        body = low.body_of(st)[0]
        pattern = intrin.op.body[0]
        self.pairs: list[tuple] = []
        if isinstance(pattern, Reduce) != isinstance(body, Reduce):
            kind = "a reduction" if isinstance(pattern, Reduce) else "not a reduction"
            self.fail(f"the intrinsic's compute is {kind} but the stage's is "
                      f"{'a reduction' if isinstance(body, Reduce) else 'not'}")
        if isinstance(body, Reduce):
            self._check_reducer(pattern, body)
            pairs = zip(pattern.source, body.source)
        else:
            pairs = zip([pattern], [body])
        for p, b in pairs:
            self._match(substitute(p, self.var_map), low._rewrite(st, b), "the body")
        self.bind = self._bind_all()
        return self._build(pos, body)

    # -- checks ---------------------------------------------------------------------------------
    def _check_region(self, pos: int, region: list) -> None:
        from ..ir.functor import free_vars
        for cond in self.info.conditions:
            if free_vars(cond) & self.region_vars:
                self.fail(f"the loops under {self.iv.name} need a guard ({cond}): a split that does not "
                          "divide its extent, or a region past the tensor's edge; choose factors that "
                          "divide the extents")
        for other in self.low.emitted:
            if other.attach_stage is self.st and other.attach_ivar in region:
                self.fail(f"stage {other.name} is computed at {other.attach_ivar.name}, inside the "
                          "tensorized loops; attach it further out")

    def _check_reducer(self, pattern: Reduce, body: Reduce) -> None:
        pc, bc = pattern.combiner, body.combiner
        if pattern.dtype != body.dtype:
            self.fail(f"the dtype differs: the intrinsic accumulates in {pattern.dtype}, the stage "
                      f"in {body.dtype}")
        rename = dict(zip(tuple(pc.lhs) + tuple(pc.rhs), tuple(bc.lhs) + tuple(bc.rhs)))
        same = (len(pc.result) == len(bc.result) and len(pc.lhs) == len(bc.lhs)
                and all(structural_equal(substitute(a, rename), b) for a, b in zip(pc.result, bc.result))
                and all(structural_equal(a, b) for a, b in zip(pc.identity, bc.identity)))
        if not same:
            self.fail(f"the reducer differs: the intrinsic reduces with {pc.name} "
                      f"{list(pc.result)}, the stage with {bc.name} {list(bc.result)}")
        unconditional = [isinstance(r.condition, IntImm) and r.condition.value for r in (pattern, body)]
        if all(unconditional):
            return
        # a condition both state over the matched loops alone (a scan's k <= i): the intrinsic
        # then computes exactly the stage's terms; any other condition cannot be tensorized
        from ..ir.functor import free_vars
        mine = substitute(pattern.condition, self.var_map)
        theirs = self.low._rewrite(self.st, body.condition)
        if any(unconditional) or not free_vars(theirs) <= self.region_vars or not structural_equal(mine, theirs):
            self.fail(f"the reductions' conditions differ: the intrinsic's is {pattern.condition}, the "
                      f"stage's {body.condition}; a conditional reduction is tensorized only by an "
                      "intrinsic with the same condition over the tensorized loops")

    def _match(self, p: Any, b: Any, where: str) -> None:
        """Walk the pattern expression `p` beside the stage's `b`."""
        if isinstance(p, TensorLoad):
            if not isinstance(b, N.BufferLoad):
                self.fail(f"{where}: the intrinsic reads {p.tensor.name} where the stage computes {b}")
            if p.tensor.dtype != b.buffer.dtype:
                self.fail(f"{where}: the intrinsic's input {p.tensor.name} is {p.tensor.dtype} but the "
                          f"stage reads {b.buffer.name}, which is {b.buffer.dtype}")
            self.pairs.append((p.tensor, p.indices, b.buffer, b.indices))
            return
        if type(p) is not type(b):
            self.fail(f"{where} differs: the intrinsic has {p} where the stage has {b}")
        pd, bd = getattr(p, "dtype", None), getattr(b, "dtype", None)
        if pd != bd:
            self.fail(f"{where}: dtype differs, the intrinsic computes {p} in {pd}, the stage {b} in {bd}")
        if isinstance(p, (E.IntImm, E.FloatImm, E.StringImm)):
            if p.value != b.value:
                self.fail(f"{where}: constant {p} in the intrinsic, {b} in the stage")
            return
        if isinstance(p, Var):
            if p is not b:
                self.fail(f"{where}: the intrinsic uses {p.name} where the stage uses {b.name}")
            return
        if isinstance(p, E.Call) and p.op != b.op:
            self.fail(f"{where}: the intrinsic calls {p.op} where the stage calls {b.op}")
        for f in dataclasses.fields(p):
            x, y = getattr(p, f.name), getattr(b, f.name)
            if isinstance(x, E.Node):
                self._match(x, y, where)
            elif isinstance(x, tuple):
                if len(x) != len(y):
                    self.fail(f"{where} differs: {p} against {b}")
                for xi, yi in zip(x, y):
                    if isinstance(xi, E.Node):
                        self._match(xi, yi, where)

    # -- binding --------------------------------------------------------------------------------
    def _bind_all(self) -> dict:
        """Pattern tensor -> _Binding (for each input and the output)."""
        bind: dict = {}
        inputs = list(self.intrin.inputs)
        decls = dict(zip(inputs, self.intrin.in_buffers))
        for tensor in inputs:
            if not any(t is tensor for t, *_ in self.pairs):
                self.fail(f"the stage reads nothing where the intrinsic reads {tensor.name}")
        for tensor, p_idx, buf, b_idx in self.pairs:
            what = f"the access pattern of input {tensor.name} (stage buffer {buf.name})"
            got = self._bind(decls[tensor], substitute(tuple(p_idx), self.var_map), buf, b_idx, what)
            old = bind.get(tensor)
            if old is None:
                bind[tensor] = got
            elif old.buffer is not got.buffer or not self._same(old, got):
                self.fail(f"{what}: the intrinsic reads {tensor.name} twice, the stage reads two "
                          "different regions there")
        out_t = self.intrin.op.output(0)
        p_idx = tuple(self.var_map[iv.var] for iv in self.intrin.op.axis)
        out_buf = self.info.buffers[0]
        bind[out_t] = self._bind(self.intrin.out_buffers[0], p_idx, out_buf, self.low._out_index(self.st),
                                 f"the output region (stage buffer {out_buf.name})")
        return bind

    def _same(self, a: _Binding, b: _Binding) -> bool:
        prove = self.low.analyzer.can_prove
        return prove(_eq(a.elem_offset, b.elem_offset)) and all(
            prove(_eq(x, y)) for x, y in zip(a.strides, b.strides))

    def _bind(self, decl: BufferDecl, p_idx: tuple, buf: N.Buffer, b_idx: tuple, what: str) -> _Binding:
        simplify, prove = self.low._simplify, self.low.analyzer.can_prove
        if decl.scope != "global" and decl.scope != buf.scope:
            self.fail(f"{what}: the intrinsic wants memory scope {decl.scope!r}, the buffer is in "
                      f"{buf.scope!r}")
        zero = {v: const(0, v.dtype) for v in self.region_vars}
        base = [simplify(substitute(g, zero)) for g in b_idx]
        rel = [simplify(g - b0) for g, b0 in zip(b_idx, base)]
        row = _row_strides(buf.shape)
        strides: list = [None] * len(p_idx)
        zero_rel = [prove(_eq(r, 0)) for r in rel]
        zero_pat = [prove(_eq(p, 0)) for p in p_idx]
        failure: list = []

        def align(d: int, j: int) -> list | None:
            """[(buffer dimension, intrinsic dimension)] pairing the buffer's dimensions d, d-1, ..
            with the intrinsic's j, j-1, .. from the innermost out: a dimension that moves matches
            the intrinsic's with the same index; one that does not move (unit or fixed in the
            region) may also be skipped; the intrinsic's outer dimensions left over must be 0.
            Where both are 0 (an intrinsic's k // 4 over a region of one group of 4) they are
            matched if the rest then aligns, else the buffer's is skipped."""
            if d < 0:
                left = [jj for jj in range(j, -1, -1) if not zero_pat[jj]]
                if left:
                    failure[:] = [f"the intrinsic's dimension {left[0]} ({p_idx[left[0]]}) has no matching "
                                  f"dimension of {buf.name}"]
                    return None
                return []
            both_zero = j >= 0 and zero_rel[d] and zero_pat[j]
            tries: list[tuple[int, int] | None] = []
            if j >= 0 and not both_zero and prove(_eq(rel[d], p_idx[j])):
                tries.append((d, j))
            if zero_rel[d]:
                tries.append(None)
            if both_zero:
                tries.append((d, j))
            for pair in tries:
                rest = align(d - 1, j - 1) if pair else align(d - 1, j)
                if rest is not None:
                    return ([pair] if pair else []) + rest
            if not tries:
                expect = f"dimension {j} of the intrinsic's is {p_idx[j]}" if j >= 0 else \
                    "the intrinsic has no dimension left for it"
                failure[:] = [f"dimension {d} of {buf.name} moves as {rel[d]} inside the region, but {expect}"]
            return None

        pairs = align(len(rel) - 1, len(p_idx) - 1)
        if pairs is None:
            self.fail(f"{what}: {failure[0] if failure else 'no alignment of the dimensions'}")
        for d, jj in pairs or ():
            strides[jj] = row[d]
        for jj, st in enumerate(strides):
            if st is None:
                strides[jj] = const(0)
        offset = simplify(_flat(base, row))
        for k, (declared, real) in enumerate(zip(decl.strides, strides)):
            # a dimension the intrinsic only ever indexes at 0 has no stride that matters
            if not isinstance(declared, Var) and not zero_pat[k] and not prove(_eq(declared, real)):
                self.fail(f"{what}: the intrinsic declares stride {declared} for dimension {k} of "
                          f"{decl.name}, the region has stride {real}")
        if not isinstance(decl.elem_offset, Var) and not prove(_eq(decl.elem_offset, offset)):
            self.fail(f"{what}: the intrinsic declares elem_offset {decl.elem_offset}, the region "
                      f"starts at {offset}")
        if decl.offset_factor > 1 and not prove(_eq(E.FloorMod(offset, E.convert(decl.offset_factor)), 0)):
            self.fail(f"{what}: the region starts at element {offset}, which is not a multiple of "
                      f"the intrinsic's offset_factor {decl.offset_factor}")
        return _Binding(buf, offset, tuple(strides))

    # -- statements -----------------------------------------------------------------------------
    def _build(self, pos: int, body: Any) -> Plan:
        impl = lowered(self.intrin)
        is_reduce = isinstance(body, Reduce)
        stmts: dict[str, N.Tensorized | None] = {}
        for phase in ("body", "reset", "update"):
            code = getattr(impl, phase)
            if code is None:
                stmts[phase] = None
                continue
            if phase != "body" and not is_reduce:
                continue
            bound = self._bind_code(impl, code)
            if phase == "reset":
                # reset runs before the outer reduction loops: the inputs' pointers it may be
                # given (unused by contract) must not mention those loops
                bound = substitute(bound, {leaf.var: const(0, leaf.var.dtype)
                                           for leaf in self.st.leaf_iter_vars if leaf.kind == REDUCE})
            stmts[phase] = N.Tensorized(self.intrin.name, phase, bound, self._reference(phase),
                                        self.intrin.helpers, self.intrin.requires)
        leaves = self.st.leaf_iter_vars
        first_reduce = next((k for k, leaf in enumerate(leaves) if leaf.kind == REDUCE), len(leaves))
        if is_reduce and pos > first_reduce:
            if stmts["update"] is None:
                outside = ", ".join(leaf.name for leaf in leaves[:pos] if leaf.kind == REDUCE)
                self.fail(f"the reduction loop(s) {outside} lie outside the tensorized loops, which "
                          "needs the intrinsic's update (lower_fn returns (body, reset, update))")
        elif stmts["body"] is None:
            self.fail("the intrinsic has no body (lower_fn returned None for it)")
        return Plan(pos, stmts.get("body"), stmts.get("reset"), stmts.get("update"))

    def _bind_code(self, impl: _Lowered, code: N.Stmt) -> N.Stmt:
        mapping: dict = {}
        buffers: dict = {}
        decl_buffers = list(zip(self.intrin.inputs, impl.ins)) + [(self.intrin.op.output(0), impl.outs[0])]
        for tensor, ib in decl_buffers:
            b = self.bind[tensor]
            buffers[ib.buffer] = b.buffer
            if isinstance(ib.elem_offset, Var):
                mapping[ib.elem_offset] = b.elem_offset
            for s, v in zip(ib.strides, b.strides):
                if isinstance(s, Var):
                    mapping[s] = v
        return _Rebind(buffers, mapping).visit(code)

    def _reference(self, phase: str) -> N.Stmt:
        """The pattern's compute over the bound regions, as plain loops."""
        op = self.intrin.op
        fresh = {iv.var: Var(f"{iv.var.name}_t", iv.var.dtype) for iv in list(op.axis) + list(op.reduce_axis)}
        out_t = op.output(0)
        ob = self.bind[out_t]
        out_idx = (_flat([fresh[iv.var] for iv in op.axis], ob.strides, ob.elem_offset),)
        pattern = op.body[0]

        def loops(stmt: N.Stmt, axes) -> N.Stmt:
            for iv in reversed(list(axes)):
                stmt = N.For(fresh[iv.var], const(0), iv.dom.extent, N.SERIAL, stmt)
            return stmt

        if not isinstance(pattern, Reduce):
            value = _ToBuffers(self.bind, fresh).visit(pattern)
            return loops(N.BufferStore(ob.buffer, value, out_idx), op.axis)
        init = N.BufferStore(ob.buffer, pattern.combiner.identity[0], out_idx)
        src = _ToBuffers(self.bind, fresh).visit(pattern.source[0])
        old = N.BufferLoad(ob.buffer, out_idx)
        update = N.BufferStore(ob.buffer, pattern.combiner.combine([old], [src])[0], out_idx)
        if phase == "reset":
            return loops(init, op.axis)
        if phase == "update":
            return loops(loops(update, op.reduce_axis), op.axis)
        return loops(N.seq(init, loops(update, op.reduce_axis)), op.axis)


def _eq(a: Any, b: Any) -> Expr:
    return E.EQ(E.convert(a), E.convert(b))


def _row_strides(shape: tuple) -> list:
    strides: list = [const(1)] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
        if isinstance(strides[d], E.Expr):
            from ..arith import Analyzer
            strides[d] = Analyzer().simplify(strides[d])
    return strides


def _flat(indices, strides, offset: Expr | None = None) -> Expr:
    total = offset if offset is not None else const(0)
    for i, s in zip(indices, strides):
        total = total + i * s
    return total


class _ToBuffers(Mutator):
    """Pattern tensor loads -> loads of the bound buffers at flat offsets (fresh loop vars)."""

    def __init__(self, bind: dict, fresh: dict):
        self.bind, self.fresh = bind, fresh

    def visit_Var(self, node: Var):
        return self.fresh.get(node, node)

    def visit_TensorLoad(self, node: TensorLoad):
        b = self.bind[node.tensor]
        idx = [self.visit(i) for i in node.indices]
        return N.BufferLoad(b.buffer, (_flat(idx, b.strides, b.elem_offset),))


class _Rebind(Mutator):
    """The intrinsic's code with its placeholder buffers and variables bound."""

    def __init__(self, buffers: dict, mapping: dict):
        self.buffers, self.mapping = buffers, mapping

    def visit_Var(self, node: Var):
        return self.mapping.get(node, node)

    def visit_BufferLoad(self, node: N.BufferLoad):
        node = self.generic_visit(node)
        buf = self.buffers.get(node.buffer)
        return N.BufferLoad(buf, node.indices) if buf is not None else node

    def visit_BufferStore(self, node: N.BufferStore):
        node = self.generic_visit(node)
        buf = self.buffers.get(node.buffer)
        return N.BufferStore(buf, node.value, node.indices) if buf is not None else node
