"""Static memory planning: intermediate tensors share storage by liveness.

Each step (a fused group or opaque kernel) defines values and reads values.  Walking the steps in
order, an output takes the smallest free storage block that fits (growing the largest free block
when none fits, or making a new one), and a value's block is freed after its last reader.  A
step's outputs are placed before its inputs are freed, so no kernel reads and writes the same
memory.  Graph inputs, parameters and graph outputs are not planned (outputs are fresh arrays
handed to the caller).
"""
from __future__ import annotations

from dataclasses import dataclass, field

ALIGN = 64


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


@dataclass
class MemoryPlan:
    offsets: dict = field(default_factory=dict)   # Value -> byte offset in the arena
    block_of: dict = field(default_factory=dict)  # Value -> storage block index
    blocks: list = field(default_factory=list)    # block sizes in bytes
    total_bytes: int = 0                           # arena size
    unplanned_bytes: int = 0                       # sum of all planned intermediates' sizes

    def summary(self) -> str:
        ratio = self.total_bytes / self.unplanned_bytes if self.unplanned_bytes else 0.0
        return (f"memory plan: {len(self.offsets)} intermediate tensors ({self.unplanned_bytes / 1e6:.2f} MB) "
                f"in {len(self.blocks)} blocks, arena {self.total_bytes / 1e6:.2f} MB ({ratio:.0%})")


def plan_memory(steps: list[tuple[tuple, tuple]], external: set) -> MemoryPlan:
    """`steps`: (inputs, outputs) Values per step, in execution order.  `external`: values not to
    plan (graph inputs, params, graph outputs)."""
    last_use: dict = {}
    for k, (ins, outs) in enumerate(steps):
        for v in ins:
            if v is not None:
                last_use[v] = k
        for v in outs:
            last_use.setdefault(v, k)
    plan = MemoryPlan()
    free: list[int] = []
    for k, (ins, outs) in enumerate(steps):
        for v in outs:
            if v in external:
                continue
            need = _aligned(max(v.nbytes, 1))
            plan.unplanned_bytes += v.nbytes
            fitting = [b for b in free if plan.blocks[b] >= need]
            if fitting:
                block = min(fitting, key=lambda b: plan.blocks[b])
                free.remove(block)
            elif free:
                block = max(free, key=lambda b: plan.blocks[b])
                free.remove(block)
                plan.blocks[block] = need
            else:
                block = len(plan.blocks)
                plan.blocks.append(need)
            plan.block_of[v] = block
        released = {v for v in list(ins) + list(outs) if v is not None and v in plan.block_of
                    and last_use.get(v) == k}
        for v in released:
            b = plan.block_of[v]
            if b not in free and not any(plan.block_of.get(u) == b and last_use.get(u, -1) > k
                                         for u in plan.block_of):
                free.append(b)
    offset = 0
    starts = []
    for size in plan.blocks:
        starts.append(offset)
        offset += size
    plan.total_bytes = offset
    plan.offsets = {v: starts[b] for v, b in plan.block_of.items()}
    return plan
