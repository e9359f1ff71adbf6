"""One parameter for each distinct large constant: constants with the same bytes become one.

Models reuse weights: ALBERT runs one encoder layer's weights twelve times, a detector's head
runs the same convs on every pyramid level, a language model ties its embedding to its output
layer.  Exporters spell that reuse in ways the graph cannot see through: an `Identity` of the
weight per use, or the weight written out once per use.  The layout passes then pack each copy
again (a packed copy per layer), and the compiled model held ALBERT-base's 44 MB of weights as
356 MB.

This pass makes each group of constants with equal bytes (same shape and dtype) one value read
by all their readers.  Candidates are grouped by shape, dtype and a sample of their bytes, then
compared whole, so the cost is a pass over the bytes of the constants that do collide.  It runs
after constant folding (which derives per-use copies, such as a shared weight's transpose per
layer) and before the layout passes, which derive each packed weight once per source value;
and again at the end, for passes that derive per node.  Constants under MIN_BYTES are left
alone: they cost no memory worth saving.

The graph computes the same values.
"""
from __future__ import annotations

import weakref

import numpy as np

from ..ir import Graph, Value
from .rewrite import replace_values

MIN_BYTES = 64 * 1024
SAMPLES = 64            # elements per constant whose bytes group the candidates


def share_equal_params(graph: Graph) -> Graph:
    groups: dict[tuple, list[Value]] = {}
    outputs = set(graph.outputs)        # a constant output keeps its value (and name)
    for v, array in graph.params.items():
        if array.nbytes >= MIN_BYTES and v not in outputs:
            groups.setdefault(_fingerprint(array), []).append(v)
    replace: dict[Value, Value] = {}
    for members in groups.values():
        kept: list[Value] = []
        for v in members:
            first = next((k for k in kept if _same_bytes(graph.params[k], graph.params[v])), None)
            if first is None:
                kept.append(v)
            else:
                replace[v] = first
    if not replace:
        return graph
    params = {v: a for v, a in graph.params.items() if v not in replace}
    return replace_values(graph, replace, params=params)


def _fingerprint(array: np.ndarray) -> tuple:
    flat = array.reshape(-1)
    step = max(1, flat.size // SAMPLES)
    return array.dtype.str, array.shape, flat[::step][:SAMPLES].tobytes(), flat[-1:].tobytes()


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit-for-bit equality (NaNs of one payload equal, -0.0 and 0.0 differ)."""
    if a is b or (a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
                  and a.strides == b.strides):
        return True
    return bool(np.array_equal(np.ascontiguousarray(a).reshape(-1).view(np.uint8),
                               np.ascontiguousarray(b).reshape(-1).view(np.uint8)))


class SharedParams:
    """One array for equal parameters across compiled models: the specializations of a staged
    model each derive their packed weights again (a transpose for `dense`, a blocked layout),
    with the same bytes.  `intern(params)` returns `params` with each array of MIN_BYTES or more
    replaced by an equal one an earlier model holds.  The pool keeps weak references, so a
    model dropped from a cache of specializations frees the arrays no other model holds."""

    def __init__(self):
        self._arrays: dict[tuple, list] = {}

    def intern(self, params: dict) -> dict:
        out = {}
        for name, array in params.items():
            if array.nbytes >= MIN_BYTES:
                array = self._one(array)
            out[name] = array
        return out

    def _one(self, array: np.ndarray) -> np.ndarray:
        refs = self._arrays.setdefault(_fingerprint(array), [])
        for ref in list(refs):
            held = ref()
            if held is None:
                refs.remove(ref)
            elif _same_bytes(held, array):
                return held
        refs.append(weakref.ref(array))
        return array
