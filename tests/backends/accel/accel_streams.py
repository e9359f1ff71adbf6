"""Hand-assembled accelerator streams shared by the accelerator tests.

`tiled_gemm` builds the worked example of ACCEL.md 2.5 with real data: out = a @ b.T in int8
with int32 accumulation and a truncating store, split over `threads` virtual threads that each
own a slice of the output blocks and their own copy of every buffer.  The per-thread statements
are interleaved as InjectVirtualThread would interleave them, and the tokens are requested the
way CoProcSync places them; the Assembler turns the requests into flags.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tensorforge.backends.accel import AccelConfig, Assembler, DramBuilder, Gemm, Load, MemType, Stage, Store, Uop, read

LD, CMP, ST = Stage.LOAD, Stage.COMPUTE, Stage.STORE


@dataclass
class GemmCase:
    program: tuple
    dram: np.ndarray
    out_address: int
    reference: np.ndarray       # int8 result the stream must produce

    def result(self, config: AccelConfig) -> np.ndarray:
        m, n = self.reference.shape
        return read(self.dram, self.out_address, config.out_elem_bytes, (m, n), np.int8)


def pack_weights(b: np.ndarray, block: int) -> np.ndarray:
    """(N, K) -> (N/block, K/block, block, block) WGT elements indexed [out][in]."""
    n, k = b.shape
    return b.reshape(n // block, block, k // block, block).transpose(0, 2, 1, 3).copy()


def tiled_gemm(config: AccelConfig, m: int, k_blocks: int, n_blocks: int, threads: int,
               seed: int = 0, a: np.ndarray | None = None,
               b: np.ndarray | None = None) -> GemmCase:
    """out[m, n] = a[m, :] . b[n, :] with `threads` virtual threads splitting the n blocks."""
    blk = config.block_in
    rng = np.random.default_rng(seed)
    if a is None:
        a = rng.integers(-128, 128, (m, k_blocks * blk), dtype=np.int8)
    if b is None:
        b = rng.integers(-128, 128, (n_blocks * blk, k_blocks * blk), dtype=np.int8)
    assert n_blocks % threads == 0
    nbt = n_blocks // threads            # output blocks per thread
    dram = DramBuilder(config)
    a_addr = dram.put(a, config.inp_elem_bytes)               # element (row, kb) at row*KB + kb
    b_addr = dram.put(pack_weights(b, blk), config.wgt_elem_bytes)  # (nb, kb) at nb*KB + kb
    out_addr = dram.alloc(m * n_blocks * config.out_elem_bytes, config.out_elem_bytes)
    # per-thread buffer copies: INP m rows, WGT nbt blocks, ACC m*nbt elements
    inp_base = [t * m for t in range(threads)]
    wgt_base = [t * nbt for t in range(threads)]
    acc_base = [t * m * nbt for t in range(threads)]
    uops = []
    for t in range(threads):   # one kernel per thread: uop nb -> (acc nb, inp row 0, wgt nb)
        uops += [Uop(dst=acc_base[t] + nb, src=inp_base[t], wgt=wgt_base[t] + nb)
                 for nb in range(nbt)]
    uop_addr = dram.put_uops(uops)

    def gemm(t: int, reset: bool) -> Gemm:
        return Gemm(reset=reset, uop_bgn=t * nbt, uop_end=(t + 1) * nbt, iter_out=m,
                    dst_factor_out=nbt, src_factor_out=1)

    asm = Assembler()
    asm.emit(Load(memory_type=MemType.UOP, sram_base=0, dram_base=uop_addr, y_size=1,
                  x_size=len(uops), x_stride=len(uops)))
    for t in range(threads):
        asm.emit(gemm(t, reset=True))
        asm.dep_push(CMP, LD)                     # priming: buffer copy t is free
    for kb in range(k_blocks):
        for t in range(threads):
            asm.dep_pop(CMP, LD)
            asm.emit(Load(memory_type=MemType.INP, sram_base=inp_base[t],
                          dram_base=a_addr + kb, y_size=m, x_size=1, x_stride=k_blocks))
            asm.emit(Load(memory_type=MemType.WGT, sram_base=wgt_base[t],
                          dram_base=b_addr + t * nbt * k_blocks + kb, y_size=nbt, x_size=1,
                          x_stride=k_blocks))
            asm.dep_push(LD, CMP)
        for t in range(threads):
            asm.dep_pop(LD, CMP)
            asm.emit(gemm(t, reset=False))
            asm.dep_push(CMP, LD)
    for _ in range(threads):
        asm.dep_push(CMP, ST)
    for _ in range(threads):
        asm.dep_pop(CMP, LD)                      # drain the loop-carried WAR tokens
    for t in range(threads):
        asm.dep_pop(CMP, ST)
        asm.emit(Store(sram_base=acc_base[t], dram_base=out_addr + t * nbt, y_size=m,
                       x_size=nbt, x_stride=n_blocks))
    program = asm.finish()
    reference = (a.astype(np.int64) @ b.astype(np.int64).T).astype(np.int32).astype(np.int8)
    return GemmCase(program, dram.build(), out_addr, reference)


def worked_example(threads: int = 2, steps: int = 2) -> tuple:
    """The instruction stream of ACCEL.md 2.5 (two threads, k = 0..1, by default) with
    placeholder addresses: its flags and timing matter, not its data."""
    def load(kind: MemType, t: int, k: int) -> Load:
        return Load(memory_type=kind, sram_base=t, dram_base=k, y_size=1, x_size=1, x_stride=1)

    def gemm(t: int, reset: bool = False) -> Gemm:
        return Gemm(reset=reset, uop_bgn=t, uop_end=t + 1)

    thread_ids = range(threads)
    asm = Assembler()
    for t in thread_ids:
        asm.emit(gemm(t, reset=True))
        asm.dep_push(CMP, LD)
    for k in range(steps):
        for t in thread_ids:
            asm.dep_pop(CMP, LD)
            asm.emit(load(MemType.INP, t, k))
            asm.emit(load(MemType.WGT, t, k))
            asm.dep_push(LD, CMP)
        for t in thread_ids:
            asm.dep_pop(LD, CMP)
            asm.emit(gemm(t))
            asm.dep_push(CMP, LD)
    for _ in thread_ids:
        asm.dep_push(CMP, ST)
    for _ in thread_ids:
        asm.dep_pop(CMP, LD)
    for t in thread_ids:
        asm.dep_pop(CMP, ST)
        asm.emit(Store(sram_base=t, dram_base=t, y_size=1, x_size=1, x_stride=1))
    return asm.finish()
