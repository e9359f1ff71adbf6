"""The accelerator's instruction set: LOAD, STORE, GEMM, ALU, FINISH, and the micro-op.

Instructions are frozen dataclasses; `encode(insn, config)` packs one into a 128-bit integer and
`decode(word, config)` unpacks it, exactly (decode(encode(i)) == i).  The packing is ours
(ACCEL.md 1.1): fields LSB-first in the order of the field table, starting with the common
header (opcode, pop_prev, pop_next, push_prev, push_next).  The widths of the fields that index
a buffer come from the config, so every preset encodes consistently.  A value that does not fit
its field is an `EncodingError` naming the instruction, the field and the allowed range.

Every instruction also knows its pipeline stage (`stage_of`): the fetch module routes STORE to
the store module, LOAD of INP/WGT to the load module, and everything else to compute.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import ClassVar, Iterable, Sequence, Union

from . import config as C
from .config import AccelConfig


class Opcode(enum.IntEnum):
    LOAD = 0
    STORE = 1
    GEMM = 2
    FINISH = 3
    ALU = 4


class MemType(enum.IntEnum):
    UOP = 0
    WGT = 1
    INP = 2
    ACC = 3
    OUT = 4
    ACC_8BIT = 5


class AluOp(enum.IntEnum):
    MIN = 0
    MAX = 1
    ADD = 2
    SHR = 3
    MUL = 4


class Stage(enum.IntEnum):
    """Pipeline stages in order; "previous" and "next" in the flag names refer to this order."""
    LOAD = 1
    COMPUTE = 2
    STORE = 3


class EncodingError(ValueError):
    """An instruction field does not fit its bit width, or a word is not a valid instruction."""


DEP_FLAGS = ("pop_prev", "pop_next", "push_prev", "push_next")


@dataclass(frozen=True, kw_only=True)
class Insn:
    """Common header: the four dependence flags (pop before executing, push after finishing)."""
    pop_prev: bool = False
    pop_next: bool = False
    push_prev: bool = False
    push_next: bool = False

    opcode: ClassVar[Opcode]

    def with_flags(self, **flags: bool) -> "Insn":
        return replace(self, **flags)

    def flags_text(self) -> str:
        on = [f for f in DEP_FLAGS if getattr(self, f)]
        return f" [{' '.join(on)}]" if on else ""


@dataclass(frozen=True, kw_only=True)
class _MemInsn(Insn):
    """LOAD/STORE of a 2-D strided tile of whole buffer elements (addresses count elements)."""
    memory_type: MemType
    sram_base: int
    dram_base: int
    y_size: int
    x_size: int
    x_stride: int
    y_pad_0: int = 0
    y_pad_1: int = 0
    x_pad_0: int = 0
    x_pad_1: int = 0

    @property
    def is_noop(self) -> bool:
        return self.x_size == 0

    def __str__(self) -> str:
        pads = (self.y_pad_0, self.y_pad_1, self.x_pad_0, self.x_pad_1)
        pad = f" pad(y {pads[0]},{pads[1]} x {pads[2]},{pads[3]})" if any(pads) else ""
        kind = MemType(self.memory_type).name
        if self.is_noop:
            return f"{self.opcode.name} {kind} no-op{self.flags_text()}"
        return (f"{self.opcode.name} {kind} sram={self.sram_base} dram={self.dram_base} "
                f"y={self.y_size} x={self.x_size} stride={self.x_stride}{pad}{self.flags_text()}")


@dataclass(frozen=True, kw_only=True)
class Load(_MemInsn):
    opcode: ClassVar[Opcode] = Opcode.LOAD


@dataclass(frozen=True, kw_only=True)
class Store(_MemInsn):
    opcode: ClassVar[Opcode] = Opcode.STORE
    memory_type: MemType = MemType.OUT


@dataclass(frozen=True, kw_only=True)
class _UopLoopInsn(Insn):
    """A micro-op range [uop_bgn, uop_end) run inside a two-level affine loop."""
    reset: bool = False
    uop_bgn: int
    uop_end: int
    iter_out: int = 1
    iter_in: int = 1
    dst_factor_out: int = 0
    dst_factor_in: int = 0
    src_factor_out: int = 0
    src_factor_in: int = 0

    @property
    def num_iterations(self) -> int:
        """N = iter_out * iter_in * (uop_end - uop_bgn): the micro-op executions."""
        return self.iter_out * self.iter_in * max(0, self.uop_end - self.uop_bgn)

    def _loop_text(self) -> str:
        return (f"uop[{self.uop_bgn}:{self.uop_end}] loop({self.iter_out}x{self.iter_in}) "
                f"dst({self.dst_factor_out},{self.dst_factor_in}) "
                f"src({self.src_factor_out},{self.src_factor_in})")


@dataclass(frozen=True, kw_only=True)
class Gemm(_UopLoopInsn):
    """ACC[dst] += INP[src] . WGT[wgt]^T per micro-op iteration; with `reset`, ACC[dst] = 0."""
    opcode: ClassVar[Opcode] = Opcode.GEMM
    wgt_factor_out: int = 0
    wgt_factor_in: int = 0

    def __str__(self) -> str:
        head = "GEMM reset" if self.reset else "GEMM"
        return (f"{head} {self._loop_text()} wgt({self.wgt_factor_out},{self.wgt_factor_in})"
                f"{self.flags_text()}")


@dataclass(frozen=True, kw_only=True)
class Alu(_UopLoopInsn):
    """ACC[dst] = op(ACC[dst], imm if use_imm else ACC[src]) per micro-op iteration."""
    opcode: ClassVar[Opcode] = Opcode.ALU
    alu_opcode: AluOp
    use_imm: bool = False
    imm: int = 0

    def __str__(self) -> str:
        operand = f"imm={self.imm}" if self.use_imm else "tensor"
        return (f"ALU {AluOp(self.alu_opcode).name} {operand} {self._loop_text()}"
                f"{self.flags_text()}")


@dataclass(frozen=True, kw_only=True)
class Finish(Insn):
    opcode: ClassVar[Opcode] = Opcode.FINISH

    def __str__(self) -> str:
        return f"FINISH{self.flags_text()}"


Instruction = Union[Load, Store, Gemm, Alu, Finish]
_CLASSES = {Opcode.LOAD: Load, Opcode.STORE: Store, Opcode.GEMM: Gemm, Opcode.FINISH: Finish,
            Opcode.ALU: Alu}


@dataclass(frozen=True)
class Uop:
    """One micro-op: ACC index, INP index (ACC index for ALU), WGT index (unused by ALU)."""
    dst: int
    src: int
    wgt: int = 0


def stage_of(insn: Insn) -> Stage:
    """The module that executes `insn` (the fetch module's routing)."""
    if isinstance(insn, Store):
        return Stage.STORE
    if isinstance(insn, Load) and insn.memory_type in (MemType.INP, MemType.WGT):
        return Stage.LOAD
    return Stage.COMPUTE


# --- bit layout ----------------------------------------------------------------------------
# (field name, width in bits, signed) in LSB-first order after the header.

def layout(opcode: Opcode, config: AccelConfig) -> tuple[tuple[str, int, bool], ...]:
    """The packing of an instruction kind: header fields, then the kind's own fields."""
    header = (("opcode", C.OPCODE_BITS, False),) + tuple((f, 1, False) for f in DEP_FLAGS)
    if opcode in (Opcode.LOAD, Opcode.STORE):
        body = (("memory_type", C.MEMORY_TYPE_BITS, False), ("sram_base", C.SRAM_ADDR_BITS, False),
                ("dram_base", C.DRAM_ADDR_BITS, False), ("y_size", C.SIZE_BITS, False),
                ("x_size", C.SIZE_BITS, False), ("x_stride", C.SIZE_BITS, False),
                ("y_pad_0", C.PAD_BITS, False), ("y_pad_1", C.PAD_BITS, False),
                ("x_pad_0", C.PAD_BITS, False), ("x_pad_1", C.PAD_BITS, False))
    elif opcode in (Opcode.GEMM, Opcode.ALU):
        src_bits = config.log_inp_depth if opcode == Opcode.GEMM else config.log_acc_depth
        body = (("reset", 1, False), ("uop_bgn", config.log_uop_depth, False),
                ("uop_end", config.log_uop_depth + 1, False),
                ("iter_out", C.LOOP_ITER_BITS, False), ("iter_in", C.LOOP_ITER_BITS, False),
                ("dst_factor_out", config.log_acc_depth, False),
                ("dst_factor_in", config.log_acc_depth, False),
                ("src_factor_out", src_bits, False), ("src_factor_in", src_bits, False))
        if opcode == Opcode.GEMM:
            body += (("wgt_factor_out", config.log_wgt_depth, False),
                     ("wgt_factor_in", config.log_wgt_depth, False))
        else:
            body += (("alu_opcode", C.ALU_OPCODE_BITS, False), ("use_imm", 1, False),
                     ("imm", C.ALU_IMM_BITS, True))
    else:
        body = ()
    return header + body


def _field_range(width: int, signed: bool) -> tuple[int, int]:
    return (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)


def encode(insn: Insn, config: AccelConfig | None = None) -> int:
    """Pack `insn` into a 128-bit integer; raise EncodingError if a field overflows its width."""
    config = config or AccelConfig()
    word, shift = 0, 0
    for name, width, signed in layout(insn.opcode, config):
        value = int(insn.opcode) if name == "opcode" else getattr(insn, name)
        value = int(value)
        lo, hi = _field_range(width, signed)
        if not lo <= value <= hi:
            raise EncodingError(f"{insn.opcode.name} field {name} = {value} does not fit in "
                                f"{width} {'signed ' if signed else ''}bits (allowed "
                                f"{lo}..{hi}) for configuration {config.name}")
        word |= (value & ((1 << width) - 1)) << shift
        shift += width
    assert shift <= C.INSN_BITS, f"layout of {insn.opcode.name} exceeds {C.INSN_BITS} bits"
    return word


def decode(word: int, config: AccelConfig | None = None) -> Instruction:
    """Unpack a 128-bit integer produced by `encode`."""
    config = config or AccelConfig()
    if not 0 <= word < (1 << C.INSN_BITS):
        raise EncodingError(f"an instruction word must be a {C.INSN_BITS}-bit unsigned integer, "
                            f"got {word:#x}")
    raw_opcode = word & ((1 << C.OPCODE_BITS) - 1)
    try:
        opcode = Opcode(raw_opcode)
    except ValueError:
        raise EncodingError(f"word {word:#034x} has opcode {raw_opcode}, which is not an "
                            f"instruction (LOAD 0, STORE 1, GEMM 2, FINISH 3, ALU 4)") from None
    values, shift = {}, 0
    for name, width, signed in layout(opcode, config):
        value = (word >> shift) & ((1 << width) - 1)
        if signed and value >> (width - 1):
            value -= 1 << width
        values[name] = value
        shift += width
    if word >> shift:
        raise EncodingError(f"word {word:#034x} has bits set above the {shift} bits of a "
                            f"{opcode.name} instruction")
    del values["opcode"]
    for flag in DEP_FLAGS + ("reset", "use_imm"):
        if flag in values:
            values[flag] = bool(values[flag])
    if "memory_type" in values:
        values["memory_type"] = _enum(MemType, values["memory_type"], "memory_type", word)
    if "alu_opcode" in values:
        values["alu_opcode"] = _enum(AluOp, values["alu_opcode"], "alu_opcode", word)
    return _CLASSES[opcode](**values)


def _enum(kind, value: int, name: str, word: int):
    try:
        return kind(value)
    except ValueError:
        raise EncodingError(f"word {word:#034x} has {name} = {value}, which is not one of "
                            f"{', '.join(f'{m.name} {m.value}' for m in kind)}") from None


def encode_program(program: Iterable[Insn], config: AccelConfig | None = None) -> list[int]:
    return [encode(insn, config) for insn in program]


def decode_program(words: Iterable[int], config: AccelConfig | None = None) -> list[Instruction]:
    return [decode(word, config) for word in words]


# --- micro-ops -----------------------------------------------------------------------------

def encode_uop(uop: Uop, config: AccelConfig | None = None) -> int:
    """Pack a micro-op into 32 bits: dst, src, wgt LSB-first."""
    config = config or AccelConfig()
    word, shift = 0, 0
    for name, width in (("dst", config.uop_dst_bits), ("src", config.uop_src_bits),
                        ("wgt", config.uop_wgt_bits)):
        value = int(getattr(uop, name))
        if not 0 <= value < (1 << width):
            raise EncodingError(f"micro-op field {name} = {value} does not fit in {width} bits "
                                f"(allowed 0..{(1 << width) - 1}) for configuration {config.name}")
        word |= value << shift
        shift += width
    return word


def decode_uop(word: int, config: AccelConfig | None = None) -> Uop:
    config = config or AccelConfig()
    dst_bits, src_bits = config.uop_dst_bits, config.uop_src_bits
    return Uop(dst=word & ((1 << dst_bits) - 1),
               src=(word >> dst_bits) & ((1 << src_bits) - 1),
               wgt=(word >> (dst_bits + src_bits)) & ((1 << config.uop_wgt_bits) - 1))


def format_program(program: Sequence[Insn]) -> str:
    """One instruction per line with its index and module, for dumps and error messages."""
    width = len(str(max(len(program) - 1, 0)))
    return "\n".join(f"{i:>{width}}  {stage_of(insn).name.lower():<7}  {insn}"
                     for i, insn in enumerate(program))
