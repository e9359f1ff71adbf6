"""The GEMM micro-kernel (ops/schedules/gemm_kernel.py) and the default matmul tile built from it
(ops/schedules/cpu_matmul.py): the register model's shapes, the calibrated record, the default
config of a large GEMM, and exact results for random shapes (odd ones, tails, batches)."""
from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorforge
from tensorforge.autotune.task import Task, instantiate
from tensorforge.ops.schedules import gemm_kernel
from tensorforge.ops.schedules.cpu_matmul import default_tile
from tensorforge.target import Target

AVX512 = "c -mcpu=x86-64-v4"


def test_register_model_shapes():
    assert (gemm_kernel.detected(16).mr, gemm_kernel.detected(16).nr) == (6, 64)     # AVX-512: 32 registers
    assert (gemm_kernel.detected(8).mr, gemm_kernel.detected(8).nr) == (6, 16)       # AVX2: 16 registers
    for lanes in (4, 8, 16):
        for k in gemm_kernel.candidates(lanes):
            assert k.registers <= gemm_kernel.register_count(lanes)
            assert k.mr * k.vectors >= gemm_kernel.FMA_LATENCY * gemm_kernel.FMA_UNITS
    # one FMA unit needs fewer independent accumulators, so more shapes qualify
    assert len(gemm_kernel.candidates(8, fma_units=1)) >= len(gemm_kernel.candidates(8))


def test_calibrated_record_is_used_for_the_host_only(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORFORGE_CACHE_DIR", str(tmp_path))
    host = Target.parse("c -mcpu=native")
    lanes = host.simd_lanes("float32")
    assert gemm_kernel.for_target(host) == gemm_kernel.detected(lanes)
    path = gemm_kernel.calibration_path()
    path.parent.mkdir(parents=True)
    record = {"version": gemm_kernel.CALIBRATION_VERSION, "kernels": {str(lanes): {"mr": 3, "vectors": 1}}}
    path.write_text(json.dumps(record))
    assert gemm_kernel.for_target(host) == gemm_kernel.MicroKernel(3, 1, lanes)
    assert gemm_kernel.for_target(Target.parse(AVX512)) == gemm_kernel.detected(16)
    # a record of another version, or a shape past the register budget, is ignored
    path.write_text(json.dumps({**record, "version": -1}))
    assert gemm_kernel.for_target(host) == gemm_kernel.detected(lanes)
    path.write_text(json.dumps({**record, "kernels": {str(lanes): {"mr": 40, "vectors": 4}}}))
    assert gemm_kernel.for_target(host) == gemm_kernel.detected(lanes)


def test_default_tile_follows_the_kernel():
    k = gemm_kernel.MicroKernel(6, 4, 16)
    assert default_tile(1024, 1024, 16, k) == (6, 64)
    assert default_tile(100, 1000, 16, k) == (6, 64)          # 17 row tiles of at most 6 rows
    assert default_tile(13, 1000, 16, k) == (5, 64)           # rows evened out: 5 + 4 + 4
    assert default_tile(1, 650, 16, k) == (1, 48)             # a GEMV keeps the panel heuristic
    assert default_tile(35, 10000, 16, k, packed_nr=32) == (12, 32)


def test_large_gemm_default_packs_panels_with_the_machine_kernel():
    task = Task.for_op("matmul", [((1024, 1024), "float32"), ((1024, 1024), "float32")], target=AVX512)
    cfg = task.config_space.default_config().to_json()
    assert cfg["tile_m"][-1] == 6 and cfg["tile_n"][1:] == [4, 16]
    assert cfg["pack_b"] is True
    gemv = Task.for_op("matmul", [((1, 1024), "float32"), ((1024, 1024), "float32")], target=AVX512)
    assert gemv.config_space.default_config().to_json()["pack_b"] is False


@settings(max_examples=12, deadline=None)
@given(m=st.integers(1, 70), n=st.integers(1, 150), k=st.integers(1, 40), batch=st.sampled_from([(), (3,)]))
def test_default_matmul_matches_numpy(m, n, k, batch):
    task = Task.for_op("matmul", [((*batch, m, k), "float32"), ((*batch, k, n), "float32")], target="c")
    s, args = instantiate(task, None)
    mod = tensorforge.build(tensorforge.lower(s, args, name="mm"), target="c")
    rng = np.random.default_rng(m * 7 + n * 3 + k)
    a = rng.standard_normal((*batch, m, k), dtype=np.float32)
    b = rng.standard_normal((*batch, k, n), dtype=np.float32)
    c = np.full((*batch, m, n), np.nan, np.float32)
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_calibration_off_notes_the_detected_kernel(monkeypatch, capsys):
    from tensorforge import calibrate

    monkeypatch.setenv("TENSORFORGE_CALIBRATE", "0")
    monkeypatch.setattr(calibrate, "_noted", False)
    monkeypatch.setattr(gemm_kernel, "load_calibration", lambda path=None: None)
    calibrate.ensure_calibrated(Target.parse("c -mcpu=native"))
    calibrate.ensure_calibrated(Target.parse("c -mcpu=native"))
    err = capsys.readouterr().err
    assert err.count("calibration is off") == 1 and "GEMM kernel" in err


def _source(shape_a, shape_b):
    task = Task.for_op("matmul", [(shape_a, "float32"), (shape_b, "float32")], target=AVX512)
    s, args = instantiate(task, None)
    return tensorforge.lower(s, args, name="mm")


def test_tiny_products_run_without_a_parallel_region(monkeypatch):
    monkeypatch.setattr(Target, "num_cores", property(lambda self: 2))
    assert "parallel" not in str(_source((12, 32), (32, 128)))         # 49152 multiply-adds, 2+ panels
    assert "parallel" in str(_source((256, 256), (256, 256)))
    assert "parallel" in str(_source((4, 128, 64), (4, 64, 64)))       # a batch counts too
