"""The content-addressed compile cache: errors, cache hits, concurrent writers."""
import ctypes
import multiprocessing
import os
import subprocess
import uuid

import pytest

from tensorforge.runtime import compile as cc

FLAGS = ["-O1", "-fPIC", "-shared"]


def kernel_source(tag: str) -> str:
    return f"/* {tag} */\nint answer(void) {{ return 42; }}\n"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORFORGE_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_compile_and_cache_hit_without_recompiling(cache, monkeypatch):
    src = kernel_source(uuid.uuid4().hex)
    path = cc.compile_source(src, FLAGS)
    assert os.path.dirname(path) == str(cache)
    assert ctypes.CDLL(path).answer() == 42

    def no_compiler(*args, **kwargs):
        raise AssertionError("the compiler ran on a cache hit")
    monkeypatch.setattr(subprocess, "run", no_compiler)
    assert cc.compile_source(src, FLAGS) == path
    monkeypatch.undo()
    # Different flags are a different library.
    assert cc.compile_source(src, FLAGS + ["-DX=1"]) != path


def test_compile_error_has_compiler_output_and_source_path(cache):
    src = "int broken(void) { return undeclared_thing; }\n"
    with pytest.raises(cc.CompileError) as info:
        cc.compile_source(src, FLAGS)
    message = str(info.value)
    assert "undeclared_thing" in message
    kept = message.split("source kept at: ")[1].splitlines()[0]
    with open(kept) as f:
        assert f.read() == src
    assert not [p for p in os.listdir(cache) if p.endswith(".tmp")]   # no temporary left behind


def test_missing_compiler_is_a_clear_error(cache, monkeypatch):
    monkeypatch.setenv("CC", "no-such-compiler-xyz")
    with pytest.raises(RuntimeError, match="'no-such-compiler-xyz' .*not found"):
        cc.compile_source(kernel_source("x"), FLAGS)


def _compile_in_child(cache_dir, src, barrier, results):
    os.environ["TENSORFORGE_CACHE_DIR"] = cache_dir
    barrier.wait()                      # both start compiling at the same moment
    path = cc.compile_source(src, FLAGS)
    results.put((path, ctypes.CDLL(path).answer()))


def test_two_processes_compiling_the_same_kernel(cache):
    src = kernel_source(uuid.uuid4().hex)
    ctx = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_compile_in_child, args=(str(cache), src, barrier, results))
             for _ in range(2)]
    for p in procs:
        p.start()
    got = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert got[0] == got[1] and got[0][1] == 42
    assert [p for p in os.listdir(cache) if p.endswith(".so")] == [os.path.basename(got[0][0])]
    assert not [p for p in os.listdir(cache) if p.endswith(".tmp")]
