"""The accelerator simulator: cycle counters, the worked example of ACCEL.md 2.5, latency
hiding with two virtual threads, deadlock and leftover-token errors."""
from __future__ import annotations

import numpy as np
import pytest
from accel_streams import tiled_gemm, worked_example

from tensorforge.backends.accel import (
    AccelConfig,
    Alu,
    AluOp,
    Assembler,
    DeadlockError,
    DramBuilder,
    Finish,
    Gemm,
    LeftoverTokensError,
    Load,
    MemType,
    ProtocolWarning,
    SimulationError,
    Simulator,
    Stage,
    Store,
    Uop,
    check_stream,
)

C = AccelConfig()
LD, CMP, ST = Stage.LOAD, Stage.COMPUTE, Stage.STORE
FLAGS = ("pop_prev", "pop_next", "push_prev", "push_next")


def illustrative_latency(insn) -> int:
    """The latencies of ACCEL.md 2.5's timeline: LOAD INP 50, WGT 100, GEMM 200, reset 16,
    STORE 40, no-ops and FINISH 1."""
    if isinstance(insn, Load):
        return 1 if insn.x_size == 0 else {MemType.INP: 50, MemType.WGT: 100}[insn.memory_type]
    if isinstance(insn, Gemm):
        return 16 if insn.reset else 200
    if isinstance(insn, Store):
        return 1 if insn.x_size == 0 else 40
    return 1


def test_counters_agree_with_a_hand_computed_timeline():
    dram = DramBuilder(C)
    asm = Assembler()
    asm.emit(Load(memory_type=MemType.UOP, sram_base=0, dram_base=dram.put_uops(
        [Uop(0, 0, 0), Uop(4, 1, 1)]), y_size=1, x_size=2, x_stride=2))          # #0 compute
    asm.emit(Load(memory_type=MemType.INP, sram_base=0, dram_base=0, y_size=1, x_size=4,
                  x_stride=4))                                                  # #1 load
    asm.emit(Load(memory_type=MemType.WGT, sram_base=0, dram_base=0, y_size=1, x_size=2,
                  x_stride=2))                                                  # #2 load
    asm.dep_push(LD, CMP)
    asm.emit(Gemm(reset=True, uop_bgn=0, uop_end=1, iter_out=8, dst_factor_out=1))  # #3
    asm.dep_pop(LD, CMP)
    asm.emit(Gemm(uop_bgn=0, uop_end=2, iter_out=4, dst_factor_out=1, src_factor_out=1))  # #4
    asm.emit(Alu(uop_bgn=0, uop_end=1, iter_out=8, dst_factor_out=1, alu_opcode=AluOp.SHR,
                 use_imm=True, imm=2))                                          # #5
    asm.dep_push(CMP, ST)
    asm.dep_pop(CMP, ST)
    out = dram.alloc(8 * 16, 16)
    asm.emit(Store(sram_base=0, dram_base=out, y_size=1, x_size=8, x_stride=8))  # #6
    program = asm.finish()            # #7 load no-op, #8 compute no-op, #9 FINISH
    assert len(program) == 10
    stats = Simulator(C).run(program, dram.build(extra_bytes=4096))
    # LOAD UOP: 64 + ceil(8 B / 8); INP 64 + 64 B / 8; WGT 64 + 512 B / 8; reset GEMM 8 + 4;
    # GEMM waits for the WGT load's token at 201, then 8 + 4; ALU 2 * 8 + 4; STORE 64 + 128 / 8;
    # the load no-op at 201; the compute no-op waits for the store's token at 313; FINISH 1.
    assert list(stats.start) == [0, 1, 73, 65, 201, 213, 233, 201, 313, 314]
    assert list(stats.end) == [65, 73, 201, 77, 213, 233, 313, 202, 314, 315]
    assert stats.cycles == 315
    assert stats.busy == {"load": 72 + 128 + 1, "compute": 65 + 12 + 12 + 20 + 1 + 1,
                          "store": 80}
    assert stats.stall == {"load": 0, "compute": (201 - 77) + (313 - 233), "store": 233 - 6}
    assert stats.gemm_cycles == stats.gemm_counter == 8
    assert stats.utilization == pytest.approx(8 / 315)
    assert stats.alu_counter == 8
    assert stats.dma_bytes == {"inp": 64, "wgt": 512, "acc": 0, "uop": 8, "out": 128}
    assert stats.instructions == {"load": 3, "compute": 6, "store": 1}
    assert stats.seconds == pytest.approx(315 / 100e6)


def test_the_assembler_reproduces_the_worked_example_stream():
    expected = [  # (module, kind, pp, pn, Pp, Pn): the table of ACCEL.md 2.5
        ("C", "reset", 0, 0, 1, 0), ("C", "reset", 0, 0, 1, 0),
        ("L", "INP", 0, 1, 0, 0), ("L", "WGT", 0, 0, 0, 1),
        ("L", "INP", 0, 1, 0, 0), ("L", "WGT", 0, 0, 0, 1),
        ("C", "GEMM", 1, 0, 1, 0), ("C", "GEMM", 1, 0, 1, 0),
        ("L", "INP", 0, 1, 0, 0), ("L", "WGT", 0, 0, 0, 1),
        ("L", "INP", 0, 1, 0, 0), ("L", "WGT", 0, 0, 0, 1),
        ("C", "GEMM", 1, 0, 1, 0), ("C", "GEMM", 1, 0, 1, 1),
        ("C", "noop", 0, 0, 0, 1), ("L", "noop", 0, 1, 0, 0),
        ("S", "OUT", 1, 0, 0, 0), ("S", "OUT", 1, 0, 1, 0),
        ("L", "noop", 0, 1, 0, 1), ("C", "noop", 1, 1, 0, 0), ("C", "FINISH", 0, 0, 0, 0),
    ]

    def kind(insn) -> str:
        if isinstance(insn, (Load, Store)):
            return "noop" if insn.x_size == 0 else insn.memory_type.name
        if isinstance(insn, Gemm):
            return "reset" if insn.reset else "GEMM"
        return "FINISH"

    from tensorforge.backends.accel import stage_of
    program = worked_example()
    got = [(stage_of(i).name[0], kind(i)) + tuple(int(getattr(i, f)) for f in FLAGS)
           for i in program]
    assert got == expected
    with pytest.warns(ProtocolWarning, match="no DRAM image"):
        report = check_stream(program, C)
    assert report.tokens == {"load->compute": 5, "compute->load": 6, "compute->store": 2,
                             "store->compute": 1}


def test_worked_example_timeline_with_the_illustrative_latencies():
    def gemm_busy(stats, program):
        return sum(e - s for insn, s, e in zip(program, stats.start, stats.end)
                   if isinstance(insn, Gemm) and not insn.reset)

    sim = Simulator(C, latency=illustrative_latency)
    two = worked_example(threads=2, steps=2)
    stats = sim.run(two, np.zeros(4096, np.uint8))
    assert stats.cycles == 1048 and gemm_busy(stats, two) == 800
    assert stats.start[6] == 166            # GEMM t0 k0 starts as soon as t0's tiles are in
    assert (stats.start[8], stats.end[8]) == (366, 416)   # LOAD t0 k1 overlaps GEMM t1 k0
    one = worked_example(threads=1, steps=4)
    serial = sim.run(one, np.zeros(4096, np.uint8))
    assert serial.cycles == 1458 and gemm_busy(serial, one) == 800


@pytest.mark.parametrize("config", [AccelConfig(), AccelConfig(log_block=5)],
                         ids=["default", "block32"])
@pytest.mark.parametrize("threads", [1, 2])
def test_tiled_gemm_streams_are_exact_and_counted(config, threads):
    case = tiled_gemm(config, m=96, k_blocks=3, n_blocks=4, threads=threads, seed=5)
    check_stream(case.program, config, case.dram)
    stats = Simulator(config).run(case.program, case.dram)
    np.testing.assert_array_equal(case.result(config), case.reference)
    assert stats.gemm_counter == 96 * 3 * 4         # MACs / (block_in * block_out)
    assert stats.out_store_nbytes == case.reference.nbytes
    assert stats.inp_load_nbytes == threads * case.reference.shape[0] * 3 * config.block_in
    assert stats.wgt_load_nbytes == 3 * 4 * config.wgt_elem_bytes


def test_double_buffering_with_two_virtual_threads_hides_latency():
    runs = {}
    for threads in (1, 2):
        case = tiled_gemm(C, m=128, k_blocks=6, n_blocks=8, threads=threads, seed=3)
        runs[threads] = Simulator(C).run(case.program, case.dram)
        np.testing.assert_array_equal(case.result(C), case.reference)
    assert runs[2].utilization > runs[1].utilization + 0.08
    assert runs[2].cycles < runs[1].cycles
    # the load module overlaps compute: it waits far less for tokens with two threads
    assert runs[2].stall["load"] < runs[1].stall["load"] / 2


def test_the_fetch_stalls_on_a_full_command_queue():
    asm = Assembler()
    for _ in range(3):
        asm.emit(Gemm(reset=True, uop_bgn=0, uop_end=1, iter_out=1000))
    asm.emit(Load(memory_type=MemType.INP, sram_base=0, dram_base=0, y_size=1, x_size=1,
                  x_stride=1))
    program = asm.finish()
    deep = Simulator(C).run(program, np.zeros(4096, np.uint8))
    shallow = Simulator(C.with_(command_queue_depth=1)).run(program, np.zeros(4096, np.uint8))
    assert deep.start[3] == 3               # fetched right away
    assert shallow.start[3] == 1004         # fetch waited for the second GEMM to leave its queue


def test_a_missing_push_is_reported_as_a_deadlock_naming_each_blocked_module():
    program = (Gemm(uop_bgn=0, uop_end=1, pop_prev=True, push_next=True),
               Store(sram_base=0, dram_base=0, y_size=1, x_size=1, x_stride=1, pop_prev=True,
                     push_prev=True),
               Load(memory_type=MemType.UOP, sram_base=0, dram_base=0, y_size=0, x_size=0,
                    x_stride=0, pop_next=True),
               Finish())
    with pytest.raises(DeadlockError) as error:
        Simulator(C).run(program, np.zeros(4096, np.uint8))
    message = str(error.value)
    assert ("the compute module is blocked at #0 (compute: GEMM uop[0:1] loop(1x1) dst(0,0) "
            "src(0,0) wgt(0,0) [pop_prev push_next]), waiting on the empty queue load->compute "
            "(RAW)") in message
    assert ("the store module is blocked at #1 (store: STORE OUT sram=0 dram=0 y=1 x=1 stride=1 "
            "[pop_prev push_prev]), waiting on the empty queue compute->store (RAW)") in message


def test_a_missing_pop_is_reported_as_leftover_tokens():
    program = list(worked_example())
    program[15] = program[15].with_flags(pop_next=False)     # the loop's draining pop
    with pytest.raises(LeftoverTokensError, match=r"1 in compute->load \(WAR\), last pushed by "
                                                  r"#13 .* \(a pop is missing\)"):
        Simulator(C).run(program, np.zeros(4096, np.uint8))


def test_finish_that_does_not_wait_for_the_store_is_an_error():
    program = list(worked_example())
    program[17] = program[17].with_flags(push_prev=False)     # store's end-of-stream token
    program[19] = program[19].with_flags(pop_next=False)      # and the pop that waits for it
    with pytest.raises(SimulationError, match="after FINISH .* does not wait for it"):
        Simulator(C, latency=illustrative_latency).run(program, np.zeros(4096, np.uint8))


def test_illegal_flags_and_a_missing_finish_are_refused_before_running():
    from tensorforge.backends.accel import ProtocolError
    load = Load(memory_type=MemType.INP, sram_base=0, dram_base=0, y_size=1, x_size=1,
                x_stride=1)
    with pytest.raises(ProtocolError, match="sets pop_prev, which the load module may not use"):
        Simulator(C).run([load.with_flags(pop_prev=True), Finish()], np.zeros(4096, np.uint8))
    with pytest.raises(ProtocolError, match="does not end with FINISH"):
        Simulator(C).run([load], np.zeros(4096, np.uint8))
