"""rfactor: factor a reduction into a partial reduction over one of its reduce axes and a final
reduction of the partials (the schedule primitive of TVM, `Schedule.rfactor`).

Given a stage B = reduce_{leaves} f(...) and one of its reduce leaves k (a root reduce axis, or
a part of one made by split/fuse), rfactor builds
    BF[k, i...] = reduce over the other reduce leaves of f(...)     (a new stage, producer of B)
    B[i...]     = reduce_{k'} BF[k', i...]                          (B's stage, reset to the new op)
Every root reduce variable is rebuilt from the reduce leaves through the stage's relations
(parent = outer * factor + inner; outer = fused // n, inner = fused % n), and a split that does
not divide adds `parent < extent` to BF's condition, so BF adds up exactly the terms B did.

With `factor_axis` = p, k is BF's axis p instead of its first (BF[i0, ..., k, ...]): the
position decides BF's memory order, so p = ndim puts the partials of one output next to each
other (a vector of them per output, as a local buffer).

Invariant: for every output index, combining BF over k' gives B's old value (the combiner is
commutative and associative, and each term of the old reduction lands in exactly one BF slot).
A reduce axis may run over a shape expression (a kernel for any size): a split of it keeps the
guard, as a split that does not divide does.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, cast

from ..ir.expr import DATA, REDUCE, Expr, IntImm, IterVar, Range, Reduce, Select, Var, const, convert
from ..ir.functor import substitute
from .tensor import ComputeOp, Tensor

if TYPE_CHECKING:
    from .schedule import Schedule, Stage


def rfactor(sch: "Schedule", tensor: Tensor, axis: IterVar, factor_axis: int = 0) -> Tensor:
    """The partial-reduction tensor BF (shape (extent of `axis`, *tensor.shape), the factored
    axis moved to position `factor_axis`); `tensor`'s stage becomes a reduction of BF over it."""
    from .schedule import ROOT, Fuse, ScheduleError, Split, Stage
    st: Stage = sch[tensor]
    op = st._check_compute("rfactor")
    st._check_leaf(axis, "rfactor")
    if not op.reduce_axis or axis.kind != REDUCE:
        raise ScheduleError(f"rfactor on stage {st.name}: axis {axis.name} is not a reduction axis")
    if op.num_outputs != 1:
        raise ScheduleError(f"rfactor on stage {st.name}: reductions with several outputs are not supported")
    if not 0 <= factor_axis <= len(op.axis):
        raise ScheduleError(f"rfactor on stage {st.name}: factor_axis {factor_axis} is outside 0..{len(op.axis)}")
    red = cast(Reduce, op.body[0])
    # extents of every reduce iteration variable, from the roots through the relations: ints, or
    # shape expressions where a reduce axis runs over a shape variable (shape_generic.py)
    ext: dict[IterVar, int | Expr] = {}
    for iv in op.reduce_axis:
        dom = cast(Range, iv.dom)
        if not isinstance(dom.min, IntImm):
            raise ScheduleError(f"rfactor on stage {st.name}: reduce axis {iv.name} has a symbolic start")
        ext[iv] = int(dom.extent.value) if isinstance(dom.extent, IntImm) else dom.extent
    for rel in st.relations:
        if isinstance(rel, Split) and rel.parent.kind == REDUCE:
            amount = rel.factor if rel.factor is not None else rel.nparts
            if not isinstance(amount, IntImm):
                raise ScheduleError(f"rfactor on stage {st.name}: split of {rel.parent.name} has a symbolic factor")
            n, a = ext[rel.parent], int(amount.value)
            parts = -(-n // a) if isinstance(n, int) else (n + (a - 1)) // a
            outer, inner = (parts, a) if rel.factor is not None else (a, parts)
            ext[rel.outer], ext[rel.inner] = outer, inner
        elif isinstance(rel, Fuse) and rel.outer.kind == REDUCE:
            ext[rel.fused] = ext[rel.outer] * ext[rel.inner]
    reduce_leaves = [iv for iv in st.leaf_iter_vars if iv.kind == REDUCE]
    # fresh variables for BF: k becomes a data axis, the other leaves its reduce axes
    k_data = IterVar(Range(const(0), convert(ext[axis])), Var(axis.name + ".rf"), DATA)
    fresh = {iv: IterVar(Range(const(0), convert(ext[iv])), Var(iv.name + ".r"), REDUCE)
             for iv in reduce_leaves if iv is not axis}
    value: dict[IterVar, Expr] = {axis: k_data.var}
    value.update({iv: f.var for iv, f in fresh.items()})
    conds: list[Expr] = []
    for rel in reversed(st.relations):
        if isinstance(rel, Split) and rel.parent.kind == REDUCE:
            factor = ext[rel.inner]
            value[rel.parent] = value[rel.outer] * factor + value[rel.inner]
            covered, parent = ext[rel.outer], ext[rel.parent]
            if not (isinstance(covered, int) and isinstance(factor, int) and isinstance(parent, int)) \
                    or covered * factor != parent:
                conds.append(value[rel.parent] < parent)
        elif isinstance(rel, Fuse) and rel.outer.kind == REDUCE:
            n = ext[rel.inner]
            value[rel.outer] = value[rel.fused] // n
            value[rel.inner] = value[rel.fused] % n
    data = [IterVar(Range(const(0), cast(Range, iv.dom).extent), Var(iv.name), DATA) for iv in op.axis]
    mapping = {iv.var: v for iv, v in zip(op.axis, (d.var for d in data))}
    mapping.update({iv.var: value[iv] + cast(Range, iv.dom).min for iv in op.reduce_axis})
    cond = substitute(red.condition, mapping)
    for c in conds:
        cond = c if isinstance(cond, IntImm) and cond.value else cond & c
    source = tuple(substitute(s, mapping) for s in red.source)
    if fresh:
        rf_body: Expr = Reduce(red.combiner, source, tuple(fresh.values()), cond)
    elif isinstance(cond, IntImm) and cond.value:
        rf_body = source[0]
    else:
        rf_body = Select(cond, source[0], red.combiner.identity[0])
    rf_op = ComputeOp(f"{op.name}.rf", data[:factor_axis] + [k_data] + data[factor_axis:], [rf_body], op.tag,
                      op.attrs)
    bf = rf_op.output(0)
    # B: reduce BF over a new reduce axis of k's extent
    k_red = IterVar(Range(const(0), convert(ext[axis])), Var(axis.name + ".v"), REDUCE)
    outs = tuple(iv.var for iv in op.axis)
    index = outs[:factor_axis] + (k_red.var,) + outs[factor_axis:]
    new_b = ComputeOp(op.name, op.axis, [Reduce(red.combiner, (bf[index],), (k_red,), const(True))], op.tag,
                      op.attrs)
    roots = list(new_b.axis) + list(new_b.reduce_axis)
    st.op = new_b
    st.all_iter_vars, st.leaf_iter_vars, st.relations = list(roots), list(roots), []
    st.iter_var_attrs = {}
    st.attach_type = st.attach_type if st.attach_type != "inline" else ROOT
    sch.stage_map[new_b] = st
    rf_stage = Stage(rf_op, sch)
    sch.stage_map[rf_op] = rf_stage
    sch.stages.insert(sch.stages.index(st), rf_stage)
    return bf
