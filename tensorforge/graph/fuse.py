"""Operator fusion by the paper's rules, with a post-dominator analysis (the `graph -> groups` arrow).

Rules: injective ops fuse together; a reduction fuses with its injective inputs; a
complex-out-fusable op (conv, dense) fuses the injective ops on its output; opaque ops stand alone.

Algorithm: in the dataflow graph (edges producer -> consumer, graph outputs drain into a virtual
sink), compute each node's immediate post-dominator: the first node that every path from it to
the sink passes through.  A node N is fused with every node on the paths from N to its
post-dominator D (D included) when those nodes allow it:
  - N complex-out-fusable: every node on the paths, D included, is injective;
  - N injective: every node strictly between is injective, and D is injective or a reduction.
A group holds at most one "master" (complex or reduction).  Because all paths N -> D are taken
whole, the groups stay acyclic; `fuse` checks that anyway.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ops import registry
from ..ops.registry import COMPLEX, INJECTIVE, OPAQUE, REDUCTION
from .ir import Graph, GraphError, Node, Value


@dataclass(frozen=True, eq=False)
class FusedGroup:
    """Nodes computed by one kernel (or one opaque step), in topological order."""

    nodes: tuple
    inputs: tuple      # Values read from outside the group (graph inputs, params, other groups)
    outputs: tuple     # Values read outside the group or returned by the graph
    pattern: str       # the master's pattern, or injective / opaque
    master: Node | None

    @property
    def name(self) -> str:
        return "fused_" + "_".join(n.op for n in self.nodes)[:80]

    def __repr__(self) -> str:
        ops = ", ".join(n.op for n in self.nodes)
        return f"FusedGroup[{self.pattern}]({ops})"


def _pattern(node: Node) -> str:
    opdef = registry.get(node.op)
    return OPAQUE if opdef.is_opaque_kernel else opdef.pattern


class _UnionFind:
    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, x: int) -> int:
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _post_dominators(n: int, succ: list[list[int]]) -> list[int | None]:
    """Immediate post-dominator of each node (index n is the sink; None when it is the sink)."""
    # nodes are in topological order, so walk them backwards; ipdom = LCA of successors' chains
    ipdom: list[int | None] = [None] * (n + 1)
    depth = [0] * (n + 1)

    def lca(a: int, b: int) -> int:
        while a != b:
            if depth[a] > depth[b]:
                a = ipdom[a]  # type: ignore[assignment]
            elif depth[b] > depth[a]:
                b = ipdom[b]  # type: ignore[assignment]
            else:
                a, b = ipdom[a], ipdom[b]  # type: ignore[assignment]
        return a

    for k in range(n - 1, -1, -1):
        targets = succ[k] or [n]
        d = targets[0]
        for t in targets[1:]:
            d = lca(d, t)
        ipdom[k] = d
        depth[k] = depth[d] + 1
    return ipdom


def fuse(graph: Graph, enabled: bool = True) -> list[FusedGroup]:
    """Partition the graph's nodes into fused groups (in an executable order)."""
    nodes = list(graph.nodes)
    n = len(nodes)
    index = {id(node): k for k, node in enumerate(nodes)}
    producer = {v: index[id(node)] for node in nodes for v in node.outputs}
    succ: list[list[int]] = [[] for _ in range(n)]
    for k, node in enumerate(nodes):
        for v in node.inputs:
            if v is not None and v in producer and k not in succ[producer[v]]:
                succ[producer[v]].append(k)
    graph_outputs = set(graph.outputs)
    for k, node in enumerate(nodes):
        if any(v in graph_outputs for v in node.outputs):
            succ[k].append(n)  # drains into the sink: nothing post-dominates it but the sink
    patterns = [_pattern(node) for node in nodes]
    uf = _UnionFind(n)
    masters: dict[int, int | None] = {k: (k if patterns[k] in (COMPLEX, REDUCTION) else None) for k in range(n)}

    def paths_between(src: int, dst: int) -> list[int] | None:
        """Nodes on the paths src -> dst (dst included, src excluded); None if one reaches the sink."""
        seen: set[int] = set()
        stack = list(succ[src])
        while stack:
            k = stack.pop()
            if k in seen:
                continue
            if k == n:
                return None
            seen.add(k)
            if k != dst:
                stack.extend(succ[k])
        return sorted(seen)

    def try_fuse(src: int, members: list[int]) -> None:
        roots = {uf.find(k) for k in [src] + members}
        group_masters = {masters[r] for r in roots if masters[r] is not None}
        if len(group_masters) > 1:
            return
        for k in members:
            uf.union(src, k)
        masters[uf.find(src)] = next(iter(group_masters), None)

    if enabled:
        ipdom = _post_dominators(n, succ)
        for phase in (COMPLEX, INJECTIVE):
            for k in range(n):
                d = ipdom[k]
                if patterns[k] != phase or d is None or d == n:
                    continue
                on_path = paths_between(k, d)
                if on_path is None:
                    continue
                between = [j for j in on_path if j != d]
                if phase == COMPLEX:
                    ok = all(patterns[j] == INJECTIVE for j in on_path)
                else:
                    ok = all(patterns[j] == INJECTIVE for j in between) and patterns[d] in (INJECTIVE, REDUCTION)
                if ok:
                    try_fuse(k, on_path)

    members: dict[int, list[int]] = {}
    for k in range(n):
        members.setdefault(uf.find(k), []).append(k)
    groups = _order_groups(graph, nodes, list(members.values()), producer, patterns, masters, uf)
    return groups


def _order_groups(graph, nodes, parts, producer, patterns, masters, uf) -> list[FusedGroup]:
    consumers_outside: dict[Value, bool] = {}
    group_of = {}
    for gi, part in enumerate(parts):
        for k in part:
            group_of[k] = gi
    for k, node in enumerate(nodes):
        for v in node.inputs:
            if v is not None and v in producer and group_of[producer[v]] != group_of[k]:
                consumers_outside[v] = True
    graph_outputs = set(graph.outputs)
    # topological order of groups
    deps: dict[int, set[int]] = {gi: set() for gi in range(len(parts))}
    for gi, part in enumerate(parts):
        for k in part:
            for v in nodes[k].inputs:
                if v is not None and v in producer and group_of[producer[v]] != gi:
                    deps[gi].add(group_of[producer[v]])
    order: list[int] = []
    state: dict[int, int] = {}

    def visit(gi, stack=()):
        if state.get(gi) == 2:
            return
        if state.get(gi) == 1:
            raise GraphError("internal error: fusion produced a cycle between groups")
        state[gi] = 1
        for d in sorted(deps[gi]):
            visit(d)
        state[gi] = 2
        order.append(gi)

    for gi in sorted(range(len(parts)), key=lambda g: min(parts[g])):
        visit(gi)
    groups = []
    for gi in order:
        part = sorted(parts[gi])
        members = [nodes[k] for k in part]
        produced = {v for node in members for v in node.outputs}
        inputs, seen = [], set()
        for node in members:
            for v in node.inputs:
                if v is not None and v not in produced and v not in seen:
                    seen.add(v)
                    inputs.append(v)
        outputs = [v for node in members for v in node.outputs
                   if consumers_outside.get(v) or v in graph_outputs]
        m = masters[uf.find(part[0])]
        master = nodes[m] if m is not None else None
        if len(members) == 1 and patterns[part[0]] == OPAQUE:
            pattern = OPAQUE
        else:
            pattern = patterns[m] if m is not None else INJECTIVE
        groups.append(FusedGroup(tuple(members), tuple(inputs), tuple(outputs), pattern, master))
    return groups
