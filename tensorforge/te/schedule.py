"""Schedules: how each operation's loops are split, ordered, annotated and placed.

A `Stage` is a record; primitives only edit it (append a relation, reorder leaves, set an
attachment or annotation) and check their arguments, raising `ScheduleError` that names the stage
and axis.  `tir/build.py` interprets the record (bound inference, then loop generation).

Relations between iteration variables:
  Split(parent -> outer, inner): parent = outer * factor + inner (+ parent's min)
  Fuse(outer, inner -> fused):   outer = fused // extent(inner), inner = fused % extent(inner)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence, cast

from ..ir.expr import REDUCE, THREAD, Expr, IntImm, IterVar, TensorLoad, Var, convert
from .tensor import ComputeOp, Operation, Tensor

ROOT, INLINE, SCOPE = "root", "inline", "scope"


class ScheduleError(ValueError):
    """A schedule primitive was misused; the message says which stage and axis."""


@dataclass(frozen=True, eq=False)
class Split:
    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: Expr | None
    nparts: Expr | None


@dataclass(frozen=True, eq=False)
class Fuse:
    outer: IterVar
    inner: IterVar
    fused: IterVar


@dataclass
class IterVarAttr:
    """Annotations of one leaf: loop kind, thread binding, pragmas, prefetches."""

    kind: str = "serial"            # serial | vectorized | unrolled | parallel | thread_binding
    bind_thread: IterVar | None = None
    pragmas: list = field(default_factory=list)
    prefetches: list = field(default_factory=list)      # (tensor, offset in iterations)


class Stage:
    """How one operation is computed: its iteration variables, their relations and annotations,
    and where it is attached (at the root, inlined into its consumers, or inside a loop of a
    consumer stage)."""

    def __init__(self, op: Operation, schedule: "Schedule"):
        self.op = op
        self.origin_op = op
        self.schedule = schedule
        roots = list(op.axis) + list(op.reduce_axis) if isinstance(op, ComputeOp) else []
        self.all_iter_vars: list[IterVar] = list(roots)
        self.leaf_iter_vars: list[IterVar] = list(roots)
        self.relations: list = []
        self.attach_type = ROOT
        self.attach_stage: Stage | None = None
        self.attach_ivar: IterVar | None = None
        self.scope = "global"
        self.iter_var_attrs: dict[IterVar, IterVarAttr] = {}
        self.is_output = False
        self.tensorized: tuple[IterVar, Any] | None = None   # (leaf, TensorIntrin)

    # -- helpers --------------------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"stage({self.op.name})"

    @property
    def name(self) -> str:
        return self.op.name

    def _check_compute(self, what: str) -> ComputeOp:
        if not isinstance(self.op, ComputeOp):
            raise ScheduleError(f"{what}: stage {self.name} is a placeholder; it has no loops to schedule")
        return self.op

    def _check_leaf(self, iv: Any, what: str) -> IterVar:
        self._check_compute(what)
        if not isinstance(iv, IterVar):
            raise ScheduleError(f"{what} on stage {self.name}: expected an IterVar, got {iv!r}")
        if iv in self.leaf_iter_vars:
            return iv
        if iv in self.all_iter_vars:
            raise ScheduleError(f"{what} on stage {self.name}: axis {iv.name} was already split or "
                                "fused; use the axes that primitive returned")
        owner = self.schedule._owner_of(iv)
        where = f"it belongs to stage {owner.name}" if owner else "it is not an axis of any stage"
        raise ScheduleError(f"{what} on stage {self.name}: axis {iv.name} is not an axis of this stage; {where}")

    def _new_iv(self, name: str, kind: str) -> IterVar:
        iv = IterVar(None, Var(name), kind)
        self.all_iter_vars.append(iv)
        return iv

    def _attr(self, iv: IterVar) -> IterVarAttr:
        return self.iter_var_attrs.setdefault(iv, IterVarAttr())

    # -- loop transformations -------------------------------------------------------------------
    def split(self, parent: IterVar, factor: Any = None, nparts: Any = None) -> tuple[IterVar, IterVar]:
        """Split `parent` into (outer, inner) with inner extent `factor`, or outer extent `nparts`.
        A factor that does not divide the extent leaves a guarded tail."""
        self._check_leaf(parent, "split")
        if (factor is None) == (nparts is None):
            raise ScheduleError(f"split on stage {self.name}, axis {parent.name}: give exactly one of factor or nparts")
        amount = convert(factor if factor is not None else nparts)
        if isinstance(amount, IntImm) and amount.value <= 0:
            which = "factor" if factor is not None else "nparts"
            raise ScheduleError(f"split on stage {self.name}, axis {parent.name}: {which} must be positive, got {amount.value}")
        if parent.kind == THREAD or self._attr(parent).kind != "serial":
            raise ScheduleError(f"split on stage {self.name}: axis {parent.name} is already annotated "
                                f"({self._attr(parent).kind}); split before annotating")
        outer = self._new_iv(parent.name + ".outer", parent.kind)
        inner = self._new_iv(parent.name + ".inner", parent.kind)
        self.relations.append(Split(parent, outer, inner, amount if factor is not None else None,
                                    amount if nparts is not None else None))
        k = self.leaf_iter_vars.index(parent)
        self.leaf_iter_vars[k:k + 1] = [outer, inner]
        return outer, inner

    def tile(self, x: IterVar, y: IterVar, x_factor: Any, y_factor: Any):
        """Split x and y and order the result (x.outer, y.outer, x.inner, y.inner)."""
        xo, xi = self.split(x, factor=x_factor)
        yo, yi = self.split(y, factor=y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def fuse(self, *ivs: IterVar) -> IterVar:
        """Fuse adjacent axes (outermost first) into one."""
        if len(ivs) == 1 and isinstance(ivs[0], (list, tuple)):
            ivs = tuple(ivs[0])
        if not ivs:
            raise ScheduleError(f"fuse on stage {self.name}: no axes given")
        for iv in ivs:
            self._check_leaf(iv, "fuse")
        result = ivs[0]
        for iv in ivs[1:]:
            result = self._fuse2(result, iv)
        return result

    def _fuse2(self, outer: IterVar, inner: IterVar) -> IterVar:
        pos_o, pos_i = self.leaf_iter_vars.index(outer), self.leaf_iter_vars.index(inner)
        if pos_i != pos_o + 1:
            raise ScheduleError(f"fuse on stage {self.name}: axes {outer.name} and {inner.name} are not "
                                "adjacent (outer first); reorder them first")
        if outer.kind != inner.kind:
            raise ScheduleError(f"fuse on stage {self.name}: cannot fuse a data axis with a reduction "
                                f"axis ({outer.name}, {inner.name})")
        for iv in (outer, inner):
            if self._attr(iv).kind != "serial":
                raise ScheduleError(f"fuse on stage {self.name}: axis {iv.name} is already annotated "
                                    f"({self._attr(iv).kind})")
        fused = self._new_iv(f"{outer.name}.{inner.name}.fused", outer.kind)
        self.relations.append(Fuse(outer, inner, fused))
        self.leaf_iter_vars[pos_o:pos_i + 1] = [fused]
        return fused

    def reorder(self, *ivs: IterVar) -> None:
        """Put the given axes in this order, in the positions they occupy now."""
        if len(ivs) == 1 and isinstance(ivs[0], (list, tuple)):
            ivs = tuple(ivs[0])
        for iv in ivs:
            self._check_leaf(iv, "reorder")
        if len(set(ivs)) != len(ivs):
            raise ScheduleError(f"reorder on stage {self.name}: an axis is given twice")
        positions = sorted(self.leaf_iter_vars.index(iv) for iv in ivs)
        for pos, iv in zip(positions, ivs):
            self.leaf_iter_vars[pos] = iv

    # -- annotations ----------------------------------------------------------------------------
    def _annotate(self, iv: IterVar, kind: str, what: str) -> None:
        self._check_leaf(iv, what)
        attr = self._attr(iv)
        if attr.kind != "serial" and attr.kind != kind:
            raise ScheduleError(f"{what} on stage {self.name}: axis {iv.name} is already {attr.kind}")
        attr.kind = kind

    def vectorize(self, iv: IterVar) -> None:
        """Run the loop over `iv` as SIMD lanes (a constant extent is needed for real vectors)."""
        self._check_leaf(iv, "vectorize")
        if iv.kind == REDUCE:
            raise ScheduleError(f"vectorize on stage {self.name}: axis {iv.name} is a reduction axis; "
                                "vectorize a data axis (reorder it innermost)")
        self._annotate(iv, "vectorized", "vectorize")

    def unroll(self, iv: IterVar) -> None:
        self._annotate(iv, "unrolled", "unroll")

    def parallel(self, iv: IterVar) -> None:
        """Run the iterations of `iv` on the thread pool."""
        self._check_leaf(iv, "parallel")
        if iv.kind == REDUCE:
            raise ScheduleError(f"parallel on stage {self.name}: axis {iv.name} is a reduction axis; "
                                "parallel iterations would race on the same output")
        self._annotate(iv, "parallel", "parallel")

    def bind(self, iv: IterVar, thread_ivar: IterVar) -> None:
        """Bind `iv` to a GPU thread axis made by `te.thread_axis`."""
        self._check_leaf(iv, "bind")
        if not isinstance(thread_ivar, IterVar) or thread_ivar.kind != THREAD:
            raise ScheduleError(f"bind on stage {self.name}: {thread_ivar!r} is not a te.thread_axis")
        self._annotate(iv, "thread_binding", "bind")
        self._attr(iv).bind_thread = thread_ivar

    def pragma(self, iv: IterVar, name: str, value: Any = None) -> None:
        """Attach a pragma (printed by the code generator) to the loop over `iv`."""
        self._check_leaf(iv, "pragma")
        if not isinstance(name, str) or not name.replace("_", "").isalnum():
            raise ScheduleError(f"pragma on stage {self.name}: bad pragma name {name!r}")
        self._attr(iv).pragmas.append((name, value))

    def prefetch(self, tensor: Tensor, iv: IterVar, offset: int) -> None:
        """At the start of each iteration of the loop over `iv`, ask the cache for what this
        stage reads of `tensor` `offset` iterations later (the loops inside `iv` at their first
        iteration, one prefetch per 64-byte line of the run the last index sweeps over them).
        A hint only: results never change, and an address past the tensor's end (the last
        iterations of `iv`) is harmless, a prefetch never faults."""
        self._check_leaf(iv, "prefetch")
        if not isinstance(offset, int) or offset <= 0:
            raise ScheduleError(f"prefetch on stage {self.name}: the offset must be a positive number of "
                                f"iterations, got {offset!r}")
        self._attr(iv).prefetches.append((tensor, offset))

    # -- placement ------------------------------------------------------------------------------
    def compute_at(self, parent: "Stage", iv: IterVar) -> None:
        """Compute this stage inside the loop over `iv` of consumer stage `parent`, just the region
        that one iteration of that loop needs."""
        self._check_compute("compute_at")
        if not isinstance(parent, Stage):
            raise ScheduleError(f"compute_at on stage {self.name}: expected a stage (s[T]), got {parent!r}")
        if self.is_output:
            raise ScheduleError(f"compute_at on stage {self.name}: an output stage must be computed at the root")
        if parent is self:
            raise ScheduleError(f"compute_at on stage {self.name}: a stage cannot be attached to itself")
        parent._check_leaf(iv, f"compute_at({self.name})")
        if not self.schedule._reads(parent, self):
            raise ScheduleError(f"compute_at on stage {self.name}: stage {parent.name} does not consume "
                                f"{self.name}; attach a stage only inside a loop of a stage that reads it")
        self.attach_type, self.attach_stage, self.attach_ivar = SCOPE, parent, iv

    def compute_inline(self) -> None:
        """Substitute this stage's expression into its consumers (no buffer, no loops)."""
        if self._check_compute("compute_inline").reduce_axis:
            raise ScheduleError(f"compute_inline on stage {self.name}: a reduction cannot be inlined")
        if self.is_output:
            raise ScheduleError(f"compute_inline on stage {self.name}: an output cannot be inlined")
        self.attach_type, self.attach_stage, self.attach_ivar = INLINE, None, None

    def compute_root(self) -> None:
        self._check_compute("compute_root")
        self.attach_type, self.attach_stage, self.attach_ivar = ROOT, None, None

    def set_scope(self, scope: str) -> None:
        """Keep this stage's buffer in the memory `scope` ("global", "local", "shared", ...)."""
        if not isinstance(scope, str) or not scope:
            raise ScheduleError(f"set_scope on stage {self.name}: bad scope {scope!r}")
        if self.is_output:
            raise ScheduleError(f"set_scope on stage {self.name}: an output lives in global memory")
        self.scope = scope

    def tensorize(self, iv: IterVar, intrin: Any) -> None:
        """Replace the loops from `iv` inward (and the body) by the tensor intrinsic `intrin`
        (te.decl_tensor_intrin).  Lowering checks that they compute the intrinsic's pattern and
        raises ScheduleError naming what differs."""
        from .intrin import TensorIntrin
        self._check_leaf(iv, "tensorize")
        if not isinstance(intrin, TensorIntrin):
            raise ScheduleError(f"tensorize on stage {self.name}: expected a tensor intrinsic from "
                                f"te.decl_tensor_intrin, got {intrin!r}")
        if self.tensorized is not None and self.tensorized[0] is not iv:
            raise ScheduleError(f"tensorize on stage {self.name}: axis {self.tensorized[0].name} is "
                                "already tensorized; a stage takes one tensor intrinsic")
        self.tensorized = (iv, intrin)


class Schedule:
    """The stages of all operations reachable from the outputs, producers first."""

    def __init__(self, outputs: Sequence[Operation]):
        self.outputs = list(outputs)
        self.stages: list[Stage] = []
        self.stage_map: dict[Operation, Stage] = {}
        seen: set = set()

        def visit(op: Operation) -> None:
            if op in seen:
                return
            seen.add(op)
            for t in op.input_tensors():
                visit(t.op)
            stage = Stage(op, self)
            self.stages.append(stage)
            self.stage_map[op] = stage

        for op in self.outputs:
            visit(op)
        for op in self.outputs:
            self.stage_map[op].is_output = True

    def __getitem__(self, key: Tensor | Operation) -> Stage:
        op = key.op if isinstance(key, Tensor) else key
        stage = self.stage_map.get(op)
        if stage is None:
            raise ScheduleError(f"{getattr(op, 'name', op)!r} is not part of this schedule")
        return stage

    def _owner_of(self, iv: IterVar) -> Stage | None:
        for st in self.stages:
            if iv in st.all_iter_vars:
                return st
        return None

    def _reads(self, consumer: Stage, producer: Stage) -> bool:
        """Whether `consumer` depends on `producer`'s output, directly or through other stages."""
        seen: set = set()
        todo = [consumer]
        while todo:
            st = todo.pop()
            for t in st.op.input_tensors():
                dep = self.stage_map.get(t.op)
                if dep is producer:
                    return True
                if dep is not None and dep not in seen:
                    seen.add(dep)
                    todo.append(dep)
        return False

    def consumers(self, producer: Stage) -> list[Stage]:
        return [st for st in self.stages if st is not producer and any(
            self.stage_map.get(t.op) is producer for t in st.op.input_tensors())]

    # -- cache stages ---------------------------------------------------------------------------
    def cache_read(self, tensor: Tensor, scope: str, readers: Sequence[Any]) -> Tensor:
        """A stage that copies `tensor` into `scope`; the given readers read the copy instead."""
        producer = self[tensor]
        readers = list(readers) if isinstance(readers, (list, tuple)) else [readers]
        if not readers:
            raise ScheduleError(f"cache_read of {tensor.name}: give at least one reader")
        reader_stages = [self[r] for r in readers]
        for st in reader_stages:
            if tensor not in st.op.input_tensors():
                raise ScheduleError(f"cache_read of {tensor.name}: stage {st.name} does not read it")
        from .tensor import compute
        cache = cast(Tensor, compute(tensor.shape, lambda *i: tensor[i], name=f"{tensor.name}.{scope}"))  # one body
        from ..ir.functor import Mutator

        class _Redirect(Mutator):
            def visit_TensorLoad(self, node: TensorLoad):
                node = self.generic_visit(node)
                return TensorLoad(cache, node.indices) if node.tensor is tensor else node

        for st in reader_stages:
            op = st._check_compute(f"cache_read of {tensor.name}")   # a reader computes something
            new_op = op.with_body([_Redirect().visit(b) for b in op.body])
            self.stage_map[new_op] = st
            st.op = new_op
        stage = Stage(cache.op, self)
        stage.scope = scope
        self.stage_map[cache.op] = stage
        self.stages.insert(self.stages.index(producer) + 1, stage)
        return cache

    def rfactor(self, tensor: Tensor, axis: IterVar, factor_axis: int = 0) -> Tensor:
        """Factor `tensor`'s reduction over its reduce leaf `axis` into a new stage of partial
        results (returned, shape (extent of axis, *shape), the factored axis at position
        `factor_axis`) that `tensor` then reduces (te/rfactor.py)."""
        from .rfactor import rfactor
        return rfactor(self, tensor, axis, factor_axis)

    def cache_write(self, tensor: Tensor, scope: str) -> Tensor:
        """Compute `tensor` into a `scope` buffer first; the original stage then copies it out.
        Call it before scheduling the stage."""
        stage = self[tensor]
        op = stage.op
        if not isinstance(op, ComputeOp):
            raise ScheduleError(f"cache_write of {tensor.name}: it is a placeholder")
        if op.num_outputs != 1:
            raise ScheduleError(f"cache_write of {tensor.name}: operations with several outputs are not supported")
        if stage.relations or stage.iter_var_attrs or stage.leaf_iter_vars != (
                list(op.axis) + list(op.reduce_axis)):
            raise ScheduleError(f"cache_write of {tensor.name}: call cache_write before scheduling stage {stage.name}")
        from ..ir.functor import substitute
        from .tensor import compute
        body = op.body[0]
        cache = cast(Tensor, compute(op.shape, lambda *i: substitute(body, {iv.var: v for iv, v in zip(op.axis, i)}),
                                     name=f"{op.name}.{scope}"))  # one body, so one tensor
        new_op = ComputeOp(op.name, op.axis, [cache[tuple(iv.var for iv in op.axis)]], op.tag, op.attrs)
        stage.op = new_op
        stage.all_iter_vars = list(op.axis)
        stage.leaf_iter_vars = list(op.axis)
        self.stage_map[new_op] = stage
        cache_stage = Stage(cache.op, self)
        cache_stage.scope = scope
        self.stage_map[cache.op] = cache_stage
        self.stages.insert(self.stages.index(stage), cache_stage)
        return cache


def create_schedule(ops: Operation | Tensor | Sequence[Operation | Tensor]) -> Schedule:
    """A schedule for the given output operations (every stage starts at the root, unsplit)."""
    items = ops if isinstance(ops, (list, tuple)) else [cast("Operation | Tensor", ops)]
    return Schedule([t.op if isinstance(t, Tensor) else t for t in items])
