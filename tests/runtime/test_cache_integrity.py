"""A damaged or planted cache entry is never used: truncated and empty kernel libraries, a
truncated model library, a pickle planted where lowered kernels are kept.  Each is rebuilt with
a warning.  Loading runs in a child process: a truncated library that is loaded kills its
process with SIGBUS."""
import os
import pickle
import stat
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import numpy as np
import pytest

import tensorforge
from tensorforge.graph.builder import GraphBuilder

ROOT = str(Path(__file__).resolve().parents[2])


def _child(code: str, cache: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, TENSORFORGE_CACHE_DIR=str(cache), PYTHONPATH=ROOT, PYTHONWARNINGS="always")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env, timeout=120)


COMPILE_AND_CALL = """
    import ctypes
    from tensorforge.runtime import compile as cc
    path = cc.compile_source("/* {tag} */ int answer(void) {{ return 42; }}", ["-O1", "-fPIC", "-shared"])
    print(ctypes.CDLL(path).answer())
"""


@pytest.mark.parametrize("keep", [0.5, 0.0], ids=["truncated", "empty"])
def test_a_damaged_kernel_library_is_rebuilt_with_a_warning(tmp_path, keep):
    code = COMPILE_AND_CALL.format(tag=uuid.uuid4().hex)
    first = _child(code, tmp_path)
    assert first.returncode == 0 and first.stdout.strip() == "42", first.stderr
    libs = [p for p in tmp_path.iterdir() if p.suffix == ".so"]
    assert libs
    for lib in libs:
        lib.write_bytes(lib.read_bytes()[:int(lib.stat().st_size * keep)])
    runs = [_child(code, tmp_path) for _ in range(2)]     # rebuilt once, then a plain cache hit
    for run in runs:
        assert run.returncode == 0 and run.stdout.strip() == "42", (run.returncode, run.stderr)
    assert runs[0].stderr.count("damaged cache entry") == 1 and "damaged" not in runs[1].stderr


def _model(tmp_path: Path) -> tuple[str, np.ndarray, np.ndarray]:
    b = GraphBuilder("m")
    x = b.input("x", (4, 8), "float32")
    w = b.const(np.arange(32, dtype="float32").reshape(8, 4) / 32, "w")
    y = b.add1("relu", [b.add1("matmul", [x, w])])
    model = tensorforge.compile(b.finish([y]))
    xs = np.random.default_rng(0).standard_normal((4, 8)).astype("float32")
    path = model.export(str(tmp_path / "m.tfm"))
    return path, xs, model(xs)[0]


RUN_MODEL = """
    import numpy as np, tensorforge, sys
    y = tensorforge.load({path!r})(np.load({x!r}))[0]
    np.save({out!r}, y)
"""


def test_a_truncated_model_library_is_written_again(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("TENSORFORGE_CACHE_DIR", str(cache))
    path, xs, want = _model(tmp_path)
    np.save(tmp_path / "x.npy", xs)
    code = RUN_MODEL.format(path=path, x=str(tmp_path / "x.npy"), out=str(tmp_path / "y.npy"))
    assert _child(code, cache).returncode == 0
    libs = list(cache.glob("model_*.so"))
    assert len(libs) == 1
    libs[0].write_bytes(libs[0].read_bytes()[:4096])
    again = _child(code, cache)
    assert again.returncode == 0, again.stderr
    assert "damaged cache entry" in again.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), want)


class _Planted:
    """A pickle that, when loaded, creates a file: what an attacker's payload would do."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_planted_pickle_in_the_lowering_cache_is_not_loaded(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("TENSORFORGE_CACHE_DIR", str(cache))
    path, xs, want = _model(tmp_path)
    entries = [p for p in (cache / "lowered").iterdir() if p.is_file()]
    assert entries
    marker = tmp_path / "pwned"
    for entry in entries:
        entry.write_bytes(pickle.dumps(_Planted(str(marker))))
    for record in (cache / "builds").glob("*.json"):     # so that the compile reads the entries
        record.unlink()
    b = GraphBuilder("m")
    x = b.input("x", (4, 8), "float32")
    w = b.const(np.arange(32, dtype="float32").reshape(8, 4) / 32, "w")
    b2 = b.finish([b.add1("relu", [b.add1("matmul", [x, w])])])
    with pytest.warns(RuntimeWarning, match="damaged cache entry"):
        model = tensorforge.compile(b2)
    assert not marker.exists()
    np.testing.assert_array_equal(model(xs)[0], want)


def test_the_cache_directory_is_private(tmp_path, monkeypatch):
    from tensorforge.runtime import cache_files
    from tensorforge.runtime.compile import cache_dir
    monkeypatch.setenv("TENSORFORGE_CACHE_DIR", str(tmp_path / "new" / "cache"))
    path = cache_dir()
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    cache_files.write_entry(path / "lowered" / "x.ir", b"{}")
    assert stat.S_IMODE((path / "lowered").stat().st_mode) == 0o700


def test_entries_are_verified(tmp_path):
    from tensorforge.runtime import cache_files
    entry = tmp_path / "e"
    cache_files.write_entry(entry, b"payload")
    assert cache_files.read_entry(entry) == b"payload"
    assert cache_files.read_entry(tmp_path / "missing") is None
    data = entry.read_bytes()
    for damaged in (data[:-1], data[:-7] + b"PAYLOAD", b"", data.replace(b"payload", b"pay")):
        entry.write_bytes(damaged)
        with pytest.raises(cache_files.DamagedEntry):
            cache_files.read_entry(entry)
