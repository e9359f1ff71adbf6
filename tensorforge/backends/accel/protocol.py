"""The dependence-token protocol: the four queues and what each flag of each module means.

Load (stage 1), compute (2) and store (3) each run their instructions in order; they
synchronize only through four information-less token queues (ACCEL.md 2.2), each a counter:

    load -> compute (RAW: data is in SRAM)          compute -> load (WAR: INP/WGT slot free)
    compute -> store (RAW: results ready)           store -> compute (WAR: ACC/OUT slot drained)

A pop takes one token before the instruction starts; a push adds one after it finishes.  The
table `FLAG_QUEUES` says which queue each flag of each module uses; a flag missing from a
module's row is illegal there.  Each queue has exactly one producer and one consumer module.
"""
from __future__ import annotations

import enum
from typing import Sequence

from .isa import DEP_FLAGS, Finish, Insn, Stage, stage_of


class Queue(enum.Enum):
    L2C = ("load->compute", "RAW")
    C2L = ("compute->load", "WAR")
    C2S = ("compute->store", "RAW")
    S2C = ("store->compute", "WAR")

    @property
    def text(self) -> str:
        return f"{self.value[0]} ({self.value[1]})"


FLAG_QUEUES: dict[Stage, dict[str, Queue]] = {
    Stage.LOAD: {"pop_next": Queue.C2L, "push_next": Queue.L2C},
    Stage.COMPUTE: {"pop_prev": Queue.L2C, "pop_next": Queue.S2C,
                    "push_prev": Queue.C2L, "push_next": Queue.C2S},
    Stage.STORE: {"pop_prev": Queue.C2S, "push_prev": Queue.S2C},
}

# The queue between two adjacent stages, by (from, to).
QUEUE_BETWEEN: dict[tuple[Stage, Stage], Queue] = {
    (Stage.LOAD, Stage.COMPUTE): Queue.L2C, (Stage.COMPUTE, Stage.LOAD): Queue.C2L,
    (Stage.COMPUTE, Stage.STORE): Queue.C2S, (Stage.STORE, Stage.COMPUTE): Queue.S2C,
}


class ProtocolError(ValueError):
    """An instruction stream breaks the token protocol (or would race, deadlock or leak)."""


class ProtocolWarning(UserWarning):
    """A stream is legal but risky: deep token queues, or a micro-op hazard."""


def describe(index: int, insn: Insn) -> str:
    """'#7 (compute: GEMM uop[0:4] ...)': how errors name an instruction."""
    return f"#{index} ({stage_of(insn).name.lower()}: {insn})"


def pops(insn: Insn) -> tuple[Queue, ...]:
    row = FLAG_QUEUES[stage_of(insn)]
    return tuple(row[f] for f in ("pop_prev", "pop_next") if getattr(insn, f) and f in row)


def pushes(insn: Insn) -> tuple[Queue, ...]:
    row = FLAG_QUEUES[stage_of(insn)]
    return tuple(row[f] for f in ("push_prev", "push_next") if getattr(insn, f) and f in row)


def check_structure(program: Sequence[Insn]) -> None:
    """Legal flags per module, and exactly one FINISH, last, without pops (ACCEL.md 2.3)."""
    if not program:
        raise ProtocolError("the instruction stream is empty; it must end with FINISH")
    for index, insn in enumerate(program):
        if not isinstance(insn, Insn):
            raise ProtocolError(f"stream entry #{index} is a {type(insn).__name__}, "
                                f"not an instruction")
        stage = stage_of(insn)
        for flag in DEP_FLAGS:
            if getattr(insn, flag) and flag not in FLAG_QUEUES[stage]:
                raise ProtocolError(f"instruction {describe(index, insn)} sets {flag}, which the "
                                    f"{stage.name.lower()} module may not use "
                                    f"(it has no such token queue)")
        if isinstance(insn, Finish) and index != len(program) - 1:
            raise ProtocolError(f"FINISH at #{index} is not the last instruction "
                                f"(the stream has {len(program)})")
    last = program[-1]
    if not isinstance(last, Finish):
        raise ProtocolError(f"the stream does not end with FINISH (last: "
                            f"{describe(len(program) - 1, last)})")
    if last.pop_prev or last.pop_next:
        raise ProtocolError(f"FINISH #{len(program) - 1} pops a token; FINISH cannot contain a "
                            f"pop (put the pops on a no-op just before it)")
