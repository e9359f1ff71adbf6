"""The accelerator's configuration and ISA: derived widths, encode/decode round trips, overflow."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorforge.backends.accel import (
    PRESETS,
    AccelConfig,
    Alu,
    AluOp,
    EncodingError,
    Finish,
    Gemm,
    Load,
    MemType,
    Stage,
    Store,
    Uop,
    decode,
    decode_uop,
    encode,
    encode_uop,
    preset,
    stage_of,
)
from tensorforge.backends.accel.isa import Opcode, layout

FLAGS = dict(pop_prev=st.booleans(), pop_next=st.booleans(), push_prev=st.booleans(),
             push_next=st.booleans())


def test_default_config_matches_the_contract():
    c = AccelConfig()
    assert (c.batch, c.block_in, c.block_out) == (1, 16, 16)
    assert (c.inp_elem_bytes, c.wgt_elem_bytes, c.acc_elem_bytes, c.out_elem_bytes) == (16, 256,
                                                                                       64, 16)
    assert (c.inp_depth, c.wgt_depth, c.acc_depth, c.uop_depth) == (2048, 1024, 2048, 8192)
    assert (c.uop_dst_bits, c.uop_src_bits, c.uop_wgt_bits) == (11, 11, 10)
    assert c.name == "1x16_i8w8a32_15_15_18_17"
    assert c.peak_gops == pytest.approx(51.2)
    widths = {name: w for name, w, _ in layout(Opcode.GEMM, c)}
    assert (widths["uop_bgn"], widths["uop_end"], widths["iter_out"]) == (13, 14, 14)
    assert (widths["dst_factor_in"], widths["src_factor_in"], widths["wgt_factor_in"]) == (11, 11,
                                                                                            10)
    assert sum(w for _, w, _ in layout(Opcode.GEMM, c)) == 127
    assert sum(w for _, w, _ in layout(Opcode.ALU, c)) == 127
    assert sum(w for _, w, _ in layout(Opcode.LOAD, c)) == 122


def test_presets_change_the_widths_consistently():
    paper, wide = preset("paper"), preset("block32")
    assert paper.wgt_depth == 128 and paper.clock_mhz == 200.0
    assert {n: w for n, w, _ in layout(Opcode.GEMM, paper)}["wgt_factor_out"] == 7
    assert (wide.inp_elem_bytes, wide.wgt_elem_bytes, wide.inp_depth) == (32, 1024, 1024)
    gemm = Gemm(uop_bgn=0, uop_end=1, wgt_factor_out=200)
    assert decode(encode(gemm, AccelConfig()), AccelConfig()) == gemm
    with pytest.raises(EncodingError, match="wgt_factor_out = 200 does not fit in 7 bits"):
        encode(gemm, paper)
    with pytest.raises(ValueError, match="unknown accelerator preset 'nope'"):
        preset("nope")


def test_a_config_whose_fields_do_not_fit_is_refused():
    with pytest.raises(ValueError, match="micro-op needs 38 bits .* more than the 32"):
        AccelConfig(log_acc_buff_size=19, log_inp_buff_size=19)
    with pytest.raises(ValueError, match="GEMM instruction needs 137 bits .* more than 128"):
        AccelConfig(log_uop_buff_size=20)
    with pytest.raises(ValueError, match="log_acc_width must be"):
        AccelConfig(log_acc_width=7)


def _mem(cls, draw_kind):
    return st.builds(cls, memory_type=draw_kind, sram_base=st.integers(0, 2**16 - 1),
                     dram_base=st.integers(0, 2**32 - 1), y_size=st.integers(0, 2**16 - 1),
                     x_size=st.integers(0, 2**16 - 1), x_stride=st.integers(0, 2**16 - 1),
                     y_pad_0=st.integers(0, 15), y_pad_1=st.integers(0, 15),
                     x_pad_0=st.integers(0, 15), x_pad_1=st.integers(0, 15), **FLAGS)


def _loop(c: AccelConfig, src_depth_bits: int) -> dict:
    return dict(reset=st.booleans(), uop_bgn=st.integers(0, c.uop_depth - 1),
                uop_end=st.integers(0, 2 * c.uop_depth - 1), iter_out=st.integers(0, 2**14 - 1),
                iter_in=st.integers(0, 2**14 - 1),
                dst_factor_out=st.integers(0, c.acc_depth - 1),
                dst_factor_in=st.integers(0, c.acc_depth - 1),
                src_factor_out=st.integers(0, 2**src_depth_bits - 1),
                src_factor_in=st.integers(0, 2**src_depth_bits - 1), **FLAGS)


def instructions(c: AccelConfig):
    return st.one_of(
        _mem(Load, st.sampled_from(list(MemType))),
        _mem(Store, st.sampled_from(list(MemType))),
        st.builds(Gemm, wgt_factor_out=st.integers(0, c.wgt_depth - 1),
                  wgt_factor_in=st.integers(0, c.wgt_depth - 1), **_loop(c, c.log_inp_depth)),
        st.builds(Alu, alu_opcode=st.sampled_from(list(AluOp)), use_imm=st.booleans(),
                  imm=st.integers(-2**15, 2**15 - 1), **_loop(c, c.log_acc_depth)),
        st.builds(Finish, **FLAGS))


@pytest.mark.parametrize("name", sorted(PRESETS))
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_encode_decode_round_trips_exactly(name, data):
    c = PRESETS[name]
    insn = data.draw(instructions(c))
    word = encode(insn, c)
    assert 0 <= word < 2**128
    assert word & 0b111 == insn.opcode
    back = decode(word, c)
    assert back == insn and type(back) is type(insn)
    assert encode(back, c) == word


@given(dst=st.integers(0, 2047), src=st.integers(0, 2047), wgt=st.integers(0, 1023))
def test_micro_ops_round_trip_in_32_bits(dst, src, wgt):
    word = encode_uop(Uop(dst, src, wgt))
    assert word < 2**32
    assert decode_uop(word) == Uop(dst, src, wgt)


@pytest.mark.parametrize("insn, message", [
    (Gemm(uop_bgn=0, uop_end=1, iter_in=16384), "GEMM field iter_in = 16384 does not fit in 14"),
    (Gemm(uop_bgn=8192, uop_end=8193), "GEMM field uop_bgn = 8192 does not fit in 13"),
    (Gemm(uop_bgn=0, uop_end=1, dst_factor_out=2048), "dst_factor_out = 2048 does not fit in 11"),
    (Alu(uop_bgn=0, uop_end=1, alu_opcode=AluOp.ADD, use_imm=True, imm=40000),
     r"ALU field imm = 40000 does not fit in 16 signed bits \(allowed -32768..32767\)"),
    (Load(memory_type=MemType.INP, sram_base=0, dram_base=0, y_size=1, x_size=1, x_stride=1,
          x_pad_0=16), "LOAD field x_pad_0 = 16 does not fit in 4"),
    (Store(sram_base=0, dram_base=2**32, y_size=1, x_size=1, x_stride=1),
     "STORE field dram_base = 4294967296 does not fit in 32"),
    (Load(memory_type=MemType.INP, sram_base=-1, dram_base=0, y_size=1, x_size=1, x_stride=1),
     r"sram_base = -1 does not fit in 16 bits \(allowed 0..65535\)"),
])
def test_a_field_that_overflows_is_an_error_naming_it(insn, message):
    with pytest.raises(EncodingError, match=message):
        encode(insn)


def test_decode_rejects_words_that_are_not_instructions():
    with pytest.raises(EncodingError, match="opcode 7, which is not an instruction"):
        decode(7)
    with pytest.raises(EncodingError, match="memory_type = 6"):
        decode(0 | (6 << 7))
    with pytest.raises(EncodingError, match="bits set above"):
        decode(int(Opcode.FINISH) | (1 << 100))
    with pytest.raises(EncodingError, match="micro-op field wgt = 1024"):
        encode_uop(Uop(0, 0, 1024))


def test_fetch_routes_each_instruction_to_its_module():
    def load(kind):
        return Load(memory_type=kind, sram_base=0, dram_base=0, y_size=1, x_size=1, x_stride=1)
    assert stage_of(load(MemType.INP)) == stage_of(load(MemType.WGT)) == Stage.LOAD
    assert stage_of(load(MemType.UOP)) == stage_of(load(MemType.ACC)) == Stage.COMPUTE
    assert stage_of(load(MemType.ACC_8BIT)) == Stage.COMPUTE
    assert stage_of(Gemm(uop_bgn=0, uop_end=1)) == Stage.COMPUTE
    assert stage_of(Alu(uop_bgn=0, uop_end=1, alu_opcode=AluOp.MIN)) == Stage.COMPUTE
    assert stage_of(Finish()) == Stage.COMPUTE
    assert stage_of(Store(sram_base=0, dram_base=0, y_size=1, x_size=1, x_stride=1)) == Stage.STORE
