"""Fold an elementwise chain that takes one 8-bit tensor to another into a 256-entry table
lookup (the QDQ form of an activation: GELU, sigmoid, a scaling between two quantizations).

    v = quantize(f(dequantize(s)), ...)      s, v: uint8 / int8, f: elementwise, scalar constants
  ->
    v = gather(table, s)                     table[i] = the chain evaluated at s = i

A value computed from a single 8-bit tensor s and scalar constants by elementwise ops (and
reshapes, which keep the elements' order) can take only 256 values, one per value of s; the
chain is evaluated once, at compile time, on all of them, by each op's NumPy reference (the
arithmetic the compiled kernels are checked against), and every element then costs one load.
In a quantized transformer's GELU that replaces a dozen quantize / dequantize round trips, each
with a division, and an erf per element.  A chain whose table is the identity (a dequantize,
a reshape and a quantize with the same parameters) becomes the reshape alone.

Transposes move elements without computing: the closure takes them too, and a value behind one
is looked up on s moved the same way (the moves replayed on the 8-bit s, then the lookup).  So
attention's dequantize -> transpose -> quantize of one scale (the heads put back together)
moves bytes instead of computing a float division per element.  Elementwise nodes combine
inside values only when the same moves made them (identical transposes; reshapes alone keep
the elements' order and combine as before).

The algorithm: for each 8-bit value s, in graph order, not itself inside an earlier source's
closure, the closure is every value computed by an elementwise node (TABLE_OPS) whose inputs
are s, values of the closure or scalar constants, with every non-constant input of the node's
own shape (reshapes excepted).  Each 8-bit value of the closure that something outside it
reads (or a graph output) is made from s by a lookup; the closure's other nodes are left to
dead-code elimination.  Signed sources index the table through gather's wrap-around (value -1
reads entry 255), so table entry i holds the chain at the 8-bit value whose bits are i.
"""
from __future__ import annotations

import numpy as np

from ...ops import get
from ..ir import Graph, Node, Value
from .eliminate_dead_code import eliminate_dead_code

EIGHT_BIT = ("uint8", "int8")
RESHAPES = ("reshape", "flatten", "squeeze", "unsqueeze")
MOVES = RESHAPES + ("transpose",)          # ops that only move elements
TABLE_OPS = frozenset({
    "quantize_linear", "dequantize_linear", "requantize", "add", "sub", "mul", "div", "maximum", "minimum",
    "pow", "relu", "leaky_relu", "prelu", "elu", "selu", "gelu", "softplus", "mish", "hard_sigmoid",
    "hard_swish", "sigmoid", "tanh", "erf", "exp", "log", "sqrt", "neg", "abs", "reciprocal", "floor",
    "ceil", "round", "clip", "cast", *MOVES})


def fold_qdq_tables(graph: Graph) -> Graph:
    params = dict(graph.params)
    users = graph.consumers()
    outputs = set(graph.outputs)
    sources = [v for v in graph.inputs if v.dtype in EIGHT_BIT]
    sources += [v for n in graph.nodes for v in n.outputs if v.dtype in EIGHT_BIT]
    replace: dict = {}            # node -> the nodes that stand in its place
    covered: set = set()
    for s in sources:
        if s in covered:
            continue
        order, moves = _closure(s, graph.nodes, users, params)
        inside = {v for n in order for v in n.outputs}
        covered |= inside
        consumers = {n for n in order}
        for n in order:
            (v,) = n.outputs
            if n in replace or all(a is s or a is None or a in params for a in n.inputs):
                continue            # made from s by one op: the lookup would cost as much
            if v not in outputs and all(u in consumers for u in users.get(v, [])):
                continue
            table = _table(s, v, order, params)
            replace[n] = _lookup(s, v, table, params, n.name, moves[v])
    if not replace:
        return graph
    nodes: list = []
    for n in graph.nodes:
        nodes.extend(replace.get(n, [n]))
    return eliminate_dead_code(graph.with_nodes(nodes, params=params))


def _closure(s: Value, nodes: tuple, users: dict, params: dict) -> tuple[list, dict]:
    """The nodes of s's closure (module docstring), in graph order, and for each value of it the
    transposes (with the reshapes between them) that made it from s: () when none did."""
    inside = {s}
    moves: dict = {s: ()}
    found: list = []
    todo = list(users.get(s, []))
    candidates: set = set()
    while todo:
        n = todo.pop()
        if n in candidates:
            continue
        candidates.add(n)
        for v in n.outputs:
            todo.extend(users.get(v, []))
    for n in nodes:                           # graph order: a node's inputs are decided before it
        if n in candidates and _elementwise_of(n, inside, params):
            paths = {moves[v] for v in n.inputs if v in inside}
            if len(paths) != 1:
                continue                      # inside values moved differently: not elementwise
            (path,) = paths
            if n.op == "transpose" or (n.op in RESHAPES and path):
                path = path + (n,)
            found.append(n)
            inside.add(n.outputs[0])
            moves[n.outputs[0]] = path
    return found, moves


def _elementwise_of(n: Node, inside: set, params: dict) -> bool:
    if n.op not in TABLE_OPS or len(n.outputs) != 1 or n.attrs.get("block_size", 0):
        return False
    out = n.outputs[0]
    seen = False
    for k, v in enumerate(n.inputs):
        if v is None:
            continue
        if v in inside:
            if n.op not in MOVES and tuple(v.shape) != tuple(out.shape):
                return False
            seen = True
        elif v in params:
            if params[v].size != 1 and not (n.op in RESHAPES and k > 0):
                return False
        else:
            return False
    return seen


def _table(s: Value, v: Value, order: list, params: dict) -> np.ndarray:
    """v's value for each of the 256 values of s, by the ops' references."""
    domain = np.arange(256, dtype=np.uint8).view(np.int8) if s.dtype == "int8" else np.arange(256, dtype=np.uint8)
    values = {s: domain}
    for n in order:
        (out,) = n.outputs
        if n.op in MOVES:
            values[out] = values[n.inputs[0]]
        else:
            args = [None if a is None else values[a].reshape((1,) * (a.ndim - 1) + (256,)) if a in values
                    else params[a] for a in n.inputs]
            result = get(n.op).run_reference(args, dict(n.attrs))[0]
            values[out] = np.broadcast_to(result, (1,) * (out.ndim - 1) + (256,)).reshape(256)
        if out is v:
            break
    return np.ascontiguousarray(values[v]).astype(v.dtype)


def _lookup(s: Value, v: Value, table: np.ndarray, params: dict, name: str, path: tuple = ()) -> list:
    """Nodes that make v from s by the table (or by a reshape, when the table is the identity),
    after the moves of `path` replayed on s."""
    moved: list = []
    for k, m in enumerate(path):             # the same moves, on the 8-bit values
        if tuple(s.shape) != tuple(m.inputs[0].shape):     # reshapes before it keep the order
            shaped = Value(f"{name}_shaped{k}", tuple(m.inputs[0].shape), s.dtype)
            moved.append(Node("reshape", (s,), (shaped,), {"shape": tuple(shaped.shape)}, f"{name}_shape{k}"))
            s = shaped
        out = Value(f"{name}_moved{k}", tuple(m.outputs[0].shape), s.dtype)
        moved.append(Node(m.op, (s, *m.inputs[1:]), (out,), dict(m.attrs), f"{name}_move{k}"))
        s = out
    return moved + _lookup_in_place(s, v, table, params, name)


def _lookup_in_place(s: Value, v: Value, table: np.ndarray, params: dict, name: str) -> list:
    domain = np.arange(256, dtype=np.uint8).view(np.int8) if s.dtype == "int8" else np.arange(256, dtype=np.uint8)
    if s.dtype == v.dtype and np.array_equal(table, domain):
        return [Node("reshape", (s,), (v,), {"shape": tuple(v.shape)}, f"{name}_same")]
    tv = Value(f"{name}_table", (256,), v.dtype)
    params[tv] = table
    if tuple(s.shape) == tuple(v.shape):
        return [Node("gather", (tv, s), (v,), {"axis": 0}, f"{name}_lookup")]
    flat = Value(f"{name}_looked_up", tuple(s.shape), v.dtype)
    return [Node("gather", (tv, s), (flat,), {"axis": 0}, f"{name}_lookup"),
            Node("reshape", (flat,), (v,), {"shape": tuple(v.shape)}, f"{name}_reshape")]
