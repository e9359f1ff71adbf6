"""GraphBuilder: adds nodes with their types inferred at once, and folds nodes whose inputs are all
constants (so shape arithmetic in a model becomes plain attributes)."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ..ops import registry
from ..ops.registry import OpError, TensorType
from .ir import Graph, GraphError, NameGen, Node, Value


class RuntimeValueError(NotImplementedError):
    """A value needed as a constant (a shape, axes, pads, ...) is computed at run time.  `value`
    is that Value, so a caller that knows it (a graph input given with the model) can bind it."""

    def __init__(self, message: str, value: Value):
        super().__init__(message)
        self.value = value


class GraphBuilder:
    def __init__(self, name: str = "graph"):
        self.name = name
        self.inputs: list[Value] = []
        self.nodes: list[Node] = []
        self.params: dict[Value, np.ndarray] = {}
        self.names = NameGen()
        self.fold_constants = True
        self._derived: dict[tuple, Value] = {}

    # -- values ---------------------------------------------------------------------------------
    def input(self, name: str, shape: Sequence[int], dtype: str) -> Value:
        v = Value(self.names(name), tuple(shape), dtype)
        self.inputs.append(v)
        return v

    def const(self, array, name: str = "const", dtype: str | None = None) -> Value:
        """A constant parameter holding `array`."""
        arr = np.asarray(array, dtype=dtype) if dtype is not None else np.asarray(array)
        if arr.dtype == np.float64 and dtype is None and not isinstance(array, np.ndarray):
            arr = arr.astype(np.float32)
        arr = np.ascontiguousarray(arr).reshape(arr.shape)   # ascontiguousarray makes 0-d 1-d
        v = Value(self.names(name), arr.shape, arr.dtype.name)
        self.params[v] = arr
        return v

    def derived(self, source: Value, how: str, make: Callable[[np.ndarray], np.ndarray], name: str) -> Value:
        """The constant `make(source's array)`, made once per (source, how) however many nodes
        ask for it: a weight reused by twelve layers is transposed once, not twelve times."""
        key = (source, how)
        if key not in self._derived:
            self._derived[key] = self.const(make(self.value_of(source)), name=name)
        return self._derived[key]

    def is_const(self, v: Value | None) -> bool:
        return v is not None and v in self.params

    def value_of(self, v: Value, what: str = "value") -> np.ndarray:
        """The constant array behind `v`; a clear error when the model computes it at run time."""
        if v not in self.params:
            raise RuntimeValueError(
                f"{what} %{v.name} is computed at run time, and is needed as a constant", v)
        return self.params[v]

    # -- nodes ----------------------------------------------------------------------------------
    def add(self, op: str, inputs: Sequence[Value | None], attrs: dict | None = None, name: str = "",
            num_outputs: int | None = None, fold: bool = True) -> list[Value]:
        """Append `op(inputs)`; returns its output values (folded to constants when possible,
        unless `fold` is False: a node the graph passes should see, such as a weight's dequantize)."""
        attrs = dict(attrs or {})
        opdef = registry.get(op)
        types = [TensorType(v.shape, v.dtype) if v is not None else None for v in inputs]
        label = name or op
        try:
            out_types = opdef.infer_types(types, attrs)
        except OpError as err:
            raise GraphError(f"node {label} ({op}): {err}") from None
        except (ValueError, TypeError, IndexError, KeyError) as err:
            raise GraphError(f"node {label} ({op}): type inference failed: {err}") from err
        if fold and self.fold_constants and inputs and all(v is None or v in self.params for v in inputs) \
                and any(v is not None for v in inputs):
            if op == "identity" and inputs[0] is not None:   # a weight reused through Identity
                return [inputs[0]]                             # nodes: one array
            arrays = [self.params[v] if v is not None else None for v in inputs]
            results = opdef.run_reference(arrays, attrs)
            outs = []
            for k, (r, t) in enumerate(zip(results, out_types)):
                outs.append(self.const(np.asarray(r).astype(t.dtype, copy=False).reshape(t.shape),
                                       name=f"{name or op}_{k}" if len(results) > 1 else (name or op)))
            return outs
        base = name or op.split(".")[-1]
        outs = [Value(self.names(base if len(out_types) == 1 else f"{base}_{k}"), t.shape, t.dtype)
                for k, t in enumerate(out_types)]
        self.nodes.append(Node(op, tuple(inputs), tuple(outs), attrs, name or outs[0].name))
        return outs

    def add1(self, op: str, inputs: Sequence[Value | None], attrs: dict | None = None, name: str = "") -> Value:
        return self.add(op, inputs, attrs, name)[0]

    def finish(self, outputs: Sequence[Value]) -> Graph:
        used: set[Value] = set()
        for n in self.nodes:
            used.update(v for v in n.inputs if v is not None)
        used.update(outputs)
        params = {v: a for v, a in self.params.items() if v in used}
        return Graph(tuple(self.inputs), tuple(outputs), tuple(self.nodes), params, self.name).validate()
