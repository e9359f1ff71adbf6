"""Calibration (tensorforge/calibrate.py, `tensorforge calibrate`): measures the candidate GEMM
micro-kernels, caches the winner under the CPU's identity, and the default matmul schedule on
the host then uses it."""
from __future__ import annotations

import json

from tensorforge import calibrate
from tensorforge.cli import main
from tensorforge.ops.schedules import gemm_kernel
from tensorforge.target import Target


def test_calibrate_writes_the_fastest_kernel(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TENSORFORGE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(calibrate, "GEMM_SHAPE", (48, 128, 64))
    monkeypatch.setattr(calibrate, "ROUNDS", 1)
    assert main(["calibrate", "--show"]) == 2           # nothing cached yet: a usage error
    assert main(["calibrate"]) == 0
    out = capsys.readouterr().out
    assert "GEMM micro-kernel:" in out and "GFLOP/s" in out
    record = json.loads(gemm_kernel.calibration_path().read_text())
    lanes = Target.parse("c -mcpu=native").simd_lanes("float32")
    measured = record["gemm"]["gflops"]
    chosen = gemm_kernel.MicroKernel(record["kernels"][str(lanes)]["mr"], record["kernels"][str(lanes)]["vectors"],
                                     lanes)
    assert measured[str(chosen)] == max(measured.values())
    assert gemm_kernel.for_target(Target.parse("c -mcpu=native")) == chosen
    assert gemm_kernel.cpu_identity() in gemm_kernel.calibration_path().name


def test_first_host_compile_calibrates_when_enabled(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORFORGE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TENSORFORGE_CALIBRATE", "1")
    calls = []
    monkeypatch.setattr(calibrate, "calibrate", lambda target, show=True: calls.append(str(target)))
    calibrate.ensure_calibrated(Target.parse("c -mcpu=x86-64-v3"))    # not the host: nothing to measure
    assert calls == []
    calibrate.ensure_calibrated(Target.parse("c -mcpu=native"))
    assert calls == ["c"]
