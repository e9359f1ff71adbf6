"""ONNX ops that a staged model runs on the host, between its compiled stretches.

They are the ops that cannot be part of a static graph: control flow (If, Loop, Scan, whose
bodies are compiled as graphs of their own), sequences and optionals (containers, not
tensors), ops whose output shape depends on the data (NonZero, Unique, Compress,
NonMaxSuppression), the string ops (strings.py, cast_string.py, and string_layout.py for
Reshape, Gather, Concat, ... of strings), and ops that are lookups, tree
walks, counts, draws or decoders rather than tensor arithmetic: the ai.onnx.ml ops (ml_encode.py,
ml_tree.py), TfIdfVectorizer, the random ops and ImageDecoder.  Each is registered with
`@host_op("OpType", domain=...)`; it gets a `HostContext`, the input values (NumPy arrays, object
arrays of str for strings, lists of arrays for sequences, None for absent or empty ones) and the
node's attributes, and returns one value per node output.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

import numpy as np

HOST_OPS: dict[str, Callable] = {}


def host_op(*op_types: str, domain: str = "") -> Callable:
    """Register a host implementation for ONNX op types of `domain`."""
    from ..onnx import op_key

    def wrap(fn: Callable) -> Callable:
        for t in op_types:
            key = op_key(t, domain)
            if key in HOST_OPS:
                raise ValueError(f"host implementation of {key} registered twice")
            HOST_OPS[key] = fn
        return fn

    return wrap


def contiguous(a) -> np.ndarray:
    """`a` as an array in C order, keeping its rank (np.ascontiguousarray makes a 0-d array
    1-d) and making a NumPy scalar a 0-d array."""
    a = np.asarray(a)
    return a if a.flags.c_contiguous else np.array(a, order="C")


class GraphRunner(Protocol):
    def __call__(self, graph: Any, inputs: list) -> list: ...


@dataclass
class HostContext:
    """What a host op may use besides its inputs: where it is (for messages), the opset of its
    domain, and `run_graph(body, inputs)`, which runs a subgraph (compiled at call time) with
    `inputs` bound to the body's inputs and the enclosing scope's values visible."""
    node_name: str
    op_type: str
    opset: int
    run_graph: GraphRunner

    def error(self, message: str) -> ValueError:
        return ValueError(f"node {self.node_name} ({self.op_type}, opset {self.opset}): {message}")
