"""Simulator: run an instruction stream on the modelled accelerator and count its cycles.

`Simulator(config).run(program, dram)` executes the stream functionally (machine.py, bit-exact)
and times it with the cycle model (cycle_model.py), as a discrete-event simulation of four
concurrent parts (ACCEL.md 2 and 3.2):

- fetch dispatches instructions in program order, `fetch_per_cycle` a cycle, into the command
  queue of their module; it stalls while that queue holds `command_queue_depth` instructions;
- load, compute and store each run their queue strictly in order.  An instruction starts at
  max(module free, dispatched, each popped token available); the j-th pop of a queue is
  satisfied by the j-th push, made when the pushing instruction ends.

Algorithm: repeatedly start, among the three module heads whose tokens all exist already, the
one with the earliest start time (ties: program order).  Start times never decrease, because a
token that does not exist yet can only appear at the end of an instruction that starts later,
so this order is a valid event order; functional effects are applied in it.  Every step starts
one instruction, so the loop ends after at most len(program) steps: when no head can start
before FINISH, the heads wait for tokens nobody will push, and the run raises DeadlockError
naming each blocked module, its head instruction and the empty queue.  Tokens left over at the
end raise LeftoverTokensError.  The simulator never hangs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from .config import AccelConfig
from .cycle_model import dma_bytes
from .cycle_model import latency as model_latency
from .isa import Alu, Finish, Gemm, Insn, Load, MemType, Stage, Store, stage_of
from .machine import Machine, SimulationError
from .protocol import Queue, check_structure, describe, pops, pushes


class DeadlockError(SimulationError):
    """No module can make progress before FINISH: some pop waits for a push that never comes."""


class LeftoverTokensError(SimulationError):
    """The run finished with tokens still in a queue: a pop is missing."""


_MODULES = (Stage.LOAD, Stage.COMPUTE, Stage.STORE)
_DMA_KINDS = {MemType.INP: "inp", MemType.WGT: "wgt", MemType.ACC: "acc",
              MemType.ACC_8BIT: "acc", MemType.UOP: "uop", MemType.OUT: "out"}


@dataclass(frozen=True)
class Stats:
    """What one run measured (the cycle model's parameters are in `config`)."""
    cycles: int                     # makespan: the end of FINISH
    gemm_cycles: int                # useful GEMM cycles: sum of N over non-reset GEMMs
    busy: dict[str, int]            # per module: cycles spent executing instructions
    stall: dict[str, int]           # per module: cycles a dispatched head waited for tokens
    dma_bytes: dict[str, int]       # bytes moved per DMA kind: inp, wgt, acc, uop (loads), out
    gemm_counter: int               # block products (VTA's gemm_counter); equals gemm_cycles
    alu_counter: int                # ALU micro-op iterations
    instructions: dict[str, int]    # instructions per module
    config: AccelConfig
    start: tuple[int, ...] = field(repr=False, default=())   # per instruction, program order
    end: tuple[int, ...] = field(repr=False, default=())

    @property
    def utilization(self) -> float:
        """Useful GEMM cycles / makespan."""
        return self.gemm_cycles / self.cycles if self.cycles else 0.0

    @property
    def gemm_blocks(self) -> int:
        return self.gemm_counter

    @property
    def ideal_cycles(self) -> int:
        """MACs / MACs-per-cycle: the makespan of a perfectly fed GEMM core."""
        return self.gemm_counter

    @property
    def macs(self) -> int:
        return self.gemm_counter * self.config.macs_per_cycle

    @property
    def seconds(self) -> float:
        return self.cycles / (self.config.clock_mhz * 1e6)

    @property
    def inp_load_nbytes(self) -> int:
        return self.dma_bytes["inp"]

    @property
    def wgt_load_nbytes(self) -> int:
        return self.dma_bytes["wgt"]

    @property
    def acc_load_nbytes(self) -> int:
        return self.dma_bytes["acc"]

    @property
    def uop_load_nbytes(self) -> int:
        return self.dma_bytes["uop"]

    @property
    def out_store_nbytes(self) -> int:
        return self.dma_bytes["out"]

    def summary(self) -> str:
        modules = ", ".join(f"{m} busy {self.busy[m]} stall {self.stall[m]}" for m in self.busy)
        moved = ", ".join(f"{k} {v}" for k, v in self.dma_bytes.items())
        return (f"{self.cycles} cycles, GEMM {self.gemm_cycles} ({self.utilization:.3f} "
                f"utilization), {self.gemm_counter} block GEMMs, {self.alu_counter} ALU ops; "
                f"{modules}; bytes: {moved}; config {self.config.name}")


class Simulator:
    """Runs instruction streams for one configuration.

    `latency` replaces the cycle model (a function of the instruction), for studies with
    illustrative latencies; by default cycle_model.latency with the config's parameters.
    """

    def __init__(self, config: AccelConfig | None = None,
                 latency: Callable[[Insn], int] | None = None) -> None:
        self.config = config or AccelConfig()
        self._latency = latency or (lambda insn: model_latency(insn, self.config))

    def run(self, program: Sequence[Insn], dram: np.ndarray) -> Stats:
        """Execute `program` against the DRAM byte image `dram` (updated in place by STOREs)."""
        program = tuple(program)
        check_structure(program)
        machine = Machine(self.config, dram)
        return _Run(program, machine, self._latency, self.config).execute()


class _Run:
    """The state of one discrete-event run (see the module docstring)."""

    def __init__(self, program, machine, latency, config) -> None:
        self.program, self.machine, self.latency, self.config = program, machine, latency, config
        n = len(program)
        self.stage = [stage_of(insn) for insn in program]
        self.pops = [pops(insn) for insn in program]
        self.pushes = [pushes(insn) for insn in program]
        self.queue_of = {m: [i for i in range(n) if self.stage[i] == m] for m in _MODULES}
        self.position = [0] * n                    # index within its module's queue
        for m in _MODULES:
            for k, i in enumerate(self.queue_of[m]):
                self.position[i] = k
        self.head = {m: 0 for m in _MODULES}       # next instruction to start, per module
        self.free = {m: 0 for m in _MODULES}
        self.push_times: dict[Queue, list[int]] = {q: [] for q in Queue}
        self.push_insns: dict[Queue, list[int]] = {q: [] for q in Queue}
        self.popped = {q: 0 for q in Queue}
        self.dispatch = [0] * n
        self.fetched = 0
        self.start = [0] * n
        self.end = [0] * n

    def _advance_fetch(self) -> None:
        """Dispatch in program order while the target command queue has room."""
        depth, rate = self.config.command_queue_depth, self.config.fetch_per_cycle
        while self.fetched < len(self.program):
            i = self.fetched
            m, k = self.stage[i], self.position[i]
            earliest = i // rate
            if i:
                earliest = max(earliest, self.dispatch[i - 1])
            if k >= depth:
                blocker = self.queue_of[m][k - depth]    # its start frees the slot
                if self.head[m] <= k - depth:
                    return
                earliest = max(earliest, self.start[blocker])
            self.dispatch[i] = earliest
            self.fetched += 1

    def _ready_time(self, m: Stage) -> int | None:
        """When module m's head can start, or None if it is not fetched or lacks a token."""
        queue = self.queue_of[m]
        if self.head[m] >= len(queue):
            return None
        i = queue[self.head[m]]
        if i >= self.fetched:
            return None
        t = max(self.free[m], self.dispatch[i])
        for q in self.pops[i]:
            if self.popped[q] >= len(self.push_times[q]):
                return None
            t = max(t, self.push_times[q][self.popped[q]])
        return t

    def execute(self) -> Stats:
        program = self.program
        busy = {m: 0 for m in _MODULES}
        stall = {m: 0 for m in _MODULES}
        finish_end = None
        for _ in range(len(program)):
            self._advance_fetch()
            best = None
            for m in _MODULES:
                t = self._ready_time(m)
                if t is not None:
                    i = self.queue_of[m][self.head[m]]
                    if best is None or (t, i) < best[:2]:
                        best = (t, i, m)
            if best is None:
                break
            t, i, m = best
            insn = program[i]
            for q in self.pops[i]:
                self.popped[q] += 1
            self.machine.execute(i, insn)
            cycles = int(self.latency(insn))
            stall[m] += t - max(self.free[m], self.dispatch[i])
            self.start[i], self.end[i] = t, t + cycles
            self.free[m] = t + cycles
            busy[m] += cycles
            self.head[m] += 1
            for q in self.pushes[i]:
                self.push_times[q].append(t + cycles)
                self.push_insns[q].append(i)
            if isinstance(insn, Finish):
                finish_end = t + cycles
        self._check_end(finish_end)
        return self._stats(finish_end, busy, stall)

    def _check_end(self, finish_end: int | None) -> None:
        blocked = [m for m in _MODULES if self.head[m] < len(self.queue_of[m])]
        if blocked:
            raise DeadlockError("the stream deadlocks: " + "; ".join(
                self._why_blocked(m) for m in blocked))
        leftover = {q: len(self.push_times[q]) - self.popped[q] for q in Queue}
        leftover = {q: k for q, k in leftover.items() if k}
        if leftover:
            raise LeftoverTokensError("tokens are left over at FINISH: " + "; ".join(
                f"{k} in {q.text}, last pushed by "
                f"{describe(self.push_insns[q][-1], self.program[self.push_insns[q][-1]])}"
                for q, k in leftover.items()) + " (a pop is missing)")
        late = [i for i in range(len(self.program)) if self.end[i] > finish_end]
        if late:
            i = late[0]
            raise SimulationError(f"instruction {describe(i, self.program[i])} ends at cycle "
                                  f"{self.end[i]}, after FINISH at {finish_end}: the stream does "
                                  f"not wait for it before FINISH")

    def _why_blocked(self, m: Stage) -> str:
        i = self.queue_of[m][self.head[m]]
        where = f"the {m.name.lower()} module is blocked at {describe(i, self.program[i])}"
        if i >= self.fetched:
            f = self.fetched
            return (f"{where}, not yet fetched: fetch waits at #{f} for room in the "
                    f"{self.stage[f].name.lower()} command queue")
        empty = [q.text for q in self.pops[i] if self.popped[q] >= len(self.push_times[q])]
        return f"{where}, waiting on the empty queue {' and '.join(empty)}"

    def _stats(self, finish_end: int, busy, stall) -> Stats:
        moved = {"inp": 0, "wgt": 0, "acc": 0, "uop": 0, "out": 0}
        gemm = alu = 0
        for insn in self.program:
            if isinstance(insn, Gemm) and not insn.reset:
                gemm += insn.num_iterations
            elif isinstance(insn, Alu):
                alu += insn.num_iterations
            elif isinstance(insn, (Load, Store)):
                moved[_DMA_KINDS[MemType(insn.memory_type)]] += dma_bytes(insn, self.config)
        name = {m: m.name.lower() for m in _MODULES}
        return Stats(cycles=finish_end, gemm_cycles=gemm,
                     busy={name[m]: busy[m] for m in _MODULES},
                     stall={name[m]: stall[m] for m in _MODULES}, dma_bytes=moved,
                     gemm_counter=gemm, alu_counter=alu,
                     instructions={name[m]: len(self.queue_of[m]) for m in _MODULES},
                     config=self.config, start=tuple(self.start), end=tuple(self.end))
