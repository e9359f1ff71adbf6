"""Progress of a long compile (compile_progress.py): what a callable receives, when the terminal
line shows by default, and that a warm compile reports nothing."""
import io
import sys

import numpy as np
import pytest

import tensorforge
import tensorforge.compile_progress as cp
from tensorforge.graph.builder import GraphBuilder


def _graph(count: int, first: int = 3):
    """`count` relu kernels on rows of first, first + 1, ... columns."""
    b = GraphBuilder("progress")
    outs = []
    for k in range(count):
        x = b.input(f"x{k}", (2, first + k), "float32")
        outs.append(b.add1("relu", [x]))
    return b.finish(outs)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORFORGE_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_callable_sees_every_kernel_lowered_then_the_c_compile(cache, monkeypatch, workers):
    monkeypatch.setenv("TENSORFORGE_LOWERING_WORKERS", workers)
    texts: list = []
    graph = _graph(14)
    model = tensorforge.compile(graph, progress=texts.append)
    assert texts[0] == "lowering 0/14 kernels"
    assert "lowering 14/14 kernels" in texts
    assert texts[-2:] == ["compiling C: 14 kernels", "done"]
    counts = [int(t.split()[1].split("/")[0]) for t in texts if t.startswith("lowering")]
    assert counts == sorted(counts)
    xs = [np.full((2, k + 3), -1.0, np.float32) for k in range(14)]
    assert all((y == 0).all() for y in model(*xs))
    texts.clear()
    tensorforge.compile(graph, progress=texts.append)       # warm: nothing to lower, nothing said
    assert texts == []


def test_the_line_shows_on_a_terminal_for_many_missing_kernels(cache, monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(cp, "_stderr_is_terminal", lambda: True)
    tensorforge.compile(_graph(3))                            # few kernels: no line
    assert err.getvalue() == ""
    tensorforge.compile(_graph(cp.SHOW_FROM, first=100))
    text = err.getvalue()
    assert f"lowering {cp.SHOW_FROM}/{cp.SHOW_FROM} kernels" in text and text.endswith("\n")
    monkeypatch.setattr(cp, "_stderr_is_terminal", lambda: False)
    err.truncate(0)
    err.seek(0)
    tensorforge.compile(_graph(cp.SHOW_FROM + 1, first=200))  # a log file: no line
    assert err.getvalue() == ""
    tensorforge.compile(_graph(cp.SHOW_FROM + 2, first=300), progress=False)
    assert err.getvalue() == ""
    tensorforge.compile(_graph(2, first=400), progress=True)  # asked for: shown anyway
    assert "lowering 2/2 kernels" in err.getvalue()
