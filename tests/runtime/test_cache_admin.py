"""The cache's entries and pruning (runtime/cache_admin.py, `tensorforge cache`): what a compile
leaves is sorted into entries, pruning removes the least recently used first and whole (a later
compile rebuilds what it misses, without warnings), the calibration is kept, and the command
line refuses what it cannot parse."""
import os
import warnings

import numpy as np
import pytest

import tensorforge
from tensorforge.cli import main
from tensorforge.graph.builder import GraphBuilder
from tensorforge.runtime import cache_admin as ca


def _graph(width: int):
    b = GraphBuilder(f"g{width}")
    x = b.input("x", (4, width), "float32")
    w = b.const(np.ones((width, 8), np.float32), "w")
    return b.finish([b.add1("relu", [b.add1("matmul", [x, w])])])


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORFORGE_CACHE_DIR", str(tmp_path))
    (tmp_path / "calibration").mkdir()
    (tmp_path / "calibration" / "cpu.json").write_text("{}")
    return tmp_path


def _age(entry: ca.Entry, seconds_ago: float) -> None:
    t = entry.used - seconds_ago
    for p in entry.paths:
        os.utime(p, (t, t))


def test_a_compile_leaves_a_library_kernels_and_a_build_record(cache):
    tensorforge.compile(_graph(16))
    kinds = ca.summary(ca.scan(cache))
    assert kinds["library"][0] >= 1 and kinds["kernel"][0] >= 1      # the model's (and the thread pool's)
    assert kinds["build record"][0] == 1 and kinds["calibration"][0] == 1
    for library in [e for e in ca.scan(cache) if e.kind == "library"]:
        assert sorted(p.suffix for p in library.paths) == [".c", ".json", ".so"]
        assert library.size == sum(p.stat().st_size for p in library.paths)


def test_prune_removes_the_least_recently_used_whole_and_a_compile_rebuilds_it(cache):
    old, new = _graph(16), _graph(24)
    x16 = np.ones((4, 16), np.float32)
    want = tensorforge.compile(old)(x16)[0]
    first = {p for e in ca.scan(cache) for p in e.paths}
    tensorforge.compile(new)
    for e in ca.scan(cache):                  # the first model's entries used two days ago, the second's one
        _age(e, 2 * 86400 if set(e.paths) <= first else 86400)
    entries = ca.scan(cache)
    prunable = [e for e in entries if e.kind not in ca.KEPT]
    keep = sum(e.size for e in entries) - sum(e.size for e in prunable if set(e.paths) <= first) // 2
    gone = ca.prune(entries, max_bytes=keep)
    assert gone and all(set(e.paths) <= first for e in gone)          # the older model's first
    assert gone == sorted(gone, key=lambda e: e.used)
    assert sum(e.size for e in ca.scan(cache)) <= keep
    for e in gone:
        assert not any(p.exists() for p in e.paths)                    # whole entries
    assert (cache / "calibration" / "cpu.json").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")        # no "damaged cache entry": nothing was half removed
        again = tensorforge.compile(old)
    np.testing.assert_array_equal(again(x16)[0], want)


def test_prune_by_age_and_dry_run(cache):
    tensorforge.compile(_graph(16))
    entries = ca.scan(cache)
    for e in entries:
        _age(e, 40 * 86400)
    entries = ca.scan(cache)
    planned = ca.prune(entries, older_than=ca.parse_age("30d"), dry_run=True)
    assert planned and all(p.exists() for e in planned for p in e.paths)
    gone = ca.prune(entries, older_than=ca.parse_age("30d"))
    assert [e.kind for e in gone] == [e.kind for e in planned]
    assert {e.kind for e in ca.scan(cache)} == {"calibration"}


def test_a_young_scratch_file_is_kept(cache):
    scratch = cache / "tf_0123abcd.json.1234.tmp"
    scratch.write_bytes(b"x" * 100)
    assert ca.prune(ca.scan(cache), max_bytes=0) == []           # a compile may be writing it
    entries = ca.scan(cache)
    for e in entries:
        _age(e, 2 * ca.TEMPORARY_AGE_S)
    gone = ca.prune(ca.scan(cache), max_bytes=0)
    assert [e.kind for e in gone] == ["temporary"] and not scratch.exists()


def test_clear_keeps_the_calibration_unless_asked(cache):
    tensorforge.compile(_graph(16))
    ca.clear(ca.scan(cache))
    assert {e.kind for e in ca.scan(cache)} == {"calibration"}
    ca.clear(ca.scan(cache), calibration=True)
    assert ca.scan(cache) == []


@pytest.mark.parametrize("text,want", [("500M", 500 * 2 ** 20), ("2G", 2 * 2 ** 30), ("1.5GB", int(1.5 * 2 ** 30)),
                                       ("800k", 800 * 1024), ("1024", 1024), ("3MiB", 3 * 2 ** 20)])
def test_sizes(text, want):
    assert ca.parse_size(text) == want


@pytest.mark.parametrize("text", ["", "2Q", "-1G", "G"])
def test_bad_sizes_are_refused(text):
    with pytest.raises(ValueError, match="not a size"):
        ca.parse_size(text)


def test_ages():
    assert ca.parse_age("30d") == 30 * 86400 and ca.parse_age("12h") == 12 * 3600 and ca.parse_age("90m") == 5400
    with pytest.raises(ValueError, match="not a duration"):
        ca.parse_age("soon")


def test_the_command_line(cache, capsys):
    tensorforge.compile(_graph(16))
    assert main(["cache"]) == 0
    out = capsys.readouterr().out
    assert f"cache: {cache}" in out and "library" in out and "calibration" in out
    assert main(["cache", "prune", "--max-size", "0", "--dry-run"]) == 0
    assert "would remove" in capsys.readouterr().out
    assert any(e.kind == "library" for e in ca.scan(cache))
    assert main(["cache", "prune"]) == 2
    assert "needs --max-size" in capsys.readouterr().err
    assert main(["cache", "prune", "--max-size", "lots"]) == 2
    assert "not a size" in capsys.readouterr().err
    assert main(["cache", "clear"]) == 0
    assert {e.kind for e in ca.scan(cache)} == {"calibration"}
