"""A simulated VTA-style accelerator (the paper's VDLA; the contract is ACCEL.md).

- config.py      AccelConfig: log2 hardware parameters, derived widths, presets, cycle model
- isa.py         LOAD, STORE, GEMM, ALU, FINISH and micro-ops; encode/decode (128 / 32 bits)
- protocol.py    the four dependence-token queues and which flag of which module uses each
- assembler.py   turns dep_push/dep_pop requests into flags (VTA's runtime InsnQueue)
- dram.py        the DRAM byte image, addressed in buffer elements
- machine.py     on-chip buffers and the bit-exact semantics of each instruction
- cycle_model.py cycles per instruction
- simulator.py   Simulator: concurrent load/compute/store modules, Stats, DeadlockError
- checker.py     check_stream: deadlock, leftover-token and race detection
- index_eval.py  index expressions evaluated over whole loop grids (NumPy)
- patterns.py    2-D DMA patterns and folded micro-op loops read off those grids
- emit.py        code generation: a lowered loop program -> blocks of instructions
- tokens.py      dependence tokens between blocks (CoProcSync per virtual thread)
- backend.py     the Backend of target kind "accel": render, check, load (AccelModule)
- layers.py      conv2d_module / matmul_module / tune_conv2d: one layer, NCHW arrays in and out
- offload.py     whole graphs: which kernels the accelerator takes (place), the mixed CPU + accelerator model
"""
from .assembler import Assembler, noop
from .checker import StreamReport, check_stream
from .config import PRESETS, AccelConfig, preset
from .dram import DramBuilder, read
from .isa import (
                  Alu,
                  AluOp,
                  EncodingError,
                  Finish,
                  Gemm,
                  Insn,
                  Load,
                  MemType,
                  Opcode,
                  Stage,
                  Store,
                  Uop,
                  decode,
                  decode_program,
                  decode_uop,
                  encode,
                  encode_program,
                  encode_uop,
                  format_program,
                  stage_of,
)
from .layers import LayerModule, conv2d_module, matmul_module, tune_conv2d
from .machine import SimulationError
from .protocol import ProtocolError, ProtocolWarning, Queue
from .simulator import DeadlockError, LeftoverTokensError, Simulator, Stats

__all__ = [
    "AccelConfig", "LayerModule", "conv2d_module", "matmul_module", "tune_conv2d", "Alu", "AluOp", "Assembler", "DeadlockError", "DramBuilder", "EncodingError",
    "Finish", "Gemm", "Insn", "LeftoverTokensError", "Load", "MemType", "Opcode", "PRESETS",
    "ProtocolError", "ProtocolWarning", "Queue", "SimulationError", "Simulator", "Stage",
    "Stats", "Store", "StreamReport", "Uop", "check_stream", "decode", "decode_program",
    "decode_uop", "encode", "encode_program", "encode_uop", "format_program", "noop", "preset",
    "read", "stage_of",
]
