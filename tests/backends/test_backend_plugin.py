"""A backend is one module plus one registration: compile and build pick it for its kind, run
its loop-IR passes at their phases, and the graph passes follow its layout preferences.  And the
core never branches on a target's kind."""
from __future__ import annotations

import re
from pathlib import Path

import fake_backend
import numpy as np
import pytest

import tensorforge
from tensorforge import te
from tensorforge.backends import KindSpec, backend_for, register, unregister
from tensorforge.backends.base import PHASES
from tensorforge.graph.builder import GraphBuilder
from tensorforge.target import Target


@pytest.fixture
def fake(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORFORGE_CACHE_DIR", str(tmp_path))     # nothing lowered comes from a cache
    register(KindSpec("fake", "fake_backend", options=(("flavour", "plain"),), vector_bytes=32,
                      template_suffix="cpu", layouts=frozenset()))
    fake_backend.SEEN.clear()
    fake_backend.RENDERED.clear()
    yield
    unregister("fake")


def test_the_registered_kind_parses_with_its_options(fake):
    t = Target.parse("fake -flavour=spicy -O2")
    assert str(t) == "fake -flavour=spicy -O2" and Target.parse(str(t)) == t
    assert t.option("flavour") == "spicy" and Target.parse("fake").option("flavour") == "plain"
    assert t.simd_bytes == 32 and t.thread_axes == () and not t.prefers("NCHWc")
    assert backend_for(t) is fake_backend.BACKEND
    with pytest.raises(ValueError, match="unknown option '-mcpu=native' for target kind 'fake'"):
        Target.parse("fake -mcpu=native")


def test_build_picks_the_backend_and_runs_its_passes_by_phase(fake):
    A = te.placeholder((4, 8), name="A")
    B = te.compute((4, 8), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    f = tensorforge.build(s, [A, B], target="fake", name="double")
    a = np.random.rand(4, 8).astype("float32")
    b = np.full((4, 8), np.nan, "float32")
    f(a, b)
    np.testing.assert_allclose(b, a * 2)
    assert fake_backend.RENDERED == [["double"]]
    # in the pass list's order; storage is flattened to one index between the first two phases
    assert fake_backend.SEEN == [("after_lowering", "double", 2), ("after_flatten", "double", 1),
                                 ("before_codegen", "double", 1)]


def test_compile_picks_the_backend_and_its_layout_preferences(fake):
    rng = np.random.default_rng(0)
    b = GraphBuilder("mlp")
    x = b.input("x", (2, 32), "float32")
    y = b.add1("relu", [b.add1("dense", [x, b.const(rng.standard_normal((16, 32)).astype("float32"), "w")])])
    graph = b.finish([y])
    model = tensorforge.compile(graph, target="fake")
    host = tensorforge.compile(graph, target="c")
    xs = rng.standard_normal((2, 32)).astype("float32")
    np.testing.assert_allclose(model(xs)[0], host(xs)[0], rtol=1e-5, atol=1e-5)
    # the fake backend prefers no packed weights: dense stays dense; the C backend packs them
    assert [n.op for n in model.info["graph"].nodes] == ["dense", "relu"]
    assert [n.op for n in host.info["graph"].nodes] == ["matmul_packed", "relu"]
    assert len(fake_backend.RENDERED) == 1
    kernels = fake_backend.RENDERED[0]
    assert [(p, name) for p, name, _ in fake_backend.SEEN] == [(p, k) for k in kernels for p in PHASES]


def test_a_kind_without_its_module_says_so():
    register(KindSpec("ghost", "tensorforge.backends.ghost"))
    try:
        with pytest.raises(NotImplementedError, match="target kind 'ghost' has no backend"):
            out = te.compute((2,), lambda i: te.const(1.0), name="out")
            tensorforge.build(te.create_schedule(out.op), [out], target="ghost")
    finally:
        unregister("ghost")


CORE = ["driver.py", "build_module.py", "lowering.py", "graph", "runtime", "tir", "te", "ops", "autotune",
        "codegen", "cli", "frontend"]


def test_the_core_has_no_per_kind_branches():
    """No `target.kind ==`-style test outside backends/ (and target.py, which reads the registry):
    what differs between devices is asked of the backend or its registered KindSpec."""
    root = Path(tensorforge.__file__).parent
    pattern = re.compile(r"""(\b(target|tgt)\.kind\s*(==|!=|in\b|not in\b))|(\.get\((target|tgt)\.kind\))|"""
                         r"""(["'](c|cuda|opencl)["']\s*(==|!=)\s*(target|tgt)\.kind)""")
    found = []
    for entry in CORE:
        paths = [root / entry] if entry.endswith(".py") else sorted((root / entry).rglob("*.py"))
        for path in paths:
            for k, line in enumerate(path.read_text().splitlines(), 1):
                if pattern.search(line):
                    found.append(f"{path.relative_to(root)}:{k}: {line.strip()}")
    assert found == []


def test_the_grep_finds_a_kind_branch(tmp_path):
    """The check above can fail: the pattern matches the branches this refactoring removed."""
    pattern_lines = ['template_name = registry.get(op).schedule.get(target.kind) or f"{kind}.cpu"',
                     'if tgt.kind == "c":', 'if target.kind != "cuda":']
    pattern = re.compile(r"""(\b(target|tgt)\.kind\s*(==|!=|in\b|not in\b))|(\.get\((target|tgt)\.kind\))""")
    assert all(pattern.search(line) for line in pattern_lines)
