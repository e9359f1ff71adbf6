"""benchmarks/ops.py runs end to end on two small layers: it verifies tensorforge against ONNX
Runtime, prints its table and summary, and writes its JSON (a few seconds)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

OPS = Path(__file__).resolve().parents[1] / "benchmarks" / "ops.py"


def test_ops_benchmark_runs(tmp_path):
    pytest.importorskip("onnxruntime", reason="benchmarks/ops.py compares against ONNX Runtime")
    out_json = tmp_path / "ops.json"
    proc = subprocess.run([sys.executable, str(OPS), "--layers", "C12,D9", "--repeat", "1",
                           "--json", str(out_json)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stdout.splitlines()
    header = next(line for line in lines if line.startswith("layer"))
    for column in ("shape", "tf", "ort", "torch", "tf/ort", "tf %peak"):
        assert column in header
    assert any(line.startswith("C12 ") and "512->512 k3 s1" in line for line in lines)
    assert any(line.startswith("D9 ") and "c1024 k3 s1 dw" in line for line in lines)
    assert "fp32 FMA peak" in proc.stdout
    assert any(line.startswith("geometric mean, 3x3 conv2d") for line in lines)
    assert any(line.startswith("geometric mean, depthwise") for line in lines)

    data = json.loads(out_json.read_text())
    assert [r["layer"] for r in data["rows"]] == ["C12", "D9"]
    for row in data["rows"]:
        assert row["tf_gflops"] > 0 and row["ort_gflops"] > 0 and row["peak_gflops"] > 0
        assert row["tf_over_ort"] == pytest.approx(row["tf_gflops"] / row["ort_gflops"])
    assert data["rows"][0]["gflop"] == pytest.approx(2 * 512 * 512 * 9 * 49 / 1e9)
