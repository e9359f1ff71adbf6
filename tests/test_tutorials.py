"""The numbered tutorials in docs/tutorials/ run as tests (as Halide's lessons do): each runs as
a script in a fresh process, with small sizes and its own compile cache, must exit cleanly and
print what it checked.  Each lesson asserts its own results against NumPy or ONNX Runtime."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = ROOT / "docs" / "tutorials"
SMALL = {"TUTORIAL_SIZE": "64", "TUTORIAL_SHAPE": "32x128", "TUTORIAL_TRIALS": "4"}

# lesson -> lines its output must hold (the checks it reports having passed)
LESSONS = {
    "01_tensor_expressions.py": ["default schedule: matches NumPy", "tiled schedule: matches NumPy",
                                 "two-stage schedule: matches NumPy"],
    "02_loop_program.py": ["--- after partition_loops ---", "--- after vectorize_loops ---",
                           "interpreter: matches NumPy", "C backend: matches NumPy"],
    "03_whole_model.py": ["matches ONNX Runtime", "same output"],
    "04_writing_an_op.py": ["check_op: kernel == interpreter == reference", "3 nodes -> 1 kernel",
                            "compiled model with the new op: matches NumPy"],
    "05_schedule_template.py": ["compiled with the default config: matches NumPy", "configs match NumPy"],
    "06_tuning.py": ["the tuned model matches NumPy"],
    "07_symbolic_shapes.py": ["every batch size and length: matches the ONNX reference", "padding verified",
                              "the pooled model: padding refused, compiled per length, matches the ONNX reference"],
    "08_pytorch.py": ["static classifier: matches eager PyTorch", "batch 5: matches eager PyTorch",
                      "batch buckets: {3: '2+1', 5: '4+1'}", "outside the range [1, 16]",
                      "detector, image 2", "trimmed to 9: matches eager PyTorch",
                      "specializations of the trimmed stretch: 2", "torch.cond, mean -",
                      "torch.compile detector, image 1: matches eager PyTorch",
                      "torch.compile: every graph compiled, none left to eager PyTorch"],
}


def test_the_lessons_are_numbered_and_all_listed():
    found = sorted(p.name for p in TUTORIALS.glob("[0-9][0-9]_*.py"))
    assert found == sorted(LESSONS)
    assert [name[:2] for name in found] == [f"{k:02d}" for k in range(1, len(found) + 1)]
    readme = (ROOT / "README.md").read_text()
    for name in found:
        assert f"docs/tutorials/{name}" in readme, f"README.md does not link {name}"


@pytest.mark.parametrize("name", sorted(LESSONS))
def test_tutorial_runs(name, tmp_path):
    if name == "03_whole_model.py":
        pytest.importorskip("onnx")
        pytest.importorskip("onnxruntime")
    if name == "08_pytorch.py":
        pytest.importorskip("torch", reason="lesson 8 needs the [torch] extra")
    env = dict(os.environ, **SMALL, TENSORFORGE_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("TENSORFORGE_DEBUG", None)
    proc = subprocess.run([sys.executable, str(TUTORIALS / name)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    for line in LESSONS[name]:
        assert line in proc.stdout, f"{name} did not print {line!r}:\n{proc.stdout[-4000:]}"
