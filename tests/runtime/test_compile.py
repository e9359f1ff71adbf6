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


def test_units_are_compiled_at_once_and_linked(cache):
    import numpy as np

    import tensorforge
    from tensorforge import te
    from tensorforge.backends import cpu
    from tensorforge.codegen.c import codegen_c

    funcs = []
    for k in range(3):
        a = te.placeholder((64,), name="a")
        factor = float(k + 2)
        b = te.compute((64,), lambda i: a[i] * factor, name="b")  # noqa: B023 - called right here
        s = te.create_schedule(b.op)
        s[b].vectorize(s[b].op.axis[0])
        funcs.append(tensorforge.lower(s, [a, b], name=f"scale{k}"))
    whole = codegen_c(funcs, sequences=[("tf_run_0", [("scale0", [0, 1]), ("scale2", [1, 2])])], units=2)
    assert len(whole.units) == 2
    assert sum(u.count("int32_t tf_num_threads = 1;") for u in whole.units) == 1
    assert all(u.count("extern int32_t tf_num_threads;") == (0 if "= 1;" in u else 1) for u in whole.units)
    assert sum(u.count("int32_t scale") for u in whole.units) >= 3
    mod = cpu.build(funcs, "c")                      # split by the backend: one unit per core
    x = np.arange(64, dtype=np.float32)
    for k in range(3):
        y = np.zeros(64, np.float32)
        mod[f"scale{k}"](x, y)
        np.testing.assert_array_equal(y, x * (k + 2))
    # a unit that does not compile: the error names the compiler's complaint and the whole source
    broken = (whole.units[0], whole.units[1] + "int nope(void) { return undeclared_thing; }\n")
    with pytest.raises(cc.CompileError, match="undeclared_thing") as info:
        cc.compile_source(whole.text + "/* broken */", cpu.compile_flags(cpu.Target.parse("c")), units=broken)
    assert "compiled as 2 units" in str(info.value)
    assert not [p for p in os.listdir(cache) if p.endswith(".tmp") or ".units." in p]
