"""The computational graph: typed values, nodes (op name + attributes), constants as parameters.

A `Graph` is immutable: passes build new graphs.  Nodes are kept in topological order; values are
compared by identity.  `str(graph)` is a readable text form:

    graph resnet18(%input: float32[1, 3, 224, 224]) {
      %conv1 = nn.conv2d(%input, $w0) {strides=(2, 2), padding=(3, 3, 3, 3)}  # float32[1, 64, 112, 112]
      ...
      return %out
    }
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from ..ir import dtype as dt


class GraphError(ValueError):
    """A malformed graph (cycle, undefined value, bad type); the message names the node."""


@dataclass(frozen=True, eq=False)
class Value:
    """A tensor flowing through the graph, with a static shape and a dtype."""

    name: str
    shape: tuple
    dtype: str

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))
        dt.check(self.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * dt.itemsize(self.dtype)

    def type_str(self) -> str:
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type_str()}"


def _freeze(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, np.ndarray):
        return v
    return v


def freeze_attr(value: Any) -> Any:
    """A hashable, exact stand-in for an attribute value (arrays by dtype, shape and bytes)."""
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, hashlib.sha1(np.ascontiguousarray(value).tobytes()).hexdigest())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__,) + tuple(freeze_attr(v) for v in value)
    if isinstance(value, dict):
        return ("dict",) + tuple(sorted((str(k), freeze_attr(v)) for k, v in value.items()))
    return (type(value).__name__, repr(value))


@dataclass(frozen=True, eq=False)
class Node:
    """One operator application.  `inputs` may hold None for an absent optional input."""

    op: str
    inputs: tuple
    outputs: tuple
    attrs: dict = field(default_factory=dict)
    name: str = ""

    def __post_init__(self):
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "attrs", {k: _freeze(v) for k, v in self.attrs.items()})

    def __repr__(self) -> str:
        return f"Node({self.name or self.op}: {self.op})"


@dataclass(frozen=True, eq=False)
class Graph:
    """Inputs, outputs, nodes in topological order, and constant parameters (Value -> array)."""

    inputs: tuple
    outputs: tuple
    nodes: tuple
    params: dict = field(default_factory=dict)
    name: str = "graph"

    def __post_init__(self):
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "nodes", tuple(self.nodes))

    # -- queries --------------------------------------------------------------------------------
    def producers(self) -> dict:
        """Value -> the node that produces it."""
        return {v: n for n in self.nodes for v in n.outputs}

    def consumers(self) -> dict:
        """Value -> list of nodes that read it (graph outputs are not nodes)."""
        out: dict = {}
        for n in self.nodes:
            for v in n.inputs:
                if v is not None:
                    out.setdefault(v, []).append(n)
        return out

    def with_nodes(self, nodes: Iterable[Node], params: dict | None = None, outputs: Sequence[Value] | None = None,
                   inputs: Sequence[Value] | None = None) -> "Graph":
        return Graph(tuple(inputs) if inputs is not None else self.inputs,
                     tuple(outputs) if outputs is not None else self.outputs, tuple(nodes),
                     self.params if params is None else params, self.name)

    def validate(self) -> "Graph":
        """Check that every value is defined before use (which rules out cycles) and once."""
        defined = set(self.inputs) | set(self.params)
        for n in self.nodes:
            for v in n.inputs:
                if v is not None and v not in defined:
                    raise GraphError(f"node {n.name or n.op} ({n.op}) reads %{v.name} before it is defined "
                                     "(an undefined value or a cycle)")
            for v in n.outputs:
                if v in defined:
                    raise GraphError(f"node {n.name or n.op} ({n.op}) redefines %{v.name}")
                defined.add(v)
        for v in self.outputs:
            if v not in defined:
                raise GraphError(f"graph output %{v.name} is never defined")
        return self

    # -- text -----------------------------------------------------------------------------------
    def __str__(self) -> str:
        def ref(v):
            if v is None:
                return "None"
            return f"${v.name}" if v in self.params else f"%{v.name}"

        lines = [f"graph {self.name}({', '.join(repr(v) for v in self.inputs)}) {{"]
        for n in self.nodes:
            attrs = ", ".join(f"{k}={_attr_str(v)}" for k, v in sorted(n.attrs.items()))
            outs = ", ".join(f"%{v.name}" for v in n.outputs)
            types = ", ".join(v.type_str() for v in n.outputs)
            lines.append(f"  {outs} = {n.op}({', '.join(ref(v) for v in n.inputs)})"
                         f"{' {' + attrs + '}' if attrs else ''}  # {types}")
        lines.append(f"  return {', '.join(ref(v) for v in self.outputs)}")
        lines.append("}")
        if self.params:
            total = sum(v.nbytes for v in self.params)
            lines.append(f"# {len(self.params)} parameters, {total / 1e6:.2f} MB")
        return "\n".join(lines)

    __repr__ = __str__


def _attr_str(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return f"array({v.dtype}{list(v.shape)})"
    if isinstance(v, float):
        return f"{v:g}"
    return repr(v)


class NameGen:
    """Unique value names."""

    def __init__(self, taken: Iterable[str] = ()):
        self.taken = set(taken)

    def __call__(self, base: str) -> str:
        base = base or "v"
        name, k = base, 0
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name
