"""The accelerator's compiler path: tensorforge.build(..., target="accel") on the conv2d.accel
template, conv2d_module / matmul_module on ResNet-18's layers (bit-exact against NumPy with the
same integer epilogue), the counters, latency hiding with two virtual threads, and the tuner."""
from __future__ import annotations

import numpy as np
import pytest

import tensorforge
from tensorforge import te
from tensorforge.backends.accel import (
    Alu,
    AluOp,
    Gemm,
    Load,
    MemType,
    Stage,
    Store,
    check_stream,
    conv2d_module,
    matmul_module,
    tune_conv2d,
)
from tensorforge.ops.schedules.accel import conv2d_accel
from tensorforge.ops.schedules.accel import reference as blocked_reference

# ResNet-18's layers in the paper's numbering: (H, IC, OC, K, S)
LAYERS = {
    "C2": (56, 64, 64, 3, 1), "C3": (56, 64, 64, 1, 1), "C4": (56, 64, 128, 3, 2),
    "C5": (56, 64, 128, 1, 2), "C6": (28, 128, 128, 3, 1), "C7": (28, 128, 256, 3, 2),
    "C8": (28, 128, 256, 1, 2), "C9": (14, 256, 256, 3, 1), "C10": (14, 256, 512, 3, 2),
    "C11": (14, 256, 512, 1, 2), "C12": (7, 512, 512, 3, 1),
}
QUICK = ("C9", "C12")
SHIFT = 8


def conv_reference(data, weight, bias, stride, pad, shift):
    """NCHW int8 conv in int64, wrapped to int32, then clip((acc >> shift) + bias, 0, 127)."""
    n, c, h, w = data.shape
    o, _, kh, kw = weight.shape
    oh, ow = (h + 2 * pad - kh) // stride + 1, (w + 2 * pad - kw) // stride + 1
    x = np.pad(data.astype(np.int64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    acc = np.zeros((n, o, oh, ow), np.int64)
    for dy in range(kh):
        for dx in range(kw):
            patch = x[:, :, dy:dy + stride * oh:stride, dx:dx + stride * ow:stride]
            acc += np.einsum("nchw,oc->nohw", patch, weight[:, :, dy, dx].astype(np.int64))
    return np.clip((acc.astype(np.int32) >> shift) + bias[None, :, None, None], 0, 127).astype(np.int8)


def random_layer(h, ic, oc, k, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.integers(-128, 128, (1, ic, h, h), dtype=np.int8),
            rng.integers(-128, 128, (oc, ic, k, k), dtype=np.int8),
            rng.integers(-300, 300, (oc,), dtype=np.int32))


def run_layer(name, threads):
    h, ic, oc, k, s = LAYERS[name]
    data, weight, bias = random_layer(h, ic, oc, k)
    module = conv2d_module(data.shape, weight.shape, s, k // 2, SHIFT, virtual_threads=threads)
    oh = (h + 2 * (k // 2) - k) // s + 1
    out = np.full((1, oc, oh, oh), -1, np.int8)
    stats = module(data, weight, bias, out)
    np.testing.assert_array_equal(out, conv_reference(data, weight, bias, s, k // 2, SHIFT))
    macs = oc * ic * oh * oh * k * k
    assert stats.gemm_blocks == macs // (16 * 16)
    assert stats.out_store_nbytes == out.size
    assert module.stats is stats
    return module, stats


def test_build_schedule_for_accel_target_runs_on_the_simulator():
    data = te.placeholder((1, 4, 14, 14, 1, 16), "int8", name="data")
    kernel = te.placeholder((4, 4, 3, 3, 16, 16), "int8", name="kernel")
    bias = te.placeholder((4, 1, 16), "int32", name="bias")
    s, (out,) = conv2d_accel(None, None, (data, kernel, bias), strides=1, padding=1, shift=5)
    module = tensorforge.build(s, [data, kernel, bias, out], target="accel")
    kinds = {type(i) for i in module.program}
    assert {Load, Store, Gemm, Alu} <= kinds
    assert module.stats is None
    rng = np.random.default_rng(1)
    d = rng.integers(-128, 128, (1, 4, 14, 14, 1, 16), dtype=np.int8)
    w = rng.integers(-128, 128, (4, 4, 3, 3, 16, 16), dtype=np.int8)
    b = rng.integers(-100, 100, (4, 1, 16), dtype=np.int32)
    o = np.full((1, 4, 14, 14, 1, 16), -1, np.int8)
    stats = module(d, w, b, o)
    np.testing.assert_array_equal(o, blocked_reference(d, w, b, strides=1, padding=1, shift=5))
    assert module.stats is stats and stats.cycles > 0
    # the compiler already checked it (with the micro-op kernels); so do we
    check_stream(module.program, dram=module.kernels["main"].image)
    assert "GEMM" in module.source and "FINISH" in module.source


def test_epilogue_becomes_alu_instructions_with_immediates():
    module = conv2d_module((1, 32, 14, 14), (32, 32, 3, 3), 1, 1, shift=6)
    alus = [i for i in module.program if isinstance(i, Alu)]
    ops = {(AluOp(i.alu_opcode), i.use_imm, i.imm) for i in alus}
    assert (AluOp.SHR, True, 6) in ops
    assert (AluOp.MAX, True, 0) in ops
    assert (AluOp.MIN, True, 127) in ops
    assert (AluOp.ADD, False, 0) in ops                # bias: a tensor operand
    assert any(isinstance(i, Load) and i.memory_type == MemType.ACC for i in module.program)


def test_padded_loads_use_the_dma_pad_fields():
    module = conv2d_module((1, 16, 14, 14), (16, 16, 3, 3), 1, 1, shift=4)
    inp = [i for i in module.program if isinstance(i, Load) and i.memory_type == MemType.INP and i.x_size]
    assert any(i.x_pad_0 == 1 and i.x_pad_1 == 1 for i in inp)
    assert any(i.y_pad_0 == 1 for i in inp) and any(i.y_pad_1 == 1 for i in inp)


def test_micro_op_loops_are_folded():
    module = conv2d_module((1, 16, 14, 14), (32, 16, 3, 3), 1, 1, shift=4)
    gemms = [i for i in module.program if isinstance(i, Gemm) and not i.reset]
    # the 3x3 window is the hardware's two-level loop; the micro-ops cover one tile once
    assert all(g.iter_out == 3 and g.iter_in == 3 for g in gemms)
    tiles = module.schedule_config
    assert all(g.uop_end - g.uop_bgn == tiles["tile_co"] * tiles["tile_h"] * tiles["tile_w"] for g in gemms)
    uop_loads = [i for i in module.program if isinstance(i, Load) and i.memory_type == MemType.UOP and i.x_size]
    assert len(uop_loads) < len(gemms)                  # kernels are reused while resident


def test_two_virtual_threads_use_separate_buffers_and_interleave():
    module = conv2d_module((1, 16, 14, 14), (64, 16, 3, 3), 1, 1, shift=4, virtual_threads=2)
    inp_bases = {i.sram_base for i in module.program
                 if isinstance(i, Load) and i.memory_type == MemType.INP and i.x_size}
    assert len(inp_bases) == 2
    loads = [i for i in module.program if isinstance(i, Load) and i.memory_type in (MemType.INP, MemType.WGT)
             and i.x_size]
    # a thread's input and weight loads stay together: INP t0, WGT t0, INP t1, WGT t1
    assert [MemType(i.memory_type) for i in loads[:4]] == [MemType.INP, MemType.WGT, MemType.INP, MemType.WGT]


@pytest.mark.parametrize("threads", [1, 2])
def test_matmul_module_bit_exact(threads):
    m, k, n = 28, 64, 96
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b = rng.integers(-128, 128, (n, k), dtype=np.int8)
    bias = rng.integers(-50, 50, (n,), dtype=np.int32)
    out = np.full((m, n), -1, np.int8)
    module = matmul_module(m, k, n, shift=7, virtual_threads=threads)
    stats = module(a, b, bias, out)
    acc = (a.astype(np.int64) @ b.astype(np.int64).T).astype(np.int32)
    np.testing.assert_array_equal(out, np.clip((acc >> 7) + bias, 0, 127).astype(np.int8))
    assert stats.gemm_blocks == m * k * n // 256
    assert stats.out_store_nbytes == m * n


@pytest.mark.parametrize("name", [n if n in QUICK else pytest.param(n, marks=pytest.mark.slow) for n in LAYERS])
def test_resnet18_layers_bit_exact_and_two_threads_hide_latency(name):
    _, one = run_layer(name, 1)
    _, two = run_layer(name, 2)
    if LAYERS[name][3] == 3:
        assert two.cycles < one.cycles
        assert two.utilization >= one.utilization + 0.08, (one.utilization, two.utilization)


def test_tuner_measures_cycles_and_picks_two_threads_on_a_3x3_layer():
    best, results = tune_conv2d((1, 256, 14, 14), (256, 256, 3, 3), 1, 1, SHIFT)
    assert best["threads"] == 2
    assert results["threads=2"] < results["threads=1"]


def test_tiles_that_do_not_fit_are_a_clear_error():
    with pytest.raises(ValueError, match="accumulator buffer"):
        conv2d_module((1, 16, 56, 56), (256, 16, 3, 3), 1, 1, shift=4,
                      schedule_config={"tile_co": 16, "tile_h": 28, "tile_w": 56})


def test_wrong_arrays_are_rejected():
    module = conv2d_module((1, 16, 14, 14), (16, 16, 3, 3), 1, 1, shift=4)
    data, weight, bias = random_layer(14, 16, 16, 3)
    with pytest.raises(TypeError, match="data must be a NumPy int8"):
        module(data.astype(np.int32), weight, bias, np.zeros((1, 16, 14, 14), np.int8))
    with pytest.raises(ValueError, match="bias must have shape"):
        module(data, weight, bias[:8], np.zeros((1, 16, 14, 14), np.int8))


def test_module_routes_every_stage():
    module, _ = run_layer("C12", 1)
    from tensorforge.backends.accel import stage_of
    assert {stage_of(i) for i in module.program} == {Stage.LOAD, Stage.COMPUTE, Stage.STORE}
