"""A fixed subset of the ONNX backend conformance suite (two cases per operator) through the
C backend the way a user runs a model (from_onnx(path), compile, call): every case must pass.
The full suite runs with
`python ../shared/onnx_conformance.py run --backend tests/onnx_backend.py:run_user --strict-int`."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT.parent / "shared" / "onnx_conformance.py"
CASES = Path(__file__).with_name("conformance_cases.txt")


@pytest.mark.skipif(not RUNNER.exists(), reason="the shared conformance runner is not beside the repository")
def test_conformance_subset(tmp_path):
    data = tmp_path / "suite"
    subprocess.run([sys.executable, str(RUNNER), "generate", "--out", str(data)], check=True,
                   capture_output=True, cwd=ROOT, timeout=300)
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, str(RUNNER), "run", "--data", str(data), "--backend",
                           "tests/onnx_backend.py:run_user", "--cases-file", str(CASES), "--strict-int",
                           "--timeout", "120", "--json", str(report), "-q"],
                          capture_output=True, text=True, cwd=ROOT, timeout=1500)
    results = json.loads(report.read_text())["results"]
    wanted = [line.strip() for line in CASES.read_text().splitlines() if line.strip() and not line.startswith("#")]
    bad = {k: (v["status"], v["message"][:200]) for k, v in results.items() if v["status"] != "pass"}
    assert not bad, f"{len(bad)} conformance cases regressed:\n" + "\n".join(f"{k}: {v}" for k, v in bad.items())
    assert len(results) == len(wanted), proc.stdout[-2000:]
