"""compile(records=...) applies the best record of each task and keeps the default elsewhere."""
import numpy as np

import tensorforge
from tensorforge.autotune import extract_tasks
from tensorforge.autotune.records import Record, RecordWriter
from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.reference import run_reference


def two_layer_graph():
    rng = np.random.default_rng(0)
    b = GraphBuilder("mlp")
    x = b.input("x", (4, 64), "float32")
    h = b.add1("dense", [x, b.const(rng.standard_normal((96, 64)).astype("float32"), "w1")])
    h = b.add1("relu", [h])
    y = b.add1("dense", [h, b.const(rng.standard_normal((48, 96)).astype("float32"), "w2")])
    return b.finish([y])


def test_compile_applies_best_record(tmp_path):
    g = two_layer_graph()
    tasks = extract_tasks(g, target="c")
    assert tasks, "the dense layers should be tunable"
    task = tasks[0]
    space = task.config_space
    chosen = space.get(space.size - 1)          # a non-default point
    path = tmp_path / "tune.jsonl"
    with RecordWriter(path) as w:
        w.write(Record(task=task, config=chosen.to_json(), costs=(1e-6,)))
        w.write(Record(task=task, config=space.get(0).to_json(), costs=(1e-3,)))
    tuned = tensorforge.compile(g, target="c", records=str(path))
    assert tuned.info["tuned_groups"] == 1
    default = tensorforge.compile(g, target="c")
    assert default.info["tuned_groups"] == 0
    assert tuned.source != default.source       # the tuned kernel really is scheduled differently
    x = np.random.default_rng(1).standard_normal((4, 64)).astype("float32")
    want = run_reference(g, x)[0]
    np.testing.assert_allclose(tuned(x)[0], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(default(x)[0], want, rtol=1e-4, atol=1e-4)


def test_records_of_another_thread_count_are_not_applied(tmp_path, caplog, monkeypatch):
    from tensorforge.runtime import module

    g = two_layer_graph()
    task = extract_tasks(g, target="c")[0]
    chosen = task.config_space.get(task.config_space.size - 1)
    monkeypatch.setattr(module, "_num_threads", 2)             # this process runs with 2 threads
    one = [Record(task=task, config=chosen.to_json(), costs=(1e-6,), threads=1)]
    with caplog.at_level("INFO", logger="tensorforge"):
        model = tensorforge.compile(g, target="c", records=one)
    assert model.info["tuned_groups"] == 0
    assert "records only for 1 thread(s), not for the 2 this process uses" in caplog.text
    two = [Record(task=task, config=chosen.to_json(), costs=(1e-6,), threads=2)]
    assert tensorforge.compile(g, target="c", records=two).info["tuned_groups"] == 1
