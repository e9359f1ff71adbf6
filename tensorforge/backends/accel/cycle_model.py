"""The cycle model: how long each instruction occupies its module (ACCEL.md 3.2).

    GEMM          N + gemm_fill, with N = iter_out * iter_in * (uop_end - uop_bgn)
                  (one block product per cycle; a reset GEMM takes as long)
    ALU           alu_ii * N + alu_fill (one vector every alu_ii cycles)
    LOAD          dma_latency + ceil(bytes / bandwidth) + padded elements (written 1 per cycle)
    STORE         dma_latency + ceil(bytes / bandwidth)
    no-op, FINISH 1 cycle

bytes counts the DRAM side only: x_size * y_size elements of the buffer moved.  With
`shared_dram`, the load and store ports share the bus and each gets half the bandwidth.
VTA's own functional simulator counts no cycles; these constants (other than the initiation
intervals of GEMM and ALU) are ours, and they live in AccelConfig so every number can be
reproduced.
"""
from __future__ import annotations

import math

from .config import AccelConfig
from .isa import Alu, Finish, Gemm, Insn, Load, MemType, Store, _MemInsn


def elem_bytes(memory_type: MemType, config: AccelConfig) -> int:
    """Bytes of one DRAM element of a LOAD/STORE of `memory_type`."""
    return {MemType.UOP: config.uop_elem_bytes, MemType.WGT: config.wgt_elem_bytes,
            MemType.INP: config.inp_elem_bytes, MemType.ACC: config.acc_elem_bytes,
            MemType.OUT: config.out_elem_bytes,
            MemType.ACC_8BIT: config.batch * config.block_out}[MemType(memory_type)]


def dma_bytes(insn: _MemInsn, config: AccelConfig) -> int:
    """Bytes a LOAD/STORE moves over the DRAM bus (padding is made on chip, not read)."""
    return insn.x_size * insn.y_size * elem_bytes(insn.memory_type, config)


def pad_elements(insn: _MemInsn) -> int:
    rows = insn.y_pad_0 + insn.y_size + insn.y_pad_1
    cols = insn.x_pad_0 + insn.x_size + insn.x_pad_1
    return rows * cols - insn.y_size * insn.x_size


def latency(insn: Insn, config: AccelConfig) -> int:
    """Cycles `insn` occupies its module under the cycle model of `config`."""
    if isinstance(insn, Gemm):
        return insn.num_iterations + config.gemm_fill
    if isinstance(insn, Alu):
        return config.alu_ii * insn.num_iterations + config.alu_fill
    if isinstance(insn, (Load, Store)):
        if insn.x_size == 0:
            return config.noop_cycles
        bandwidth = config.dma_bytes_per_cycle / (2 if config.shared_dram else 1)
        transfer = math.ceil(dma_bytes(insn, config) / bandwidth)
        extra = pad_elements(insn) if isinstance(insn, Load) else 0
        return config.dma_latency + transfer + extra
    if isinstance(insn, Finish):
        return config.finish_cycles
    raise TypeError(f"no cycle model for {type(insn).__name__}")
