"""Structural equality of graphs, for before/expected pass tests.

Two graphs are equal when they have the same inputs (shape, dtype, in order), the same nodes in
the same order (op, attributes, output types), the same wiring (each node input names the same
graph input, constant or earlier node output), the same constants where they are read (shape,
dtype and values) and the same outputs.  Constants that nothing reads are not compared (a pass
may leave them for dead-code elimination).  Value and node names are ignored: a pass may name
what it creates as it likes.
"""
from __future__ import annotations

import numpy as np

from tensorforge.graph.ir import Graph, Value


def assert_graph_equal(got: Graph, want: Graph, *, rtol: float = 0.0, atol: float = 0.0) -> None:
    """Raise AssertionError naming the first difference (with both graphs printed)."""
    problem = graph_difference(got, want, rtol=rtol, atol=atol)
    if problem is not None:
        raise AssertionError(f"{problem}\n--- got:\n{got}\n--- expected:\n{want}")


def graph_difference(got: Graph, want: Graph, *, rtol: float = 0.0, atol: float = 0.0) -> str | None:
    """The first structural difference between the graphs, in words, or None when they are equal."""
    if len(got.inputs) != len(want.inputs):
        return f"{len(got.inputs)} inputs, expected {len(want.inputs)}"
    for k, (a, b) in enumerate(zip(got.inputs, want.inputs)):
        if _type(a) != _type(b):
            return f"input {k} is {a.type_str()}, expected {b.type_str()}"
    ids_got, ids_want = _Ids(got), _Ids(want)
    if len(got.nodes) != len(want.nodes):
        return (f"{len(got.nodes)} nodes {[n.op for n in got.nodes]}, "
                f"expected {len(want.nodes)} {[n.op for n in want.nodes]}")
    for k, (a, b) in enumerate(zip(got.nodes, want.nodes)):
        where = f"node {k} ({b.op})"
        if a.op != b.op:
            return f"node {k} is {a.op}, expected {b.op}"
        if not _same_attrs(a.attrs, b.attrs):
            return f"{where} has attributes {a.attrs}, expected {b.attrs}"
        if len(a.inputs) != len(b.inputs):
            return f"{where} reads {len(a.inputs)} inputs, expected {len(b.inputs)}"
        for j, (x, y) in enumerate(zip(a.inputs, b.inputs)):
            problem = _same_ref(ids_got, x, ids_want, y, rtol, atol)
            if problem:
                return f"{where} input {j}: {problem}"
        if [_type(v) for v in a.outputs] != [_type(v) for v in b.outputs]:
            return (f"{where} writes {[v.type_str() for v in a.outputs]}, "
                    f"expected {[v.type_str() for v in b.outputs]}")
        ids_got.define(a.outputs, k)
        ids_want.define(b.outputs, k)
    if len(got.outputs) != len(want.outputs):
        return f"{len(got.outputs)} outputs, expected {len(want.outputs)}"
    for j, (x, y) in enumerate(zip(got.outputs, want.outputs)):
        problem = _same_ref(ids_got, x, ids_want, y, rtol, atol)
        if problem:
            return f"graph output {j}: {problem}"
    return None


class _Ids:
    """Where each value of a graph comes from: ("input", k), ("node", k, j) or ("const",)."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.ids: dict = {v: ("input", k) for k, v in enumerate(graph.inputs)}

    def define(self, outputs, k: int) -> None:
        for j, v in enumerate(outputs):
            self.ids[v] = ("node", k, j)

    def of(self, v: Value | None):
        if v is None:
            return None
        if v in self.graph.params:
            return ("const",)
        return self.ids.get(v, ("undefined", v.name))


def _same_ref(ga: _Ids, a, gb: _Ids, b, rtol: float, atol: float) -> str | None:
    ra, rb = ga.of(a), gb.of(b)
    if ra != rb:
        return f"reads {_describe(ra)}, expected {_describe(rb)}"
    if ra == ("const",):
        x, y = ga.graph.params[a], gb.graph.params[b]
        if x.shape != y.shape or x.dtype != y.dtype:
            return f"constant {x.dtype}{list(x.shape)}, expected {y.dtype}{list(y.shape)}"
        if not np.allclose(x, y, rtol=rtol, atol=atol, equal_nan=True):
            return f"constant values differ (largest difference {np.max(np.abs(x - y))})"
    elif ra is not None and _type(a) != _type(b):
        return f"a value of type {a.type_str()}, expected {b.type_str()}"
    return None


def _describe(ref) -> str:
    if ref is None:
        return "nothing (an absent input)"
    if ref[0] == "node":
        return f"output {ref[2]} of node {ref[1]}"
    if ref[0] == "input":
        return f"graph input {ref[1]}"
    if ref[0] == "const":
        return "a constant"
    return f"the undefined value %{ref[1]}"


def _type(v: Value) -> tuple:
    return (tuple(v.shape), v.dtype)


def _same_attrs(a: dict, b: dict) -> bool:
    if set(a) != set(b):
        return False
    return all(_same_value(a[k], b[k]) for k in a)


def _same_value(x, y) -> bool:
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return np.array_equal(np.asarray(x), np.asarray(y))
    if isinstance(x, (tuple, list)) and isinstance(y, (tuple, list)):
        return len(x) == len(y) and all(_same_value(p, q) for p, q in zip(x, y))
    if isinstance(x, bool) or isinstance(y, bool):       # True == 1, but not as an attribute value
        return type(x) is type(y) and x == y
    return x == y
