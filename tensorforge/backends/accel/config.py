"""AccelConfig: the one shared description of the simulated accelerator (VTA's `Environment`).

Every hardware parameter is a log2 value, as in VTA's `vta_config.json`; everything else is
derived from them: the lane counts of the GEMM core, the element size and depth of each on-chip
buffer, and the bit width of every ISA field that indexes a buffer.  The encoder, the simulator,
the stream checker and (later) the compiler all read one `AccelConfig`, so a preset that changes
a buffer size changes the instruction widths consistently.

The cycle-model parameters (DMA latency and bandwidth, pipeline fills, fetch rate, clock) live
here too, so a utilization number can always be reproduced from the config that produced it.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import numpy as np

# Constant field widths of the ISA (ACCEL.md 1.2); they do not scale with the configuration.
OPCODE_BITS = 3
MEMORY_TYPE_BITS = 3
SRAM_ADDR_BITS = 16
DRAM_ADDR_BITS = 32
SIZE_BITS = 16          # y_size, x_size, x_stride
PAD_BITS = 4
LOOP_ITER_BITS = 14     # iter_out, iter_in
ALU_OPCODE_BITS = 3
ALU_IMM_BITS = 16       # signed
INSN_BITS = 128
UOP_BITS = 32

_INT_DTYPES = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}


@dataclass(frozen=True)
class AccelConfig:
    """Hardware parameters (log2 values) and the cycle model.  Defaults: ACCEL.md 3.1/3.2."""

    log_inp_width: int = 3          # int8 inputs
    log_wgt_width: int = 3          # int8 weights
    log_acc_width: int = 5          # int32 accumulators
    log_batch: int = 0              # BATCH = 1
    log_block: int = 4              # BLOCK_IN = BLOCK_OUT = 16
    log_uop_buff_size: int = 15     # bytes, log2
    log_inp_buff_size: int = 15
    log_wgt_buff_size: int = 18
    log_acc_buff_size: int = 17
    # cycle model (ACCEL.md 3.2); the constants other than the initiation intervals are ours
    dma_latency: int = 64           # cycles of DRAM latency per DMA instruction
    dma_bytes_per_cycle: int = 8    # 64-bit bus
    gemm_fill: int = 4
    alu_fill: int = 4
    alu_ii: int = 2                 # cycles per ALU vector
    noop_cycles: int = 1
    finish_cycles: int = 1
    fetch_per_cycle: int = 1        # instructions the fetch module dispatches per cycle
    command_queue_depth: int = 512  # entries of each module's command queue
    shared_dram: bool = False       # load and store ports share (halve) the DRAM bandwidth
    clock_mhz: float = 100.0

    def __post_init__(self) -> None:
        for name in ("log_inp_width", "log_wgt_width", "log_acc_width"):
            if 1 << getattr(self, name) not in _INT_DTYPES:
                raise ValueError(f"AccelConfig.{name} must be 3, 4, 5 or 6 (an 8- to 64-bit "
                                 f"integer), got {getattr(self, name)}")
        for name, elem in (("log_inp_buff_size", self.inp_elem_bytes),
                           ("log_wgt_buff_size", self.wgt_elem_bytes),
                           ("log_acc_buff_size", self.acc_elem_bytes),
                           ("log_uop_buff_size", self.uop_elem_bytes)):
            if (1 << getattr(self, name)) < 2 * elem:
                raise ValueError(f"AccelConfig.{name} = {getattr(self, name)} leaves fewer than "
                                 f"two {elem}-byte elements in the buffer")
        uop_fields = self.uop_dst_bits + self.uop_src_bits + self.uop_wgt_bits
        if uop_fields > UOP_BITS:
            raise ValueError(f"a micro-op needs {uop_fields} bits of buffer indices for these "
                             f"buffer sizes, more than the {UOP_BITS} bits of a micro-op")
        gemm_bits = 7 + 1 + 2 * self.log_uop_depth + 1 + 2 * LOOP_ITER_BITS + 2 * (
            self.log_acc_depth + self.log_inp_depth + self.log_wgt_depth)
        if gemm_bits > INSN_BITS:
            raise ValueError(f"a GEMM instruction needs {gemm_bits} bits for these buffer sizes, "
                             f"more than {INSN_BITS}; use smaller buffers or larger elements")
        for name in ("dma_bytes_per_cycle", "alu_ii", "fetch_per_cycle", "command_queue_depth"):
            if getattr(self, name) < 1:
                raise ValueError(f"AccelConfig.{name} must be at least 1, got {getattr(self, name)}")

    # --- lanes and data types ---------------------------------------------------------------
    @property
    def batch(self) -> int:
        return 1 << self.log_batch

    @property
    def block_in(self) -> int:
        return 1 << self.log_block

    @property
    def block_out(self) -> int:
        return 1 << self.log_block

    @property
    def inp_width(self) -> int:
        return 1 << self.log_inp_width

    @property
    def wgt_width(self) -> int:
        return 1 << self.log_wgt_width

    @property
    def acc_width(self) -> int:
        return 1 << self.log_acc_width

    @property
    def out_width(self) -> int:
        """OUT elements have the input's width (the truncating store narrows ACC to it)."""
        return self.inp_width

    @property
    def inp_dtype(self) -> np.dtype:
        return np.dtype(_INT_DTYPES[self.inp_width])

    @property
    def wgt_dtype(self) -> np.dtype:
        return np.dtype(_INT_DTYPES[self.wgt_width])

    @property
    def acc_dtype(self) -> np.dtype:
        return np.dtype(_INT_DTYPES[self.acc_width])

    @property
    def out_dtype(self) -> np.dtype:
        return np.dtype(_INT_DTYPES[self.out_width])

    # --- element sizes (bytes) and buffer depths (elements) ------------------------------------
    @property
    def inp_elem_bytes(self) -> int:
        return self.batch * self.block_in * self.inp_width // 8

    @property
    def wgt_elem_bytes(self) -> int:
        return self.block_out * self.block_in * self.wgt_width // 8

    @property
    def acc_elem_bytes(self) -> int:
        return self.batch * self.block_out * self.acc_width // 8

    @property
    def out_elem_bytes(self) -> int:
        return self.batch * self.block_out * self.out_width // 8

    @property
    def uop_elem_bytes(self) -> int:
        return UOP_BITS // 8

    @property
    def inp_depth(self) -> int:
        return (1 << self.log_inp_buff_size) // self.inp_elem_bytes

    @property
    def wgt_depth(self) -> int:
        return (1 << self.log_wgt_buff_size) // self.wgt_elem_bytes

    @property
    def acc_depth(self) -> int:
        return (1 << self.log_acc_buff_size) // self.acc_elem_bytes

    @property
    def out_depth(self) -> int:
        """OUT shares ACC's index space."""
        return self.acc_depth

    @property
    def uop_depth(self) -> int:
        return (1 << self.log_uop_buff_size) // self.uop_elem_bytes

    @property
    def log_inp_depth(self) -> int:
        return _log2(self.inp_depth)

    @property
    def log_wgt_depth(self) -> int:
        return _log2(self.wgt_depth)

    @property
    def log_acc_depth(self) -> int:
        return _log2(self.acc_depth)

    @property
    def log_uop_depth(self) -> int:
        return _log2(self.uop_depth)

    # --- micro-op index widths ---------------------------------------------------------------
    @property
    def uop_dst_bits(self) -> int:
        return self.log_acc_depth

    @property
    def uop_src_bits(self) -> int:
        """INP index for GEMM, ACC index for ALU: the wider of the two."""
        return max(self.log_inp_depth, self.log_acc_depth)

    @property
    def uop_wgt_bits(self) -> int:
        return self.log_wgt_depth

    # --- peak and time -----------------------------------------------------------------------
    @property
    def macs_per_cycle(self) -> int:
        return self.batch * self.block_in * self.block_out

    @property
    def peak_gops(self) -> float:
        return 2 * self.macs_per_cycle * self.clock_mhz / 1e3

    @property
    def name(self) -> str:
        """VTA's bitstream-style name, e.g. 1x16_i8w8a32_15_15_18_17."""
        return (f"{self.batch}x{self.block_in}_i{self.inp_width}w{self.wgt_width}a{self.acc_width}"
                f"_{self.log_uop_buff_size}_{self.log_inp_buff_size}_{self.log_wgt_buff_size}"
                f"_{self.log_acc_buff_size}")

    def with_(self, **changes) -> "AccelConfig":
        """A copy with some parameters changed (validated like a new config)."""
        return replace(self, **changes)

    def as_dict(self) -> dict:
        """Every parameter, for reports (so a cycle count can be reproduced)."""
        return asdict(self)


def _log2(n: int) -> int:
    return int(math.log2(n))


PRESETS: dict[str, AccelConfig] = {
    # VTA's default configuration (the PYNQ bitstream 1x16_i8w8a32_15_15_18_17 at 100 MHz)
    "default": AccelConfig(),
    # the paper's VDLA: 32 kB parameters instead of 256 KiB, 200 MHz
    "paper": AccelConfig(log_wgt_buff_size=15, clock_mhz=200.0),
    # a wider GEMM core: 1x32x32 blocks with the default buffer sizes
    "block32": AccelConfig(log_block=5),
}


def preset(name: str) -> AccelConfig:
    """The named configuration ("default", "paper", "block32")."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown accelerator preset {name!r}; known: "
                         f"{', '.join(sorted(PRESETS))}") from None
