"""Stream checker: prove an instruction stream deadlock-free, leak-free and race-free.

`check_stream(program, config, dram)` raises ProtocolError for

1. an illegal flag for the instruction's module, or a FINISH that is not last or pops;
2. a pop before its matching push: replaying the stream in program order with one counter per
   token queue (pops first, then pushes), a counter goes below zero.  If that never happens the
   concurrent machine cannot deadlock (ACCEL.md 2.3);
3. a non-zero counter at FINISH (a leftover token lets a later pop pass too early), or an
   instruction that does not happen before FINISH (the host would see the run end too soon);
4. a race: two instructions in different modules touch overlapping SRAM elements, at least one
   writes, and neither happens before the other through program order and tokens.

Race algorithm.  Happens-before is tracked with vector clocks over the three modules:
`before[i][m]` counts the instructions of module m that finish before instruction i starts
(through i's predecessor in its module, and for each pop, the instruction whose push it takes:
the j-th pop of a queue takes the j-th push).  Because step 2 passed, every such edge points
forward in program order, so one pass in program order suffices.  For every SRAM element the
pass keeps, per module, the last instruction that wrote it and the last that read it; an access
conflicts with another module's earlier access that its clock does not cover.  Keeping only the
last access per module is enough, because a module's earlier accesses happen before its last.

SRAM footprints of GEMM and ALU come from their micro-ops, which the stream's LOAD UOP
instructions read from DRAM: pass the DRAM image as `dram` to check them.  Without it only the
DMA instructions' footprints are known and a ProtocolWarning says the race check is partial.
The checker also warns about token queues deeper than 8 (the HLS FIFO depth; above 255 is an
error: the hardware counter saturates) and about micro-ops that write the ACC element one of
the two micro-ops before them wrote (the GEMM pipeline's hazard, ACCEL.md 1.3).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .config import AccelConfig
from .cycle_model import elem_bytes
from .dram import words_to_uops
from .isa import Alu, Gemm, Insn, Load, MemType, Stage, Store, stage_of
from .protocol import ProtocolError, ProtocolWarning, Queue, check_structure, describe, pops, pushes

WARN_DEPTH = 8       # the HLS design's token FIFOs
MAX_DEPTH = 255      # the Chisel design's saturating counter

_MODULES = (Stage.LOAD, Stage.COMPUTE, Stage.STORE)


@dataclass(frozen=True)
class StreamReport:
    """What a successful check found."""
    instructions: int
    tokens: dict[str, int]          # pushes per queue (each matched by a pop)
    max_outstanding: dict[str, int]
    races_checked: str              # "all" or "dma only" (no DRAM image with the micro-ops)


def check_stream(program: Sequence[Insn], config: AccelConfig | None = None,
                 dram: np.ndarray | None = None) -> StreamReport:
    """Raise ProtocolError if `program` can deadlock, leaks a token, or races (module doc)."""
    config = config or AccelConfig()
    program = tuple(program)
    check_structure(program)
    tokens, deepest, matched = _replay_counters(program)
    races = _check_races(program, config, dram, matched)
    return StreamReport(instructions=len(program),
                        tokens={q.value[0]: tokens[q] for q in Queue},
                        max_outstanding={q.value[0]: deepest[q] for q in Queue},
                        races_checked=races)


def _replay_counters(program):
    """Program-order replay; returns pushes and peak depth per queue and, per instruction,
    the instructions whose pushes its pops take."""
    count = {q: 0 for q in Queue}
    deepest = {q: 0 for q in Queue}
    pushers: dict[Queue, list[int]] = {q: [] for q in Queue}
    popped = {q: 0 for q in Queue}
    matched: list[tuple[int, ...]] = []
    for i, insn in enumerate(program):
        sources = []
        for q in pops(insn):
            if count[q] == 0:
                raise ProtocolError(f"instruction {describe(i, insn)} pops {q.text} before any "
                                    f"matching push: the token counter would go below zero "
                                    f"(a push is missing or this pop comes too early), so the "
                                    f"stream deadlocks")
            count[q] -= 1
            sources.append(pushers[q][popped[q]])
            popped[q] += 1
        matched.append(tuple(sources))
        for q in pushes(insn):
            count[q] += 1
            pushers[q].append(i)
            deepest[q] = max(deepest[q], count[q])
            if count[q] > MAX_DEPTH:
                raise ProtocolError(f"instruction {describe(i, insn)} leaves {count[q]} tokens "
                                    f"in {q.text}; the hardware counter holds at most "
                                    f"{MAX_DEPTH}")
    left = {q: k for q, k in count.items() if k}
    if left:
        raise ProtocolError("at FINISH the token counters are not zero: " + "; ".join(
            f"{k} token(s) left in {q.text}, last pushed by "
            f"{describe(pushers[q][-1], program[pushers[q][-1]])}" for q, k in left.items())
            + " (a pop is missing, so a later run's pop would pass too early)")
    deep = {q: k for q, k in deepest.items() if k > WARN_DEPTH}
    if deep:
        warnings.warn("token queues deeper than the HLS design's FIFOs (8): " + ", ".join(
            f"{q.text} reaches {k}" for q, k in deep.items()), ProtocolWarning, stacklevel=3)
    return {q: len(pushers[q]) for q in Queue}, deepest, matched


def _check_races(program, config: AccelConfig, dram, matched) -> str:
    n = len(program)
    stage = [stage_of(insn) for insn in program]
    module = {m: k for k, m in enumerate(_MODULES)}
    local = np.zeros(n, np.int64)            # index of each instruction within its module
    after = np.zeros((n, 3), np.int64)       # clock after the instruction completes
    last_in = {m: -1 for m in _MODULES}
    counts = {m: 0 for m in _MODULES}
    uops = _UopCache(config, dram)
    state = {name: _Accesses(name, depth) for name, depth in
             (("INP", config.inp_depth), ("WGT", config.wgt_depth), ("ACC", config.acc_depth))}
    if dram is None and any(isinstance(insn, (Gemm, Alu)) for insn in program):
        warnings.warn("check_stream was given no DRAM image, so the SRAM footprints of GEMM and "
                      "ALU instructions (from their micro-ops) are not checked for races",
                      ProtocolWarning, stacklevel=3)
    for i, insn in enumerate(program):
        m = stage[i]
        clock = after[last_in[m]].copy() if last_in[m] >= 0 else np.zeros(3, np.int64)
        for source in matched[i]:
            np.maximum(clock, after[source], out=clock)
        local[i] = counts[m]
        counts[m] += 1
        accesses = _footprint(i, insn, config, uops)
        for buffer, idx, writes in accesses:
            state[buffer].check(i, m, idx, writes, clock, local, program, stage, module)
        for buffer, idx, writes in accesses:
            state[buffer].record(i, m, idx, writes)
        clock[module[m]] = local[i] + 1
        after[i] = clock
        last_in[m] = i
    _check_finish_waits(program, after[-1], last_in, module)
    return "all" if dram is not None else "dma only"


def _check_finish_waits(program, finish_clock, last_in, module) -> None:
    """FINISH tells the host the results are in DRAM: every instruction must happen before it."""
    for m, last in last_in.items():
        if last >= 0 and finish_clock[module[m]] < sum(1 for insn in program
                                                        if stage_of(insn) == m):
            raise ProtocolError(f"FINISH does not wait for {describe(last, program[last])}: no "
                                f"chain of tokens orders the last {m.name.lower()} instruction "
                                f"before it, so the host could see the run end before it does")


class _Accesses:
    """Per element of one buffer: the last writer and last reader in each module."""

    def __init__(self, name: str, depth: int) -> None:
        self.name = name
        self.last = {(m, w): np.full(depth, -1, np.int64) for m in _MODULES for w in (0, 1)}
        self.used = set()   # modules that touched this buffer

    def check(self, i, m, idx, writes, clock, local, program, stage, module) -> None:
        for other in self.used:
            if other == m:
                continue
            for other_writes in ((0, 1) if writes else (1,)):
                prev = self.last[(other, other_writes)][idx]
                seen = prev >= 0
                if not seen.any():
                    continue
                racy = seen.copy()
                racy[seen] = local[prev[seen]] >= clock[module[other]]
                if racy.any():
                    j = int(prev[racy].max())
                    elements = idx[racy]
                    raise ProtocolError(
                        f"race on {self.name}[{int(elements.min())}..{int(elements.max())}]: "
                        f"{describe(i, program[i])} {'writes' if writes else 'reads'} it while "
                        f"{describe(j, program[j])} {'writes' if other_writes else 'reads'} it, "
                        f"and no chain of program order and tokens orders the two (a "
                        f"{stage[j].name.lower()}->{stage[i].name.lower()} dependence is missing)")

    def record(self, i, m, idx, writes) -> None:
        self.used.add(m)
        self.last[(m, int(writes))][idx] = i


class _UopCache:
    """The micro-op cache as compute's LOAD UOP instructions fill it (compute runs in order)."""

    def __init__(self, config: AccelConfig, dram) -> None:
        self.config = config
        self.dram = None if dram is None else np.ascontiguousarray(dram).reshape(-1).view(np.uint8)
        self.fields = [np.zeros(config.uop_depth, np.int64) for _ in range(3)]

    def load(self, insn: Load) -> None:
        if self.dram is None or insn.x_size == 0:
            return
        size = elem_bytes(MemType.UOP, self.config)
        words = self.dram[:len(self.dram) // size * size].view(np.uint32)
        rows = insn.dram_base + np.arange(insn.y_size)[:, None] * insn.x_stride
        idx = (rows + np.arange(insn.x_size)[None, :]).reshape(-1)
        if idx.max() >= len(words) or insn.sram_base + len(idx) > self.config.uop_depth:
            return   # the simulator reports the bad address; nothing to check here
        for target, values in zip(self.fields, words_to_uops(words[idx], self.config)):
            target[insn.sram_base:insn.sram_base + len(idx)] = values

    def indices(self, insn, which: int, factor_out: int, factor_in: int) -> np.ndarray:
        base = self.fields[which][insn.uop_bgn:insn.uop_end]
        idx = (base[None, None, :] + np.arange(insn.iter_out)[:, None, None] * factor_out
               + np.arange(insn.iter_in)[None, :, None] * factor_in)
        return np.unique(idx)

    def hazard(self, i: int, insn) -> None:
        dst = self.fields[0][insn.uop_bgn:insn.uop_end]
        for gap in (1, 2):
            same = np.flatnonzero(dst[gap:] == dst[:-gap]) if len(dst) > gap else []
            if len(same):
                u = insn.uop_bgn + int(same[0]) + gap
                warnings.warn(f"instruction #{i} ({insn}): micro-op {u} writes ACC element "
                              f"{int(dst[same[0] + gap])} like the micro-op {gap} before it; "
                              f"the GEMM pipeline needs two other micro-ops in between",
                              ProtocolWarning, stacklevel=5)
                return


def _footprint(i: int, insn: Insn, config: AccelConfig, uops: _UopCache):
    """(buffer, element indices, writes) for each SRAM buffer `insn` touches."""
    if isinstance(insn, Load):
        if insn.x_size == 0:
            return []
        kind = MemType(insn.memory_type)
        if kind == MemType.UOP:
            uops.load(insn)
            return []
        rows = insn.y_pad_0 + insn.y_size + insn.y_pad_1
        cols = insn.x_pad_0 + insn.x_size + insn.x_pad_1
        idx = _clip(insn.sram_base + np.arange(rows * cols), kind, config)
        name = {MemType.INP: "INP", MemType.WGT: "WGT"}.get(kind, "ACC")
        return [(name, idx, True)]
    if isinstance(insn, Store):
        if insn.x_size == 0:
            return []
        idx = insn.sram_base + np.arange(insn.y_size * insn.x_size)
        return [("ACC", idx[idx < config.acc_depth], False)]
    if isinstance(insn, (Gemm, Alu)) and uops.dram is not None and insn.num_iterations:
        if insn.uop_end > config.uop_depth:
            return []
        uops.hazard(i, insn)
        dst = _in(uops.indices(insn, 0, insn.dst_factor_out, insn.dst_factor_in),
                  config.acc_depth)
        found = [("ACC", dst, True)]
        if isinstance(insn, Gemm) and not insn.reset:
            found.append(("INP", _in(uops.indices(insn, 1, insn.src_factor_out,
                                                  insn.src_factor_in), config.inp_depth), False))
            found.append(("WGT", _in(uops.indices(insn, 2, insn.wgt_factor_out,
                                                  insn.wgt_factor_in), config.wgt_depth), False))
        elif isinstance(insn, Alu) and not insn.use_imm:
            found.append(("ACC", _in(uops.indices(insn, 1, insn.src_factor_out,
                                                  insn.src_factor_in), config.acc_depth), False))
        return found
    return []


def _clip(idx: np.ndarray, kind: MemType, config: AccelConfig) -> np.ndarray:
    depth = {MemType.INP: config.inp_depth, MemType.WGT: config.wgt_depth}.get(
        kind, config.acc_depth)
    return idx[idx < depth]


def _in(idx: np.ndarray, depth: int) -> np.ndarray:
    return idx[idx < depth]
