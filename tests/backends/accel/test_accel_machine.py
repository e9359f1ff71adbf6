"""Hand-assembled accelerator programs against NumPy: DMA, padding, GEMM, every ALU op.

Each program goes through the whole simulator (tokens, modules, cycle model); the results
are read back from DRAM and compared bit for bit.  Micro-op loops are checked against a plain
Python loop over (i_out, i_in, u), the semantics of ACCEL.md 1.3 written out directly.
"""
from __future__ import annotations

import numpy as np
import pytest

from tensorforge.backends.accel import (
    AccelConfig,
    Alu,
    AluOp,
    Assembler,
    DramBuilder,
    Gemm,
    Load,
    MemType,
    SimulationError,
    Simulator,
    Stage,
    Store,
    Uop,
    check_stream,
    read,
)

C = AccelConfig()
LD, CMP, ST = Stage.LOAD, Stage.COMPUTE, Stage.STORE
RNG = np.random.default_rng(7)


def run(asm: Assembler, dram: DramBuilder):
    program = asm.finish()
    image = dram.build()
    check_stream(program, C, image)
    stats = Simulator(C).run(program, image)
    return image, stats


def store_acc(asm: Assembler, dram: DramBuilder, sram_base: int, count: int) -> int:
    """Store `count` ACC elements (truncated to int8) after the compute stage is done."""
    out = dram.alloc(count * C.out_elem_bytes, C.out_elem_bytes)
    asm.dep_push(CMP, ST)
    asm.dep_pop(CMP, ST)
    asm.emit(Store(sram_base=sram_base, dram_base=out, y_size=1, x_size=count, x_stride=count))
    return out


def load_uops(asm: Assembler, dram: DramBuilder, uops: list[Uop], sram_base: int = 0) -> None:
    address = dram.put_uops(uops)
    asm.emit(Load(memory_type=MemType.UOP, sram_base=sram_base, dram_base=address, y_size=1,
                  x_size=len(uops), x_stride=len(uops)))


def load_acc(asm: Assembler, dram: DramBuilder, values: np.ndarray, sram_base: int = 0) -> None:
    address = dram.put(values.astype(np.int32), C.acc_elem_bytes)
    asm.emit(Load(memory_type=MemType.ACC, sram_base=sram_base, dram_base=address, y_size=1,
                  x_size=len(values), x_stride=len(values)))


def loop_indices(insn, uops: list[Uop], field: str):
    """(i_out, i_in, u) in order -> index, written as the plain triple loop."""
    factor = {"dst": (insn.dst_factor_out, insn.dst_factor_in),
              "src": (insn.src_factor_out, insn.src_factor_in),
              "wgt": (getattr(insn, "wgt_factor_out", 0), getattr(insn, "wgt_factor_in", 0))}
    out = []
    for i_out in range(insn.iter_out):
        for i_in in range(insn.iter_in):
            for u in range(insn.uop_bgn, insn.uop_end):
                f_out, f_in = factor[field]
                out.append(getattr(uops[u], field) + i_out * f_out + i_in * f_in)
    return out


def wrap32(x: np.ndarray) -> np.ndarray:
    return x.astype(np.int64).astype(np.int32)


# --- DMA -----------------------------------------------------------------------------------

def test_load_store_round_trip_with_strides():
    # a 6 x 10 grid of OUT-sized elements; load the 4 x 3 window at (1, 2) into ACC as int8
    grid = RNG.integers(-128, 128, (6, 10, 16), dtype=np.int8)
    dram = DramBuilder(C)
    src = dram.put(grid, C.out_elem_bytes)
    out = dram.alloc(4 * 5 * C.out_elem_bytes, C.out_elem_bytes)
    asm = Assembler()
    asm.emit(Load(memory_type=MemType.ACC_8BIT, sram_base=7, dram_base=src + 1 * 10 + 2,
                  y_size=4, x_size=3, x_stride=10))
    asm.dep_push(CMP, ST)
    asm.dep_pop(CMP, ST)
    # store back into a 4 x 5 grid, columns 1..3
    asm.emit(Store(sram_base=7, dram_base=out + 1, y_size=4, x_size=3, x_stride=5))
    image, stats = run(asm, dram)
    got = read(image, out, C.out_elem_bytes, (4, 5, 16), np.int8)
    expected = np.zeros((4, 5, 16), np.int8)
    expected[:, 1:4] = grid[1:5, 2:5]
    np.testing.assert_array_equal(got, expected)
    assert stats.dma_bytes == {"inp": 0, "wgt": 0, "acc": 4 * 3 * 16, "uop": 0, "out": 4 * 3 * 16}


def test_store_truncates_accumulators_to_their_low_bits():
    values = RNG.integers(-2**31, 2**31, (5, 16), dtype=np.int64).astype(np.int32)
    values[0, :4] = [127, 128, -129, 255]
    dram = DramBuilder(C)
    asm = Assembler()
    load_acc(asm, dram, values)
    out = store_acc(asm, dram, 0, 5)
    image, _ = run(asm, dram)
    got = read(image, out, C.out_elem_bytes, (5, 16), np.int8)
    np.testing.assert_array_equal(got, values.astype(np.int8))
    assert list(got[0, :4]) == [127, -128, 127, -1]


def test_padded_load_fills_zeros_around_the_tile():
    tile = RNG.integers(-2**20, 2**20, (3, 4, 16), dtype=np.int64).astype(np.int32)
    dram = DramBuilder(C)
    src = dram.put(tile, C.acc_elem_bytes)
    asm = Assembler()
    load_acc(asm, dram, np.full((60, 16), -5))      # stale data where the padding goes
    asm.emit(Load(memory_type=MemType.ACC, sram_base=2, dram_base=src, y_size=3, x_size=4,
                  x_stride=4, y_pad_0=1, y_pad_1=2, x_pad_0=2, x_pad_1=1))
    rows, cols = 1 + 3 + 2, 2 + 4 + 1
    out = store_acc(asm, dram, 2, rows * cols)
    image, stats = run(asm, dram)
    expected = np.zeros((rows, cols, 16), np.int32)
    expected[1:4, 2:6] = tile
    got = read(image, out, C.out_elem_bytes, (rows, cols, 16), np.int8)
    np.testing.assert_array_equal(got, expected.astype(np.int8))


def test_padded_input_load_feeds_the_gemm():
    # 2 x 3 input elements padded by 1 on every side -> 4 x 5; GEMM every position with W
    x = RNG.integers(-128, 128, (2, 3, 16), dtype=np.int8)
    w = RNG.integers(-128, 128, (16, 16), dtype=np.int8)
    dram = DramBuilder(C)
    xa, wa = dram.put(x, C.inp_elem_bytes), dram.put(w, C.wgt_elem_bytes)
    stale = dram.put(np.full((20, 16), 9, np.int8), C.inp_elem_bytes)
    asm = Assembler()
    asm.emit(Load(memory_type=MemType.INP, sram_base=0, dram_base=stale, y_size=1, x_size=20,
                  x_stride=20))
    asm.emit(Load(memory_type=MemType.INP, sram_base=0, dram_base=xa, y_size=2, x_size=3,
                  x_stride=3, y_pad_0=1, y_pad_1=1, x_pad_0=1, x_pad_1=1))
    asm.emit(Load(memory_type=MemType.WGT, sram_base=0, dram_base=wa, y_size=1, x_size=1,
                  x_stride=1))
    asm.dep_push(LD, CMP)
    asm.dep_pop(LD, CMP)
    load_uops(asm, dram, [Uop(0, 0, 0)])
    asm.emit(Gemm(reset=True, uop_bgn=0, uop_end=1, iter_out=20, dst_factor_out=1))
    asm.emit(Gemm(uop_bgn=0, uop_end=1, iter_out=4, iter_in=5, dst_factor_out=5,
                  dst_factor_in=1, src_factor_out=5, src_factor_in=1))
    out = store_acc(asm, dram, 0, 20)
    image, stats = run(asm, dram)
    padded = np.zeros((4, 5, 16), np.int64)
    padded[1:3, 1:4] = x
    expected = (padded @ w.astype(np.int64).T).astype(np.int8)
    np.testing.assert_array_equal(read(image, out, 16, (4, 5, 16), np.int8), expected)
    assert stats.gemm_counter == 20 and stats.dma_bytes["inp"] == (20 + 6) * 16


# --- GEMM ----------------------------------------------------------------------------------

def test_gemm_with_reset_two_level_loops_and_accumulation_matches_numpy():
    inp = RNG.integers(-128, 128, (40, 1, 16), dtype=np.int8)
    wgt = RNG.integers(-128, 128, (12, 16, 16), dtype=np.int8)
    start = RNG.integers(-2**31, 2**31, (64, 1, 16), dtype=np.int64).astype(np.int32)
    start[3] = 2**31 - 1          # accumulating into these wraps around
    start[5] = -2**31
    uops = [Uop(dst=3 * j, src=j, wgt=2 * j) for j in range(4)] + [Uop(0, 1, 1), Uop(1, 0, 0)]
    gemms = [
        Gemm(uop_bgn=0, uop_end=4, iter_out=3, iter_in=2, dst_factor_out=1, dst_factor_in=13,
             src_factor_out=7, src_factor_in=3, wgt_factor_out=1, wgt_factor_in=2),
        # same destinations again: accumulates on top
        Gemm(uop_bgn=0, uop_end=4, iter_out=3, iter_in=2, dst_factor_out=1, dst_factor_in=13,
             src_factor_out=5, src_factor_in=1, wgt_factor_out=0, wgt_factor_in=1),
        # several micro-ops of one iteration write the same element
        Gemm(uop_bgn=4, uop_end=6, iter_out=2, iter_in=3, dst_factor_out=0, dst_factor_in=0,
             src_factor_out=2, src_factor_in=1, wgt_factor_out=1, wgt_factor_in=1),
        Gemm(reset=True, uop_bgn=0, uop_end=2, iter_out=2, dst_factor_out=40),
    ]
    dram = DramBuilder(C)
    ia, wa = dram.put(inp, C.inp_elem_bytes), dram.put(wgt, C.wgt_elem_bytes)
    asm = Assembler()
    asm.emit(Load(memory_type=MemType.INP, sram_base=0, dram_base=ia, y_size=1, x_size=40,
                  x_stride=40))
    asm.emit(Load(memory_type=MemType.WGT, sram_base=0, dram_base=wa, y_size=1, x_size=12,
                  x_stride=12))
    asm.dep_push(LD, CMP)
    asm.dep_pop(LD, CMP)
    load_uops(asm, dram, uops)
    load_acc(asm, dram, start.reshape(64, 16))
    for g in gemms:
        asm.emit(g)
    out = dram.alloc(64 * 64, 64)
    asm.dep_push(CMP, ST)
    asm.dep_pop(CMP, ST)
    # the store keeps the low byte of each lane; the wrap of the high bits is checked below
    asm.emit(Store(sram_base=0, dram_base=out, y_size=1, x_size=64, x_stride=64))
    image, stats = run(asm, dram)

    acc = start.astype(np.int64).copy()
    for g in gemms:
        dst = loop_indices(g, uops, "dst")
        if g.reset:
            acc[dst] = 0
            continue
        for d, s, w in zip(dst, loop_indices(g, uops, "src"), loop_indices(g, uops, "wgt")):
            acc[d] = wrap32(acc[d] + inp[s].astype(np.int64) @ wgt[w].astype(np.int64).T)
    got = read(image, out, C.out_elem_bytes, (64, 1, 16), np.int8)
    np.testing.assert_array_equal(got, acc.astype(np.int32).astype(np.int8))
    assert stats.gemm_counter == 24 + 24 + 12


def test_gemm_accumulators_wrap_at_32_bits():
    from tensorforge.backends.accel.machine import Machine
    machine = Machine(C, np.zeros(64, np.uint8))
    machine.inp[0] = 127
    machine.wgt[0] = 127
    machine.acc[0] = 2**31 - 100
    machine.uop_dst[0] = machine.uop_src[0] = machine.uop_wgt[0] = 0
    machine.execute(0, Gemm(uop_bgn=0, uop_end=1, iter_out=3))
    expected = wrap32(np.int64(2**31 - 100) + 3 * 16 * 127 * 127)
    assert (machine.acc[0] == expected).all() and expected < 0


# --- ALU -----------------------------------------------------------------------------------

def alu_reference(acc: np.ndarray, insn: Alu, uops: list[Uop]) -> np.ndarray:
    acc = acc.astype(np.int64).copy()
    for d, s in zip(loop_indices(insn, uops, "dst"), loop_indices(insn, uops, "src")):
        x = acc[d]
        y = np.full_like(x, insn.imm) if insn.use_imm else acc[s].copy()
        if insn.alu_opcode == AluOp.MIN:
            r = np.minimum(x, y)
        elif insn.alu_opcode == AluOp.MAX:
            r = np.maximum(x, y)
        elif insn.alu_opcode == AluOp.ADD:
            r = x + y
        elif insn.alu_opcode == AluOp.MUL:
            r = x * y
        else:   # SHR: arithmetic right by y, left by -y
            r = np.array([xi >> yi if yi >= 0 else xi << -yi for xi, yi in zip(x.ravel(),
                                                                               y.ravel())])
            r = r.reshape(x.shape)
        acc[d] = wrap32(r)
    return acc


@pytest.mark.parametrize("op", list(AluOp))
@pytest.mark.parametrize("use_imm", [True, False])
def test_every_alu_op_matches_numpy(op, use_imm):
    n = 24
    start = RNG.integers(-2**31, 2**31, (n, 1, 16), dtype=np.int64).astype(np.int32)
    if op == AluOp.SHR:    # shift amounts: small, both signs, and past the width
        start[12:] = RNG.integers(-40, 40, (12, 1, 16))
    imm = {AluOp.MIN: -1000, AluOp.MAX: 127, AluOp.ADD: -32768, AluOp.SHR: 5,
           AluOp.MUL: 3001}[op]
    uops = [Uop(dst=0, src=12), Uop(dst=1, src=13)]
    insns = [Alu(uop_bgn=0, uop_end=2, iter_out=3, iter_in=2, dst_factor_out=4,
                 dst_factor_in=2, src_factor_out=4, src_factor_in=2, alu_opcode=op,
                 use_imm=use_imm, imm=imm)]
    if op == AluOp.SHR and use_imm:
        insns.append(Alu(uop_bgn=0, uop_end=1, iter_out=2, dst_factor_out=3, alu_opcode=op,
                         use_imm=True, imm=-3))
    expected = start.astype(np.int64)
    for insn in insns:
        expected = alu_reference(expected, insn, uops)
    np.testing.assert_array_equal(exact_acc(start, uops, insns), expected.astype(np.int32))


def exact_acc(start: np.ndarray, uops: list[Uop], insns: list[Alu]) -> np.ndarray:
    """Run the ALU program through the simulator and return ACC[0:len(start)] as int32.

    The store narrows to int8, so each of the four bytes is brought down with SHR by 0, 8, 16,
    24 into a scratch copy (ADD of the value to a zeroed scratch, then SHR) and stored; the
    bytes are reassembled here."""
    n = len(start)
    dram = DramBuilder(C)
    asm = Assembler()
    scratch = 1024
    copy_uops = [Uop(dst=scratch, src=0)]
    load_uops(asm, dram, list(uops) + copy_uops)
    load_acc(asm, dram, start.reshape(n, 16))
    for insn in insns:
        asm.emit(insn)
    u = len(uops)
    outs = []
    for byte in range(4):
        asm.emit(Gemm(reset=True, uop_bgn=u, uop_end=u + 1, iter_out=n, dst_factor_out=1))
        asm.emit(Alu(uop_bgn=u, uop_end=u + 1, iter_out=n, dst_factor_out=1, src_factor_out=1,
                     alu_opcode=AluOp.ADD))
        asm.emit(Alu(uop_bgn=u, uop_end=u + 1, iter_out=n, dst_factor_out=1,
                     alu_opcode=AluOp.SHR, use_imm=True, imm=8 * byte))
        outs.append(store_acc(asm, dram, scratch, n))
        asm.dep_push(ST, CMP)
        asm.dep_pop(ST, CMP)
    image, _ = run(asm, dram)
    parts = [read(image, o, 16, (n, 1, 16), np.uint8).astype(np.uint32) for o in outs]
    return (parts[0] | parts[1] << 8 | parts[2] << 16 | parts[3] << 24).view(np.int32)


def test_alu_iterations_that_depend_on_each_other_run_in_order():
    start = RNG.integers(-1000, 1000, (10, 1, 16), dtype=np.int64).astype(np.int32)
    uops = [Uop(dst=1, src=0), Uop(dst=0, src=5)]
    insns = [
        # prefix sum: ACC[i+1] += ACC[i], each iteration reads the previous one's result
        Alu(uop_bgn=0, uop_end=1, iter_out=8, dst_factor_out=1, src_factor_out=1,
            alu_opcode=AluOp.ADD),
        # reduction: ACC[0] += ACC[5 + i], one destination written four times
        Alu(uop_bgn=1, uop_end=2, iter_out=4, src_factor_out=1, alu_opcode=AluOp.ADD),
        # immediate on a repeated destination: ACC[9] >>= 1 three times
        Alu(uop_bgn=0, uop_end=1, iter_out=3, alu_opcode=AluOp.SHR, use_imm=True, imm=1,
            dst_factor_out=0),
    ]
    expected = start.astype(np.int64)
    for insn in insns:
        expected = alu_reference(expected, insn, uops)
    np.testing.assert_array_equal(exact_acc(start, uops, insns), expected.astype(np.int32))


def test_out_of_range_accesses_are_errors_not_crashes():
    dram = DramBuilder(C)
    asm = Assembler()
    load_uops(asm, dram, [Uop(dst=2000, src=0)])
    asm.emit(Gemm(uop_bgn=0, uop_end=1, iter_out=100, dst_factor_out=1))
    with pytest.raises(SimulationError, match="reaches ACC index 2099, beyond the buffer's 2048"):
        Simulator(C).run(asm.finish(), dram.build())
    asm = Assembler()
    asm.emit(Load(memory_type=MemType.INP, sram_base=0, dram_base=10, y_size=1, x_size=4,
                  x_stride=4))
    with pytest.raises(SimulationError, match="beyond the 32-byte image"):
        Simulator(C).run(asm.finish(), np.zeros(32, np.uint8))
