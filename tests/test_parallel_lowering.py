"""Lowering on every core (parallel_lowering.py): the kernels a cold compile misses are lowered
by worker processes into the lowering cache, and the model is the one lowering here builds; a
worker that dies costs its kernels a second lowering here, not the compile."""
import numpy as np
import pytest

import tensorforge
import tensorforge.parallel_lowering as pl
from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.reference import run_reference


def _net():
    """Fourteen convs of distinct shapes: fourteen kernels to lower (parallel_lowering.MIN_TO_START)."""
    rng = np.random.default_rng(2)
    b = GraphBuilder("workers")
    x = b.input("x", (1, 4, 16, 16), "float32")
    h, c = x, 4
    for k in range(14):
        out = 4 + 2 * k
        w = b.const((rng.standard_normal((out, c, 3, 3)) / np.sqrt(9 * c)).astype("float32"), f"w{k}")
        h = b.add1("relu", [b.add1("conv2d", [h, w], {"padding": (1, 1, 1, 1)})])
        c = out
    return b.finish([h]), rng.standard_normal((1, 4, 16, 16)).astype("float32")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORFORGE_CACHE_DIR", str(tmp_path))
    return tmp_path


def _compile(graph, monkeypatch, workers: str):
    monkeypatch.setenv("TENSORFORGE_LOWERING_WORKERS", workers)
    return tensorforge.compile(graph)


def test_workers_lower_the_same_kernels(cache, tmp_path, monkeypatch):
    graph, x = _net()
    seen: list = []
    real = pl.prelower
    monkeypatch.setattr(pl, "prelower", lambda *a: seen.append(real(*a)) or seen[-1])
    parallel = _compile(graph, monkeypatch, "2")
    assert len(seen[0]) >= pl.MIN_TO_START                  # lowered with the workers
    entries = sorted((cache / "lowered").glob("*.ir"))
    assert len(entries) == len(parallel.info["funcs"])
    assert len(list((cache / "lowered").glob("*.c.entry"))) == len(entries)   # printed there too
    # the same kernels as lowered here, in another cache
    monkeypatch.setenv("TENSORFORGE_CACHE_DIR", str(tmp_path / "serial"))
    serial = _compile(graph, monkeypatch, "1")
    assert seen[-1] == {}
    assert parallel.source == serial.source
    assert [str(f) for f in parallel.info["funcs"]] == [str(f) for f in serial.info["funcs"]]
    np.testing.assert_allclose(parallel(x)[0], run_reference(graph, x)[0], rtol=1e-4, atol=1e-5)


def test_a_dead_worker_costs_a_second_lowering_not_the_compile(cache, monkeypatch):
    graph, x = _net()
    pl._stop_all()
    monkeypatch.setenv("TENSORFORGE_LOWERING_WORKERS", "2")
    workers = pl._started(2)
    workers[0].proc.kill()
    workers[0].proc.wait()
    model = tensorforge.compile(graph)
    np.testing.assert_allclose(model(x)[0], run_reference(graph, x)[0], rtol=1e-4, atol=1e-5)
    assert all(w.alive for w in pl._workers) and len(pl._workers) == 1
    pl._stop_all()


def test_few_missing_kernels_are_lowered_here(cache, monkeypatch):
    b = GraphBuilder("small")
    x = b.input("x", (4, 8), "float32")
    graph = b.finish([b.add1("relu", [x])])
    monkeypatch.setenv("TENSORFORGE_LOWERING_WORKERS", "2")
    started = []
    monkeypatch.setattr(pl, "_Worker", lambda: started.append(1))
    model = tensorforge.compile(graph)
    assert started == []
    np.testing.assert_array_equal(model(np.full((4, 8), -1.0, np.float32))[0], np.zeros((4, 8), np.float32))


def test_worker_count_reads_the_environment(monkeypatch):
    monkeypatch.setenv("TENSORFORGE_LOWERING_WORKERS", "3")
    assert pl.worker_count() == 3
    monkeypatch.setenv("TENSORFORGE_LOWERING_WORKERS", "three")
    with pytest.raises(ValueError, match="TENSORFORGE_LOWERING_WORKERS"):
        pl.worker_count()


def test_an_op_only_this_process_knows_is_lowered_here(cache, monkeypatch):
    """A worker is a fresh interpreter: an op registered by the user's own code is unknown there,
    so its kernels come back as failures and the compile lowers them itself."""
    from tensorforge import te
    from tensorforge.ops import registry
    from tensorforge.ops.registry import INJECTIVE, TensorType, op

    name = "test_parallel.halve"
    try:
        registry.get(name)
    except KeyError:
        @op(name, pattern=INJECTIVE)
        class halve:
            def infer(x: TensorType) -> TensorType:
                return TensorType(x.shape, x.dtype)

            def compute(x):
                return te.compute(x.shape, lambda *i: x[i] * te.const(0.5, x.dtype), name="halve")

            def reference(x):
                return x * np.float32(0.5)
    b = GraphBuilder("user_op")
    outs = []
    for k in range(14):                       # 14 kernels of distinct shapes
        x = b.input(f"x{k}", (2, k + 3), "float32")
        outs.append(b.add1(name, [x]))
    graph = b.finish(outs)
    seen: list = []
    real = pl.prelower
    monkeypatch.setattr(pl, "prelower", lambda *a: seen.append(real(*a)) or seen[-1])
    model = _compile(graph, monkeypatch, "2")
    xs = [np.full((2, k + 3), k + 1.0, np.float32) for k in range(14)]
    for k, y in enumerate(model(*xs)):
        np.testing.assert_array_equal(y, xs[k] * 0.5)
    assert len(seen[0]) < 14                   # the worker's jobs failed: lowered again here
    pl._stop_all()


def test_an_interrupted_compile_leaves_no_worker_mid_job(cache, monkeypatch):
    graph, x = _net()
    real = pl._serve_here

    def interrupted(jobs, lowered, target, done=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(pl, "_serve_here", interrupted)
    monkeypatch.setenv("TENSORFORGE_LOWERING_WORKERS", "2")
    with pytest.raises(KeyboardInterrupt):
        tensorforge.compile(graph)
    assert pl._workers == []                   # killed: their answers would belong to no job
    monkeypatch.setattr(pl, "_serve_here", real)
    model = tensorforge.compile(graph)
    np.testing.assert_allclose(model(x)[0], run_reference(graph, x)[0], rtol=1e-4, atol=1e-5)
    pl._stop_all()
