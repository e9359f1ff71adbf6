"""Token insertion: blocks of instructions -> one stream with dependence flags.

CoProcSync (ACCEL.md 4.5) puts a push at the end of a stage block and the matching pop at the
start of the next block when the two run on different modules; a loop adds the loop-carried
pair, a priming push before it and a draining pop after it.  The code generator has already
unrolled the host loops, so the same rule reads: *within each virtual thread*, every two
consecutive blocks on different modules exchange one token (RAW when the data flows forward,
WAR when a module must wait before overwriting a buffer the other still reads).  Within a thread
every block therefore happens after every earlier one; threads own disjoint buffers and need no
order between them.

Tokens carry no data, so the j-th pop of a queue takes the j-th push.  That pairs each pop with
the push meant for it only if the producers of a queue come in the same order as its consumers;
the interleaving of virtual threads (thread by thread, statement by statement) keeps that, and
`assemble` checks it.  The Assembler then sets the flags (no-ops where a block has none) and
ends the stream with FINISH.
"""
from __future__ import annotations

from typing import Sequence

from .assembler import Assembler
from .emit import Block
from .isa import Insn, Stage
from .protocol import QUEUE_BETWEEN, ProtocolError


def pair_tokens(blocks: Sequence[Block]) -> None:
    """Set `pop_from`/`push_to` on consecutive blocks of each thread that change module."""
    last: dict[int, Block] = {}
    for b in blocks:
        prev = last.get(b.thread)
        if prev is not None and prev.stage != b.stage:
            if (prev.stage, b.stage) not in QUEUE_BETWEEN:
                raise ProtocolError(f"virtual thread {b.thread}: a {prev.stage.name.lower()} block is "
                                    f"followed by a {b.stage.name.lower()} block, and there is no "
                                    "token queue between those modules")
            prev.push_to, b.pop_from = b.stage, prev.stage
        last[b.thread] = b


def assemble(blocks: Sequence[Block]) -> tuple[Insn, ...]:
    """The stream: each block's pop, its instructions, its push, in program order; FINISH."""
    pair_tokens(blocks)
    _check_fifo_order(blocks)
    asm = Assembler()
    for b in blocks:
        if b.pop_from is not None:
            asm.dep_pop(b.pop_from, b.stage)
        for insn in b.insns:
            asm.emit(insn)
        if b.push_to is not None:
            asm.dep_push(b.stage, b.push_to)
    return asm.finish()


def _check_fifo_order(blocks: Sequence[Block]) -> None:
    """Each queue's pops, in program order, must be meant for its pushes in program order."""
    producers: dict[tuple[Stage, Stage], list[int]] = {}
    last: dict[int, int] = {}
    for i, b in enumerate(blocks):
        if b.pop_from is not None:
            q = (b.pop_from, b.stage)
            producers.setdefault(q, []).append(last[b.thread])
        last[b.thread] = i
    for q, prods in producers.items():
        if prods != sorted(prods):
            raise ProtocolError(f"the virtual threads interleave unevenly: on queue "
                                f"{QUEUE_BETWEEN[q].text} a pop would take another thread's token")
