"""Static memory planning: intermediate tensors share one arena by liveness.

Each step (a fused group or opaque kernel) defines values and reads values; a value lives from
the step that defines it to its last reader (inclusive).  Offsets are assigned greedily by size,
largest first: each tensor goes to the lowest offset where it overlaps no already-placed tensor
whose lifetime intersects its own.  Because a step's outputs and inputs are live at that same
step, no kernel reads and writes the same bytes.  Graph inputs, parameters and graph outputs are
not planned (outputs are fresh arrays handed to the caller).
"""
from __future__ import annotations

from dataclasses import dataclass, field

ALIGN = 64


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


@dataclass
class MemoryPlan:
    offsets: dict = field(default_factory=dict)    # Value -> byte offset in the arena
    lifetimes: dict = field(default_factory=dict)  # Value -> (first step, last step)
    total_bytes: int = 0                            # arena size
    unplanned_bytes: int = 0                        # sum of the planned tensors' sizes
    graph_bytes: int = 0                            # sum of every intermediate value of the graph

    def summary(self) -> str:
        ratio = self.total_bytes / self.unplanned_bytes if self.unplanned_bytes else 0.0
        text = (f"memory plan: {len(self.offsets)} kernel-boundary tensors of {self.unplanned_bytes / 1e6:.2f} MB "
                f"share an arena of {self.total_bytes / 1e6:.2f} MB ({ratio:.0%})")
        if self.graph_bytes:
            text += (f"; all {self.graph_bytes / 1e6:.2f} MB of intermediate values before fusion -> "
                     f"{self.total_bytes / self.graph_bytes:.0%}")
        return text


def plan_memory(steps: list[tuple[tuple, tuple]], external: set) -> MemoryPlan:
    """`steps`: (inputs, outputs) Values per step, in execution order.  `external`: values not to
    plan (graph inputs, params, graph outputs)."""
    first: dict = {}
    last: dict = {}
    for k, (ins, outs) in enumerate(steps):
        for v in outs:
            if v not in external:
                first.setdefault(v, k)
                last.setdefault(v, k)
        for v in ins:
            if v is not None and v in first:
                last[v] = k
    plan = MemoryPlan()
    placed: list[tuple[int, int, int, int]] = []   # (offset, end, first, last)
    order = sorted(first, key=lambda v: (-_aligned(max(v.nbytes, 1)), first[v]))
    for v in order:
        size = _aligned(max(v.nbytes, 1))
        lo, hi = first[v], last[v]
        busy = sorted((o, e) for o, e, f, l in placed if f <= hi and lo <= l)
        offset = 0
        for o, e in busy:
            if offset + size <= o:
                break
            offset = max(offset, e)
        placed.append((offset, offset + size, lo, hi))
        plan.offsets[v] = offset
        plan.lifetimes[v] = (lo, hi)
        plan.unplanned_bytes += v.nbytes
        plan.total_bytes = max(plan.total_bytes, offset + size)
    return plan
