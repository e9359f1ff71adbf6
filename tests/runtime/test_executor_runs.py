"""Kernel runs: stretches of consecutive kernel steps called through one generated C function
(runtime/executor.py), split at opaque steps, kept through export and load, and the same
results as calling the kernels one by one."""
import dataclasses

import numpy as np
import pytest

import tensorforge
from tensorforge.codegen.c import CodegenError, _sequence
from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.reference import run_reference
from tensorforge.runtime.executor import GraphExecutor


def _net():
    """relu -> sigmoid -> softmax (kernels) -> scatter_elements (opaque: a host step) -> relu ->
    softmax -> add (kernels)."""
    rng = np.random.default_rng(0)
    b = GraphBuilder("runs")
    x = b.input("x", (1, 4, 5, 5), "float32")
    reverse = b.const(np.broadcast_to(np.arange(5)[::-1], (1, 4, 5, 5)).astype("int64"), "reverse")
    h = b.add1("sigmoid", [b.add1("relu", [x])])
    s = b.add1("softmax", [h], {"axes": (1,)})          # a reduction: a kernel of its own
    n = b.add1("scatter_elements", [s, reverse, h], {"axis": 3})
    y = b.add1("add", [b.add1("softmax", [b.add1("relu", [n])], {"axes": (3,)}), h])
    return b.finish([y, s]), rng.standard_normal((1, 4, 5, 5)).astype("float32")


def test_runs_split_at_opaque_steps_and_match_the_reference(tmp_path):
    graph, x = _net()
    model = tensorforge.compile(graph)
    steps, runs = model.spec.steps, model.spec.runs
    opaque = [k for k, st in enumerate(steps) if st["kind"] == "opaque"]
    assert len(opaque) == 1 and len(runs) == 2
    assert runs[0]["steps"] == [0, opaque[0]] and runs[1]["steps"] == [opaque[0] + 1, len(steps)]
    covered = sorted(k for r in runs for k in range(*r["steps"]))
    assert covered == [k for k, st in enumerate(steps) if st["kind"] == "kernel"]
    assert all(r["symbol"] in model.source for r in runs)
    want = run_reference(graph, x)
    got = model(x)
    assert len(got) == len(want) == 2
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    rows = model.profile(x, repeat=2)                  # kernels one by one, for their times
    assert sorted(label for label, _ in rows) == sorted(model.spec.labels)
    assert len(model.spec.labels) == len(steps)
    seconds = [t for _, t in rows]
    assert seconds == sorted(seconds, reverse=True)    # slowest first
    assert all(np.isfinite(t) and t >= 0 for t in seconds) and seconds[0] > 0
    for a, b in zip(model(x), want):                   # profiling leaves the results unchanged
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    again = tensorforge.load(model.export(str(tmp_path / "runs.tfm")))
    assert again.spec.runs == runs
    for a, b in zip(again(x), got):
        np.testing.assert_array_equal(a, b)


def test_a_spec_without_runs_calls_kernels_one_by_one():
    graph, x = _net()
    model = tensorforge.compile(graph)
    old = dataclasses.replace(model.spec, runs=[])       # a model file written before runs existed
    ex = GraphExecutor(old, model.lib_path, model.params)
    assert all(item[0] == "step" for item in ex._plan)
    for a, b in zip(ex(x), model(x)):
        np.testing.assert_array_equal(a, b)


def test_sequence_source_reports_the_failed_call():
    text = _sequence("tf_run_0", [("k0", [0, 1]), ("k1", [1, 2])], {"k0": "k0", "k1": "k1_c"})
    assert "k1_c(v[1], v[2])" in text and "*failed = 1" in text
    with pytest.raises(CodegenError, match="not a function of this module"):
        _sequence("tf_run_0", [("nope", [0])], {"k0": "k0"})
    with pytest.raises(CodegenError, match="not a free C identifier"):
        _sequence("k0", [("k0", [0])], {"k0": "k0"})


def test_each_call_returns_fresh_outputs_and_leaves_inputs_alone():
    """The per-call path (only kernel runs, no copy of the model's fixed values) gives each call
    its own output arrays, reads an input that is not C-contiguous correctly and never writes it."""
    rng = np.random.default_rng(5)
    b = GraphBuilder("fresh")
    x = b.input("x", (6, 8), "float32")
    w = b.const(rng.standard_normal((8, 4)).astype("float32"), "w")
    g = b.finish([b.add1("relu", [b.add1("matmul", [x, w])]), b.add1("exp", [x])])
    model = tensorforge.compile(g)
    a = rng.standard_normal((6, 8)).astype("float32")
    first = model(a)
    kept = [o.copy() for o in first]
    second = model(a * 2)
    for f, k, s in zip(first, kept, second):
        np.testing.assert_array_equal(f, k)                      # not overwritten by the second call
        assert not np.shares_memory(f, s)
    t = np.asfortranarray(a * 3)
    t_before = t.copy()
    for got, want in zip(model(t), run_reference(g, np.ascontiguousarray(t))):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(t, t_before)
