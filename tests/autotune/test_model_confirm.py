"""Confirmation in the model (autotune/model_confirm.py): candidates are timed inside the running
model, written as "model" records, and those decide the config compile applies."""
import numpy as np

import tensorforge
from tensorforge.autotune import confirm_in_model, extract_tasks
from tensorforge.autotune.records import Record, RecordWriter, best_configs, load_records
from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.reference import run_reference
from tensorforge.runtime.module import get_num_threads


def _net():
    rng = np.random.default_rng(0)
    b = GraphBuilder("mc")
    x = b.input("x", (2, 32), "float32")
    h = b.add1("relu", [b.add1("dense", [x, b.const(rng.standard_normal((64, 32)).astype("float32"), "w1")])])
    h = b.add1("relu", [b.add1("dense", [h, b.const(rng.standard_normal((64, 64)).astype("float32"), "w2")])])
    return b.finish([h]), rng.standard_normal((2, 32)).astype("float32")


def test_candidates_are_timed_in_the_model_and_decide(tmp_path):
    graph, x = _net()
    tasks = extract_tasks(graph)
    path = tmp_path / "tune.jsonl"
    threads = get_num_threads()
    with RecordWriter(path) as w:
        for task in tasks:
            space = task.config_space
            # two tuned configs that claim to beat the default alone, and one that failed
            for i, cost in ((space.size - 1, 1e-6), (space.size // 2, 2e-6)):
                w.write(Record(task, space.get(i).to_json(), (cost,), threads=threads))
            w.write(Record(task, space.get(1).to_json(), (), "crash", "boom", threads=threads))
            w.write(Record(task, space.default_config().to_json(), (5e-6,), threads=threads))
    lines = []
    chosen = confirm_in_model(graph, str(path), top=2, rounds=2, runs=3, log=lines.append)
    assert set(chosen) == set(tasks) and len(lines) == len(tasks)
    model = [r for r in load_records(path) if r.stage == "model"]
    assert len(model) == 3 * len(tasks)                   # the default and the two tuned configs, per task
    assert all(r.ok and len(r.costs) == 2 and r.threads == threads for r in model)
    best = best_configs(path, threads=threads)
    for task in tasks:
        fastest = min((r for r in model if r.task.key == task.key), key=lambda r: r.cost)
        assert best[task.key].stage == "model" and best[task.key].config == fastest.config
        assert task.config_space.from_json(fastest.config) == chosen[task]
    tuned = tensorforge.compile(graph, records=str(path))
    np.testing.assert_allclose(tuned(x)[0], run_reference(graph, x)[0], rtol=1e-4, atol=1e-4)


def test_nothing_to_confirm_without_records(tmp_path):
    graph, _ = _net()
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    assert confirm_in_model(graph, str(path), log=False) == {}
    assert load_records(path) == []


def test_a_model_record_times_one_kernel():
    from tensorforge.autotune.model_confirm import kernel_seconds
    # steps 0 and 2 run the task (step 1 another kernel), 2 runs: (1 + 4) / 2 runs / 2 kernels
    assert kernel_seconds([1.0, 2.0, 4.0], [0, 2], 2) == 1.25
