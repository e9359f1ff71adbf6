"""Processes end with the process that started them: a `tensorforge tune` killed with SIGKILL
leaves no builder workers, measuring process or resource tracker behind, and a pool worker
that retries a scheduler that is not there stops within 2 s of SIGINT or SIGTERM."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

ROOT = str(Path(__file__).resolve().parents[2])
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _env(tmp_path):
    return dict(os.environ, PYTHONPATH=ROOT, TENSORFORGE_CACHE_DIR=str(tmp_path / "cache"))


def _children() -> dict[int, int]:
    """{pid: parent pid} of every process on the machine."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                table[int(entry)] = int(fields[1])
            except (OSError, IndexError, ValueError):
                pass
    return table


def _descendants(pid: int) -> set[int]:
    table, found, todo = _children(), set(), [pid]
    while todo:
        p = todo.pop()
        for child, parent in table.items():
            if parent == p and child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _model(path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 32])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 32])
    w = helper.make_tensor("w", TensorProto.FLOAT, [32, 32], np.ones(1024, dtype="float32") / 32)
    m = helper.make_model(helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "m", [x], [y], [w]),
                          opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, str(path))


def test_a_killed_tune_leaves_no_processes(tmp_path):
    _model(tmp_path / "m.onnx")
    proc = subprocess.Popen([sys.executable, "-m", "tensorforge.cli", "tune", str(tmp_path / "m.onnx"), "--records",
                             str(tmp_path / "t.jsonl"), "--trials", "100000", "--target", "c"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(tmp_path))
    family: set[int] = set()
    try:
        deadline = time.monotonic() + 90
        # wait until it measures (a record is written) and has its builder workers, the measuring
        # process and the resource tracker (on a busy machine they can start after the file)
        while time.monotonic() < deadline and not ((tmp_path / "t.jsonl").exists() and len(family) >= 2):
            family |= _descendants(proc.pid)
            time.sleep(0.2)
        time.sleep(1.0)
        family |= _descendants(proc.pid)
        assert proc.poll() is None and len(family) >= 2, "tune did not start measuring"
        proc.kill()
        proc.wait(timeout=10)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(_alive(p) for p in family):
            time.sleep(0.1)
        left = sorted(p for p in family if _alive(p))
        assert not left, f"processes left behind: {[open(f'/proc/{p}/cmdline').read() for p in left]}"
    finally:
        proc.kill()
        for p in family:
            if _alive(p):
                os.kill(p, signal.SIGKILL)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_pool_worker_retrying_a_missing_scheduler_stops_on_a_signal(tmp_path, sig):
    pytest.importorskip("distributed")
    log = open(tmp_path / "worker.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "tensorforge.autotune.pool", "worker", "--scheduler",
                             "tcp://127.0.0.1:1"], stdout=log, stderr=subprocess.STDOUT, env=_env(tmp_path))
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and b"Waiting to connect" not in (tmp_path / "worker.log").read_bytes():
            assert proc.poll() is None, (tmp_path / "worker.log").read_text()
            time.sleep(0.1)
        time.sleep(0.5)
        sent = time.monotonic()
        proc.send_signal(sig)
        try:
            proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the worker did not stop within 2 s of {sig.name}")
        assert time.monotonic() - sent <= 2.0
        assert b"stopped" in (tmp_path / "worker.log").read_bytes()
    finally:
        proc.kill()
        proc.wait()
        log.close()
