"""The stream checker on mutated streams: deleted pushes, pops and matched pairs, illegal flags;
and its agreement with the simulator (ACCEL.md 2.3: a stream the replay accepts never
deadlocks)."""
from __future__ import annotations

import random

import numpy as np
import pytest
from accel_streams import tiled_gemm

from tensorforge.backends.accel import (
    AccelConfig,
    DeadlockError,
    Finish,
    LeftoverTokensError,
    ProtocolError,
    SimulationError,
    Simulator,
    check_stream,
    stage_of,
)
from tensorforge.backends.accel.protocol import FLAG_QUEUES, Queue, pops, pushes

C = AccelConfig()
FLAGS = ("pop_prev", "pop_next", "push_prev", "push_next")


@pytest.fixture(scope="module")
def case():
    return tiled_gemm(C, m=16, k_blocks=3, n_blocks=4, threads=2, seed=11)


def flag_sites(program, queue: Queue, kind: str):
    """Indices of the instructions that push (kind='push') or pop `queue`, in program order."""
    pick = pushes if kind == "push" else pops
    return [i for i, insn in enumerate(program) if queue in pick(insn)]


def without(program, index: int, queue: Queue, kind: str):
    """`program` with instruction `index`'s push or pop of `queue` removed."""
    insn = program[index]
    stage = stage_of(insn)
    flag = next(f for f, q in FLAG_QUEUES[stage].items() if q == queue and f.startswith(kind))
    out = list(program)
    out[index] = insn.with_flags(**{flag: False})
    return tuple(out)


def test_the_compiled_shape_of_stream_passes(case):
    report = check_stream(case.program, C, case.dram)
    assert report.races_checked == "all"
    assert report.tokens["compute->load"] == report.tokens["load->compute"] + 1


@pytest.mark.parametrize("queue", list(Queue))
def test_a_deleted_push_is_a_pop_before_its_push(case, queue):
    site = flag_sites(case.program, queue, "push")[0]
    mutated = without(case.program, site, queue, "push")
    with pytest.raises(ProtocolError, match=rf"pops {queue.value[0]} .* before any matching push"):
        check_stream(mutated, C, case.dram)
    with pytest.raises(DeadlockError, match=rf"waiting on the empty queue {queue.value[0]}"):
        Simulator(C).run(mutated, case.dram.copy())


@pytest.mark.parametrize("queue", list(Queue))
def test_a_deleted_pop_leaves_a_token_at_finish(case, queue):
    site = flag_sites(case.program, queue, "pop")[-1]
    mutated = without(case.program, site, queue, "pop")
    with pytest.raises(ProtocolError, match=rf"1 token\(s\) left in {queue.value[0]}"):
        check_stream(mutated, C, case.dram)
    with pytest.raises(LeftoverTokensError, match=rf"1 in {queue.value[0]}"):
        Simulator(C).run(mutated, case.dram.copy())


@pytest.mark.parametrize("pair", range(2, 6))
def test_a_deleted_matched_pair_on_the_war_queue_is_a_race(case, pair):
    # the j-th push of compute->load is matched by the j-th pop: remove both.  Counters stay
    # balanced (no deadlock, no leftover), but a load may now overwrite a buffer copy that a
    # GEMM is still reading.  (Pairs 0 and 1 are the priming tokens of the reset GEMMs, which
    # read no input: removing them races with nothing.)
    program = case.program
    push = flag_sites(program, Queue.C2L, "push")[pair]
    pop = flag_sites(program, Queue.C2L, "pop")[pair]
    mutated = without(without(program, push, Queue.C2L, "push"), pop, Queue.C2L, "pop")
    with pytest.raises(ProtocolError, match=rf"race on (INP|WGT)\[.*#{pop} \(load: LOAD .* "
                                            r"writes it while .*GEMM.* reads it.*compute->load"):
        check_stream(mutated, C, case.dram)


def test_a_deleted_matched_pair_on_the_raw_queue_is_a_race(case):
    program = case.program
    push, pop = flag_sites(program, Queue.C2S, "push")[0], flag_sites(program, Queue.C2S, "pop")[0]
    mutated = without(without(program, push, Queue.C2S, "push"), pop, Queue.C2S, "pop")
    with pytest.raises(ProtocolError, match=r"race on ACC.*STORE.* reads it while .*GEMM.*writes"):
        check_stream(mutated, C, case.dram)


@pytest.mark.parametrize("index, flag, module", [
    (1, "pop_prev", "load"), (1, "push_prev", "load"),
    (-3, "pop_next", "store"), (-3, "push_next", "store"),
])
def test_an_illegal_flag_is_rejected(case, index, flag, module):
    program = list(case.program)
    index = next(i for i, insn in enumerate(program) if stage_of(insn).name.lower() == module) \
        if index > 0 else max(i for i, insn in enumerate(program)
                              if stage_of(insn).name.lower() == module)
    program[index] = program[index].with_flags(**{flag: True})
    with pytest.raises(ProtocolError, match=rf"#{index} .* sets {flag}, which the {module} "
                                            r"module may not use"):
        check_stream(program, C, case.dram)


def test_finish_rules(case):
    program = list(case.program)
    with pytest.raises(ProtocolError, match="FINISH cannot contain a pop"):
        check_stream(program[:-1] + [Finish(pop_prev=True)], C, case.dram)
    with pytest.raises(ProtocolError, match="not the last instruction"):
        check_stream(program + [Finish()], C, case.dram)


def test_the_replay_verdict_predicts_the_simulator(case):
    """Delete random flags: a stream the replay accepts runs; one with leftover tokens is
    reported as such; the simulator deadlocks only where the replay found a pop before its
    push; it never hangs."""
    rng = random.Random(1)
    outcomes = set()
    program = case.program
    sites = [(i, f) for i, insn in enumerate(program) for f in FLAGS if getattr(insn, f)]
    for _ in range(60):
        mutated = list(program)
        for i, f in rng.sample(sites, rng.randint(1, 3)):
            mutated[i] = mutated[i].with_flags(**{f: False})
        try:
            check_stream(mutated, C, case.dram)
            verdict = "ok"
        except ProtocolError as error:
            message = str(error)
            verdict = ("deadlock" if "before any matching push" in message else
                       "leftover" if "left in" in message else "other")
        try:
            Simulator(C).run(mutated, case.dram.copy())
            outcome = "ok"
        except DeadlockError:
            outcome = "deadlock"
        except LeftoverTokensError:
            outcome = "leftover"
        except SimulationError:
            outcome = "other"
        # the replay is sufficient, not necessary: a pop before its push in program order can
        # still be served by a later push of a module that runs ahead
        if verdict in ("ok", "leftover"):
            assert outcome == verdict
        if outcome == "deadlock":
            assert verdict == "deadlock"
        outcomes.add((verdict, outcome))
    assert ("deadlock", "deadlock") in outcomes and ("leftover", "leftover") in outcomes


def test_deep_token_queues_warn():
    from tensorforge.backends.accel import Assembler, Load, MemType, ProtocolWarning, Stage, Store
    asm = Assembler()
    for k in range(9):
        asm.emit(Load(memory_type=MemType.ACC, sram_base=k, dram_base=0, y_size=1, x_size=1,
                      x_stride=1))
        asm.dep_push(Stage.COMPUTE, Stage.STORE)
    for k in range(9):
        asm.dep_pop(Stage.COMPUTE, Stage.STORE)
        asm.emit(Store(sram_base=k, dram_base=0, y_size=1, x_size=1, x_stride=1))
    with pytest.warns(ProtocolWarning, match="compute->store .* reaches 9"):
        check_stream(asm.finish(), C, np.zeros(1024, np.uint8))
