"""Kernels over shapes that vary: a static stretch of element-wise ops and reductions compiled
once with shape variables, for every size its varying dimensions take.

A staged model (staged.py) compiles each stretch of its program per concrete shape.  That suits
convolutions and products, whose templates need constants, but not the cheap ops around them: a
stretch after NonZero, Compress or NonMaxSuppression sees a new number of rows on nearly every
call, and each compiled a specialization of its own (about 110 ms for a few element-wise ops and
a sum, where running them takes microseconds); a Loop body that grows a tensor compiled once per
iteration.  So, as a JIT that marks a dimension dynamic once it changes: when a stretch that was
compiled for one shape meets another of the same structure (`structure_key`: the same ops,
attributes, parameters and constants read; only input dimensions differ), and every op in it is
injective, a reduction or one of GENERIC_OPS (softmax), it is compiled once more with a shape
variable per varying dimension and serves every later shape that agrees with it
(`GenericStretch.accepts`; sizes below MIN_SIZE keep specializations of their own).

Each fused group of the stretch becomes one kernel whose buffers have symbolic dimensions
(te.var); a dimension that is an expression of them (n + 1 after a concat) becomes a variable of
the kernel's own.  A kernel is called with the arrays, whose shapes bind its variables
(runtime/module.py).  The schedule (`_schedule_stage`) vectorizes the trailing constant
dimensions and runs the leading ones on the thread pool when a call has work enough (the
parallel loop's `if` clause, codegen/c.py); a reduction over a varying length or a constant one
of two vectors or more keeps vector partial sums (te/rfactor.py takes a varying extent), in
float64 over a varying length (ops/reduce.py).  Where the innermost dimension varies, its split's
tail guard is peeled at run time (the loop splits at n // 16, tir/passes/partition_loops.py), so
the head is vectors.  Intermediate and output arrays are allocated per call from the shapes
evaluated on the bound variables.  Anything else (another op pattern, an op whose compute needs
constant shapes, a stretch whose structure changes with the shape, kernels that do not build)
keeps the per-shape specializations, with the reason in the model's info.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from . import te
from .arith.structural import structural_equal
from .graph.fuse import FusedGroup, fuse
from .graph.ir import Graph, Value, freeze_attr
from .ir import expr as E
from .ir.functor import substitute
from .ops import registry
from .ops.registry import INJECTIVE, REDUCTION
from .ops.schedules.common import PARALLEL_MIN_ELEMS
from .ops.schedules.cpu import innermost_read, lane_partials
from .runtime.compile import CompileError
from .runtime.module import evaluate_shape
from .te.schedule import INLINE
from .te.tensor import ComputeOp

GENERIC_PATTERNS = (INJECTIVE, REDUCTION)
# ops of another pattern whose tensor expression is a chain of reductions and element-wise
# stages (the rows templates serve them in static kernels)
GENERIC_OPS = frozenset({"softmax", "log_softmax"})
# the least size a shape variable takes: a dimension of 1 (or 0) can change what the converter
# makes of a node (a Squeeze without axes drops it, a broadcast stretches it), so those sizes
# keep specializations of their own
MIN_SIZE = 2


class NotGeneric(Exception):
    """The stretch cannot run on shape-generic kernels (the reason is the message)."""


def structure_key(graph: Graph) -> tuple:
    """What a stretch's kernels depend on besides its input shapes: its ops and attributes in
    order, how they connect, the input dtypes and ranks, and the parameters' contents."""
    ids: dict[Value, tuple] = {}
    for k, v in enumerate(graph.inputs):
        ids[v] = ("in", k)
    for k, v in enumerate(graph.params):
        ids[v] = ("param", k)
    nodes = []
    for j, n in enumerate(graph.nodes):
        nodes.append((n.op, tuple(None if v is None else ids[v] for v in n.inputs),
                      tuple(sorted((key, freeze_attr(val)) for key, val in n.attrs.items())),
                      tuple(v.dtype for v in n.outputs)))
        for k, v in enumerate(n.outputs):
            ids[v] = ("node", j, k)
    return (tuple((v.dtype, v.ndim) for v in graph.inputs),
            tuple(freeze_attr(np.asarray(a)) for a in graph.params.values()), tuple(nodes),
            tuple(ids[v] for v in graph.outputs))


def candidate(graph: Graph) -> bool:
    """Whether every op of `graph` may run generic (injective, a reduction, a softmax)."""
    return all(_generic_op(n.op) for n in graph.nodes)


def varying_dims(old: Sequence[tuple], new: Sequence[tuple]) -> dict:
    """{(input, axis): symbol number} for the input dimensions that differ between two shape
    lists of the same ranks; dimensions that were equal to each other in both share a symbol."""
    symbols: dict[tuple, int] = {}
    out: dict = {}
    for k, (a, b) in enumerate(zip(old, new)):
        for axis, (da, db) in enumerate(zip(a, b)):
            if da != db:
                out[(k, axis)] = symbols.setdefault((da, db), len(symbols))
    return out


class GenericStretch:
    """A stretch's graph on kernels with shape variables; called like a compiled Model with the
    stretch's input arrays, it returns the output arrays.  `accepts(arrays)` says whether their
    shapes agree with it (the constant dimensions equal, each variable bound to one value of at
    least MIN_SIZE)."""

    def __init__(self, graph: Graph, dims: dict, target):
        from .build_module import build, lower
        from .target import Target
        self.target = Target.parse(target)
        self.graph = graph
        bad = sorted({n.op for n in graph.nodes if not _generic_op(n.op)})
        if bad:
            raise NotGeneric(f"op(s) {', '.join(bad)} need constant shapes")
        variables = {s: te.var(f"n{s}", "int64") for s in sorted(set(dims.values()))}
        self.inputs = tuple(graph.inputs)
        self.input_dims = [tuple(variables[dims[(k, a)]] if (k, a) in dims else d for a, d in enumerate(v.shape))
                           for k, v in enumerate(graph.inputs)]
        self.variables = tuple(variables.values())
        shapes: dict[Value, tuple] = {v: s for v, s in zip(graph.inputs, self.input_dims)}
        shapes.update({v: tuple(arr.shape) for v, arr in graph.params.items()})
        funcs, self.steps = [], []
        for k, group in enumerate(fuse(graph)):
            if group.pattern not in GENERIC_PATTERNS and not (group.master and group.master.op in GENERIC_OPS):
                raise NotGeneric(f"group {group.name} is {group.pattern}")
            name = f"g{k}_{group.name[6:30]}".replace(".", "_")
            local, back = _kernel_shapes(group, shapes)
            try:
                sch, args, outs = _group_schedule(group, local, self.target)
                funcs.append(lower(sch, args, name, target=self.target))
            except (registry.OpError, AttributeError, TypeError, ValueError) as err:
                raise NotGeneric(f"group {group.name}: {err}") from err
            for v, t in zip(group.outputs, outs):
                shapes[v] = tuple(_global_dim(d, back) for d in t.shape)
            self.steps.append((name, group.inputs, group.outputs))
        self.shapes = shapes
        try:
            self.module = build(funcs, self.target) if funcs else None
        except (CompileError, ValueError) as err:       # a stretch the specializations still run
            raise NotGeneric(f"its kernels did not build: {str(err).splitlines()[0]}") from err
        self.kernels = {name: self.module.get_function(name) for name, _, _ in self.steps} if funcs else {}

    def bind(self, arrays: Sequence) -> dict | None:
        """The variables' values given the input arrays, or None when they do not fit."""
        env: dict = {}
        if len(arrays) != len(self.inputs):
            return None
        for v, dims, arr in zip(self.inputs, self.input_dims, arrays):
            if not isinstance(arr, np.ndarray) or arr.dtype.name != v.dtype or arr.ndim != len(dims):
                return None
            for d, got in zip(dims, arr.shape):
                if isinstance(d, E.Var):
                    if got < MIN_SIZE or env.setdefault(d, got) != got:
                        return None
                elif d != got:
                    return None
        return env

    def accepts(self, arrays: Sequence) -> bool:
        return self.bind(arrays) is not None

    def __call__(self, *arrays) -> list:
        env = self.bind(arrays)
        if env is None:
            raise ValueError(f"{self.graph.name}: input shapes {[np.shape(a) for a in arrays]} do not fit "
                             f"the shape-generic kernels (inputs {self.input_dims})")
        values: dict[Value, np.ndarray] = dict(zip(self.inputs, arrays))
        values.update(self.graph.params)
        for name, ins, outs in self.steps:
            results = [np.empty(tuple(evaluate_shape(d, env) for d in self.shapes[v]), v.dtype) for v in outs]
            self.kernels[name](*[values[v] for v in ins], *results)
            values.update(zip(outs, results))
        return [values[v] for v in self.graph.outputs]


def _generic_op(op: str) -> bool:
    """Whether `op` may run on a shape-generic kernel (injective, a reduction, or GENERIC_OPS)."""
    opdef = registry.get(op)
    return op in GENERIC_OPS or (not opdef.is_opaque_kernel and opdef.pattern in GENERIC_PATTERNS)


def _kernel_shapes(group: FusedGroup, shapes: dict) -> tuple[dict, dict]:
    """The group's input shapes as its kernel takes them: a dimension that is an expression of
    the stretch's variables (n + 1 after a concat) becomes a variable of the kernel's own, which
    a call binds from the array (runtime/module.py binds plain variables only); and {kernel
    variable: the expression} to map the kernel's output shapes back."""
    local: dict = {}
    back: dict = {}
    made: list = []            # (expression, variable)
    for v in group.inputs:
        dims = []
        for d in shapes[v]:
            if isinstance(d, (int, np.integer, E.Var, E.IntImm)):
                dims.append(d)
                continue
            var = next((w for e, w in made if structural_equal(e, d)), None)
            if var is None:
                var = te.var(f"d{len(made)}", "int64")
                made.append((d, var))
                back[var] = d
            dims.append(var)
        local[v] = tuple(dims)
    return local, back


def _global_dim(d, back: dict):
    """A kernel's output dimension in the stretch's variables."""
    if isinstance(d, E.IntImm):
        return int(d.value)
    return substitute(d, back) if back else d


def _group_schedule(group: FusedGroup, shapes: dict, target):
    """(schedule, kernel arguments, output tensors) of one group over symbolic shapes."""
    from .lowering import group_to_te, inlined_schedule
    placeholders, env, _, _ = group_to_te(group, shapes)
    s, outs = inlined_schedule(group, placeholders, env)
    for stage in list(s.stages):
        op = stage.op
        if isinstance(op, ComputeOp) and stage.attach_type != INLINE and (op.axis or op.reduce_axis):
            _schedule_stage(s, stage, target)
    return s, placeholders + outs, outs


def _schedule_stage(s, stage, target) -> None:
    """An output's trailing constant dimensions fused and vectorized (a constant extent: its
    tail is peeled, tir/passes/partition_loops.py); the leading ones, where the shape
    variables are, fused into one loop on the thread pool when it has PARALLEL_MIN_ELEMS
    elements of work (a pragma: codegen/c.py prints the test).  A reduction keeps its reduction
    loops inside; an output whose innermost dimension varies is one loop split by the vector
    width, its tail guarded."""
    op = stage.op
    if op.reduce_axis and _vector_partials(s, op.output(0), target):
        return
    axes = list(op.axis)
    extents = [d.value if isinstance(d, E.IntImm) else None for d in (iv.dom.extent for iv in axes)]
    lanes = max(1, target.simd_lanes(op.output(0).dtype))
    trailing = 0
    while trailing < len(axes) and extents[len(axes) - 1 - trailing] is not None:
        trailing += 1
    inner_elems = int(np.prod(extents[len(axes) - trailing:], dtype=np.int64)) if trailing else 1
    work = max(1, inner_elems) * _reduction_work(op)
    if op.reduce_axis or not trailing or inner_elems < lanes:
        lead, inner = axes, []
    else:
        lead, inner = axes[:len(axes) - trailing], axes[len(axes) - trailing:]
    if inner:
        row = stage.fuse(*inner) if len(inner) > 1 else inner[0]
        _, vec = stage.split(row, factor=lanes)
        stage.vectorize(vec)
    if not lead:
        return
    outer = stage.fuse(*lead) if len(lead) > 1 else lead[0]
    if not inner and not op.reduce_axis and lanes > 1:
        outer, vec = stage.split(outer, factor=lanes)
        stage.vectorize(vec)
        work *= lanes
    if target.num_cores > 1:
        stage.parallel(outer)
        stage.pragma(outer, "parallel_min", max(2, -(-PARALLEL_MIN_ELEMS // work)))


def _vector_partials(s, t, target) -> bool:
    """A reduction whose last reduce axis is the innermost index of its reads and varies or
    spans two vectors or more: a vector of partial results per output (rfactor), as the static
    template does (ops/schedules/cpu.py); its outputs on the thread pool.  False (nothing done)
    otherwise."""
    op = t.op
    lanes = max(1, target.simd_lanes(t.dtype))
    red = list(op.reduce_axis)
    if lanes < 2 or op.num_outputs != 1 or t.dtype not in ("float32", "float64") or innermost_read(t) is not red[-1].var:
        return False
    last = red[-1].dom.extent
    if isinstance(last, E.IntImm) and last.value < 2 * lanes:
        return False     # a length that is no multiple of the vector is split with its tail guarded (peeled)
    st = s[t]
    outer = lane_partials(s, t, lanes)
    if outer is not None and target.num_cores > 1:
        st.parallel(outer)
        st.pragma(outer, "parallel_min", max(2, -(-PARALLEL_MIN_ELEMS // _reduction_work(op))))
    return True


def _reduction_work(op) -> int:
    """Elements each output of `op` reads: the product of its constant reduction extents."""
    work = 1
    for iv in op.reduce_axis:
        if isinstance(iv.dom.extent, E.IntImm):
            work *= int(iv.dom.extent.value)
    return work
