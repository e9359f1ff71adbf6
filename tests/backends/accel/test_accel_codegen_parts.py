"""The pieces of the accelerator's code generator, each against a hand-written expectation:
2-D DMA patterns with padding, micro-op loop folding, token pairing per virtual thread."""
from __future__ import annotations

import numpy as np
import pytest

from tensorforge.backends.accel import (
    Gemm,
    Load,
    MemType,
    ProtocolError,
    ProtocolWarning,
    Stage,
    Store,
    check_stream,
)
from tensorforge.backends.accel.emit import Block
from tensorforge.backends.accel.patterns import Dma2D, dma_patterns, fold_uops
from tensorforge.backends.accel.tokens import assemble, pair_tokens


def test_padded_tile_is_one_dma_with_borders():
    # a 4x5 SRAM tile holding rows 0..2 of a DRAM image 10 wide, columns 0..2, one zero column
    # on each side and one zero row below
    dram = -np.ones((4, 5), np.int64)
    for y in range(3):
        dram[y, 1:4] = 100 + y * 10 + np.arange(3)
    got = dma_patterns(dram.reshape(-1), (4, 5), sram_base=7, allow_pad=True)
    assert got == [Dma2D(7, 100, 3, 3, 10, y_pad_0=0, y_pad_1=1, x_pad_0=1, x_pad_1=1)]


def test_padding_in_the_middle_splits_by_the_outer_dimension():
    # three channel slices of 3x3 rows, each padded above, at DRAM offsets with no common
    # stride: one pattern per slice
    dram = -np.ones((3, 3, 3), np.int64)
    for c, offset in enumerate((0, 1000, 5000)):
        dram[c, 1:, :] = offset + np.arange(6).reshape(2, 3)
    got = dma_patterns(dram.reshape(-1), (3, 3, 3), sram_base=0, allow_pad=True)
    assert got == [Dma2D(0, 0, 2, 3, 3, y_pad_0=1), Dma2D(9, 1000, 2, 3, 3, y_pad_0=1),
                   Dma2D(18, 5000, 2, 3, 3, y_pad_0=1)]


def test_slices_with_a_common_stride_are_one_dma():
    dram = -np.ones((2, 3, 3), np.int64)
    for c in range(2):
        dram[c, 1:, :] = 1000 * c + np.arange(6).reshape(2, 3)
    # rows of 9 with 3 zeros in front: 6 consecutive elements per channel, channels 1000 apart
    assert dma_patterns(dram.reshape(-1), (2, 3, 3), 0, allow_pad=True) == [Dma2D(0, 0, 2, 6, 1000, x_pad_0=3)]


def test_padding_is_refused_for_stores():
    dram = np.array([-1, 5, 6], np.int64)
    assert dma_patterns(dram, (3,), 0, allow_pad=False) is None


def test_fold_uops_folds_two_outer_affine_loops():
    # fields over (3, 2, 4): dst = 8a + 4b + c, src = a + c, wgt = 2b
    a, b, c = np.meshgrid(np.arange(3), np.arange(2), np.arange(4), indexing="ij")
    fields = np.stack([8 * a + 4 * b + c, a + c, 2 * b])
    got = fold_uops(fields, max_iter=16383)
    assert (got.iter_out, got.iter_in) == (3, 2)
    assert got.factor_out == (8, 1, 0) and got.factor_in == (4, 0, 2)
    np.testing.assert_array_equal(got.uops, np.stack([np.arange(4), np.arange(4), np.zeros(4)]).T)


def test_fold_uops_keeps_a_non_affine_loop_as_micro_ops():
    fields = np.stack([np.array([0, 5, 6]), np.zeros(3, np.int64), np.zeros(3, np.int64)])
    got = fold_uops(fields, max_iter=16383)
    assert got.iter_out == 1 and len(got.uops) == 3


def _load(sram: int) -> Load:
    return Load(memory_type=MemType.INP, sram_base=sram, dram_base=0, y_size=1, x_size=1, x_stride=1)


def _gemm(uop: int) -> Gemm:
    return Gemm(uop_bgn=uop, uop_end=uop + 1)


def _store(sram: int) -> Store:
    return Store(sram_base=sram, dram_base=sram, y_size=1, x_size=1, x_stride=1)


def test_tokens_pair_consecutive_blocks_of_each_thread():
    blocks = [Block(0, Stage.LOAD, [_load(0)]), Block(1, Stage.LOAD, [_load(1)]),
              Block(0, Stage.COMPUTE, [_gemm(0)]), Block(1, Stage.COMPUTE, [_gemm(1)]),
              Block(0, Stage.STORE, [_store(0)]), Block(1, Stage.STORE, [_store(1)])]
    pair_tokens(blocks)
    assert [(b.pop_from, b.push_to) for b in blocks] == [
        (None, Stage.COMPUTE), (None, Stage.COMPUTE), (Stage.LOAD, Stage.STORE),
        (Stage.LOAD, Stage.STORE), (Stage.COMPUTE, None), (Stage.COMPUTE, None)]
    program = assemble([Block(b.thread, b.stage, b.insns) for b in blocks])
    with pytest.warns(ProtocolWarning, match="no DRAM image"):    # the micro-ops are placeholders
        report = check_stream(program)
    # two RAW tokens per queue for the threads, plus the end-of-stream sync of FINISH
    assert report.tokens == {"load->compute": 3, "compute->load": 0, "compute->store": 2, "store->compute": 1}


def test_uneven_interleaving_is_refused():
    # thread 1's load comes first but thread 0's GEMM pops first: it would take thread 1's token
    blocks = [Block(1, Stage.LOAD, [_load(1)]), Block(0, Stage.LOAD, [_load(0)]),
              Block(0, Stage.COMPUTE, [_gemm(0)]), Block(1, Stage.COMPUTE, [_gemm(1)])]
    with pytest.raises(ProtocolError, match="interleave unevenly"):
        assemble(blocks)


def test_load_to_store_without_a_queue_is_refused():
    with pytest.raises(ProtocolError, match="no token queue"):
        pair_tokens([Block(0, Stage.LOAD, [_load(0)]), Block(0, Stage.STORE, [_store(0)])])
