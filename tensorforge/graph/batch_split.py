"""Batch independence: which values of a static graph split along an axis with its inputs.

A graph is *separable along the leading axis* of some of its inputs when row k of every output
(index k along its axis 0) depends only on row k of those inputs, and on the other inputs and
the parameters whole.  Running it on rows [a, b) of the split inputs then gives rows [a, b) of
every output, so one batch can run as several smaller ones: a model with a symbolic batch runs
any batch size on kernels compiled for a few (staged.py's batch buckets).

`split_axes(graph, inputs)` carries the split from the inputs through the nodes, giving every
value that depends on a split input the axis its rows follow.  The rule for a node:

* An op with a TE compute is judged by its compute, stage by stage.  A stage splits at its
  output axis d when every load of a split tensor indexes the split axis with exactly the loop
  variable of d (after simplification with the loop bounds), d has the same extent, and that
  variable occurs nowhere else: not in another index, a condition or the arithmetic.  A
  reduction over the split axis, a shifted, reversed or sliced index along it, a reshape that
  merges it with another axis, or a comparison with the index all fail the test.
* An op without a compute declares the axes of its first input along which it computes
  independently (`split_axes` on its @op record), which its outputs keep at the same position;
  its other inputs must not be split.

A node that fails raises NotSeparable, which names it.  `same_but_split` checks that a graph
converted from the cut inputs is the same graph with the split axes shortened: a model whose
stretch reads the batch size as a number (a Shape folded into a constant) fails it.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..arith.analyzer import Analyzer
from ..ir.expr import IntImm, TensorLoad, Var
from ..ir.functor import Visitor, free_vars
from ..ops import registry
from ..te.tensor import PlaceholderOp
from .ir import Graph, Node, Value


class NotSeparable(Exception):
    """A node whose rows along the split axis read other rows (the message says which)."""


def split_axes(graph: Graph, inputs: dict[Value, int]) -> dict[Value, int]:
    """Value -> the axis along which it splits, for `inputs` (split at the given axes) and every
    value computed from them; NotSeparable when a node mixes rows of the split axis."""
    axes = dict(inputs)
    for node in graph.nodes:
        split = {k: axes[v] for k, v in enumerate(node.inputs) if v is not None and v in axes}
        if not split:
            continue
        label = f"node {node.name or node.outputs[0].name} ({node.op})"
        try:
            found = _node_axes(node, split)
        except NotSeparable as err:
            raise NotSeparable(f"{label}: {err}") from None
        for v, a in zip(node.outputs, found):
            if a is not None:
                axes[v] = a
    return axes


def _node_axes(node: Node, split: dict[int, int]) -> list[int | None]:
    opdef = registry.get(node.op)
    if opdef.compute is None:
        return _declared_axes(node, opdef, split)
    from .. import te
    placeholders = [te.placeholder(v.shape, v.dtype, name=f"in{k}") if v is not None else None
                    for k, v in enumerate(node.inputs)]
    try:
        outs = opdef.build_compute(placeholders, node.attrs)
    except Exception as err:     # an op that cannot build its compute here cannot be judged
        raise NotSeparable(f"its compute does not build ({err})") from None
    known: dict[tuple, int | None] = {(p.op, 0): split.get(k) for k, p in enumerate(placeholders) if p is not None}
    return [_tensor_axis(t, known) for t in outs]


def _declared_axes(node: Node, opdef, split: dict[int, int]) -> list[int | None]:
    if opdef.split_axes is None:
        raise NotSeparable("an opaque op that declares no independent axes")
    if set(split) != {0}:
        raise NotSeparable("a split input other than the first")
    x, axis = node.inputs[0], split[0]
    independent = opdef.split_axes(x.ndim, **opdef.attrs_with_defaults(node.attrs))
    if axis not in independent:
        raise NotSeparable(f"it computes along axis {axis}")
    for y in node.outputs:
        if axis >= y.ndim or y.shape[axis] != x.shape[axis]:
            raise NotSeparable(f"output {y.name} does not keep axis {axis}")
    return [axis] * len(node.outputs)


def _tensor_axis(t, known: dict) -> int | None:
    """The split axis of TE tensor `t` (None: it does not depend on a split tensor), judging the
    stages it reads first."""
    key = (t.op, t.value_index)
    if key in known:
        return known[key]
    op = t.op
    if isinstance(op, PlaceholderOp):       # a tensor the compute declares itself: no input
        return None
    for source in op.input_tensors():
        _tensor_axis(source, known)
    found = _stage_axes(op, known)
    for k in range(op.num_outputs):
        known[(op, k)] = found
    return found


def _stage_axes(op, known: dict) -> int | None:
    analyzer = Analyzer()
    for iv in (*op.axis, *op.reduce_axis):
        analyzer.bind(iv.var, iv.dom)
    uses = _Uses({iv.var: d for d, iv in enumerate(op.axis)}, known, analyzer)
    for body in op.body:
        uses.visit(body)
    if not uses.found:
        return None
    if len(uses.found) > 1:
        raise NotSeparable(f"stage {op.name} reads split rows at several of its axes")
    (d,), (tensor, axis) = uses.found, uses.source
    if d in uses.tainted:
        raise NotSeparable(f"stage {op.name} uses the index of its split axis {d} other than to read rows")
    if _extent(op.axis[d].dom.extent) != _extent(tensor.shape[axis]):
        raise NotSeparable(f"stage {op.name} covers part of the split axis only")
    return d


def _extent(e: Any) -> int | None:
    return int(e.value) if isinstance(e, IntImm) else int(e) if isinstance(e, int) else None


class _Uses(Visitor):
    """Collects, over a stage's body, the output axes at which split rows are read (`found`)
    and the output axes whose index is used otherwise (`tainted`)."""

    def __init__(self, axis_vars: dict, known: dict, analyzer: Analyzer):
        self.axis_vars, self.known, self.analyzer = axis_vars, known, analyzer
        self.found: set[int] = set()
        self.tainted: set[int] = set()
        self.source: tuple = ()

    def visit_TensorLoad(self, node: TensorLoad) -> None:
        split = self.known.get((node.tensor.op, node.tensor.value_index))
        for p, index in enumerate(node.indices):
            mentions = any(v in self.axis_vars for v in free_vars(index))
            if p == split:
                simple = self.analyzer.simplify(index) if mentions else index
                d = self.axis_vars.get(simple) if isinstance(simple, Var) else None
                if d is None:
                    raise NotSeparable(f"tensor {node.tensor.name} is read at {index} along its split axis {p}")
                self.found.add(d)
                self.source = (node.tensor, p)
            elif mentions:
                self.visit(self.analyzer.simplify(index))
            else:
                self.visit(index)

    def visit_Var(self, node: Var) -> None:
        d = self.axis_vars.get(node)
        if d is not None:
            self.tainted.add(d)


def same_but_split(full: Graph, cut: Graph, axes: dict[Value, int], rows: int, cut_rows: int) -> str | None:
    """None when `cut` is `full` with every split axis (`axes`, of `full`'s values) `cut_rows`
    long instead of `rows`: the same nodes reading the same values, the same parameters, equal
    attributes but for sizes that follow the split; else what differs."""
    if len(full.nodes) != len(cut.nodes) or len(full.inputs) != len(cut.inputs):
        return "the graphs have different nodes"
    twin: dict[Value, Value] = {}

    def same_value(a: Value, b: Value) -> bool:
        axis = axes.get(a)
        want = tuple(cut_rows if k == axis else d for k, d in enumerate(a.shape))
        return a.dtype == b.dtype and b.shape == want

    for a, b in zip(full.inputs, cut.inputs):
        if not same_value(a, b):
            return f"input {a.name} is {b.type_str()} when cut"
        twin[a] = b
    for m, n in zip(full.nodes, cut.nodes):
        if m.op != n.op or len(m.inputs) != len(n.inputs) or len(m.outputs) != len(n.outputs):
            return f"node {m.name} differs"
        for a, b in zip(m.inputs, n.inputs):
            if a is None or b is None:
                if a is not b:
                    return f"node {m.name} reads other values"
            elif a in full.params:
                if b not in cut.params or not _same_array(full.params[a], cut.params[b]):
                    return f"node {m.name} reads a constant that depends on the batch size"
            elif twin.get(a) is not b:
                return f"node {m.name} reads other values"
        if set(m.attrs) != set(n.attrs) or not all(_same_attr(m.attrs[k], n.attrs[k], rows, cut_rows)
                                                  for k in m.attrs):
            return f"node {m.name} has attributes that depend on the batch size"
        for a, b in zip(m.outputs, n.outputs):
            if not same_value(a, b):
                return f"value {a.name} is {b.type_str()} when cut"
            twin[a] = b
    for a, b in zip(full.outputs, cut.outputs):
        if twin.get(a) is not b:
            return "the graphs return other values"
    return None


def _same_array(a: np.ndarray, b: np.ndarray) -> bool:
    return a is b or (a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b))


def _same_attr(a: Any, b: Any, rows: int, cut_rows: int) -> bool:
    """Equal, or sequences equal but where a size is `rows` in one and `cut_rows` in the other
    (a reshape's or expand's target shape, a slice's end)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and _same_array(a, b)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(
            _same_attr(x, y, rows, cut_rows) or (type(x) is int and type(y) is int and (x, y) == (rows, cut_rows))
            for x, y in zip(a, b))
    return type(a) is type(b) and a == b
