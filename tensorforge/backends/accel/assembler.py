"""Assembler: build an instruction stream from instructions plus DepPush/DepPop requests.

A compiler (or a test) says *which* tokens flow between stages; this helper sets the flags, the
way VTA's runtime `InsnQueue` does (ACCEL.md 2.4), so nobody hand-sets flags:

- `dep_pop(src, dst)` records a pending pop for stage dst (pop_prev if src < dst, else
  pop_next); the next instruction emitted on dst takes it.  If that kind is already pending,
  the pending one is first committed as a no-op on dst.
- `dep_push(src, dst)` first commits src's pending pops as a no-op; then it sets the push flag
  on the last instruction of the stream if that one runs on src and does not have the flag yet,
  and otherwise appends a no-op on src carrying the push.
- `finish()` ends the stream: push store->compute and load->compute, pop both on compute, then
  FINISH, so FINISH runs after the last load and the last store have completed.

No-ops are DMA instructions with x_size 0: LOAD INP on the load stage, LOAD UOP on compute and
STORE on store.  Every stream this helper returns passes the program-order replay of the
checker when the requests are balanced (each pop preceded by its push).
"""
from __future__ import annotations

from dataclasses import replace

from .isa import Finish, Insn, Load, MemType, Stage, Store, stage_of
from .protocol import QUEUE_BETWEEN


def noop(stage: Stage, **flags: bool) -> Insn:
    """The instruction that does nothing on `stage` but carries dependence flags."""
    if stage == Stage.LOAD:
        return Load(memory_type=MemType.INP, sram_base=0, dram_base=0, y_size=0, x_size=0,
                    x_stride=0, **flags)
    if stage == Stage.COMPUTE:
        return Load(memory_type=MemType.UOP, sram_base=0, dram_base=0, y_size=0, x_size=0,
                    x_stride=0, **flags)
    return Store(sram_base=0, dram_base=0, y_size=0, x_size=0, x_stride=0, **flags)


class Assembler:
    """Collects a stream; `emit` instructions and `dep_push`/`dep_pop` between them."""

    def __init__(self) -> None:
        self._stream: list[Insn] = []
        self._pending: dict[Stage, dict[str, bool]] = {s: {} for s in Stage}
        self._finished = False

    @property
    def program(self) -> tuple[Insn, ...]:
        return tuple(self._stream)

    def emit(self, insn: Insn) -> int:
        """Append `insn` (it takes its stage's pending pops); return its index in the stream."""
        self._check_open()
        if isinstance(insn, Finish):
            raise ValueError("FINISH is appended by finish(), which first synchronizes the "
                             "load and store stages")
        stage = stage_of(insn)
        pending = self._pending[stage]
        if pending:
            insn = replace(insn, **pending)
            self._pending[stage] = {}
        self._stream.append(insn)
        return len(self._stream) - 1

    def dep_pop(self, src: Stage, dst: Stage) -> None:
        """Stage dst will wait for a token from src before its next instruction."""
        self._check_open()
        _queue(src, dst)
        flag = "pop_prev" if src < dst else "pop_next"
        if self._pending[dst].get(flag):
            self._commit_pending(dst)
        self._pending[dst][flag] = True

    def dep_push(self, src: Stage, dst: Stage) -> None:
        """Stage src sends a token to dst when its latest instruction has finished."""
        self._check_open()
        _queue(src, dst)
        self._commit_pending(src)
        flag = "push_next" if src < dst else "push_prev"
        if self._stream:
            last = self._stream[-1]
            if stage_of(last) == src and not getattr(last, flag):
                self._stream[-1] = replace(last, **{flag: True})
                return
        self._stream.append(noop(src, **{flag: True}))

    def finish(self) -> tuple[Insn, ...]:
        """Synchronize the stages, append FINISH and return the stream."""
        self._check_open()
        self.dep_push(Stage.STORE, Stage.COMPUTE)
        self.dep_push(Stage.LOAD, Stage.COMPUTE)
        self.dep_pop(Stage.STORE, Stage.COMPUTE)
        self.dep_pop(Stage.LOAD, Stage.COMPUTE)
        for stage in Stage:
            self._commit_pending(stage)
        self._stream.append(Finish())
        self._finished = True
        return self.program

    def _commit_pending(self, stage: Stage) -> None:
        if self._pending[stage]:
            self._stream.append(noop(stage, **self._pending[stage]))
            self._pending[stage] = {}

    def _check_open(self) -> None:
        if self._finished:
            raise ValueError("the stream already ends with FINISH; start a new Assembler")


def _queue(src: Stage, dst: Stage):
    try:
        return QUEUE_BETWEEN[(Stage(src), Stage(dst))]
    except KeyError:
        raise ValueError(f"there is no token queue from {Stage(src).name.lower()} to "
                         f"{Stage(dst).name.lower()}; only adjacent stages exchange "
                         f"tokens") from None
