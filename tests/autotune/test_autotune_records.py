"""Record files: round trip, a partial last line from a killed run, best configs, resume keys."""
import json
import math

import pytest

from tensorforge.autotune.records import Record, RecordWriter, best_configs, load_records, measured_keys
from tensorforge.autotune.task import Task
from tensorforge.te.space import config_key

TASK = Task.for_op("matmul", [((8, 16), "float32"), ((16, 32), "float32")])
OTHER = Task.for_op("matmul", [((4, 16), "float32"), ((16, 32), "float32")])


def rec(task, tile, costs=(), error=None):
    return Record(task, {"tile_m": [1, tile]}, tuple(costs), error, "boom" if error else "", 0.1, 0.2, 1000.0 + tile)


def test_round_trip(tmp_path):
    path = tmp_path / "tune.jsonl"
    records = [rec(TASK, 8, (2e-6, 3e-6)), rec(TASK, 4, error="crash"), rec(OTHER, 2, (1e-6,))]
    with RecordWriter(path) as w:
        for r in records:
            w.write(r)
    assert load_records(path) == records
    line = json.loads(path.read_text().splitlines()[0])
    assert set(line) == {"version", "target", "task", "config", "result", "build_s", "run_s", "timestamp"}
    assert line["target"] == "c" and line["task"]["template"] == "matmul.cpu"
    assert line["result"] == {"costs": [2e-6, 3e-6]}
    assert records[1].cost == math.inf and not records[1].ok and records[0].cost == pytest.approx(2e-6)       # the fastest repeat


def test_truncated_last_line_is_skipped_and_appending_goes_on(tmp_path):
    path = tmp_path / "tune.jsonl"
    with RecordWriter(path) as w:
        w.write(rec(TASK, 8, (2e-6,)))
        w.write(rec(TASK, 4, (1e-6,)))
    text = path.read_bytes()
    path.write_bytes(text[:-25])                      # a run killed in the middle of a write
    with pytest.warns(RuntimeWarning, match=r"skipped 1 line.*tune.jsonl:2: a partial line"):
        assert [r.config for r in load_records(path)] == [{"tile_m": [1, 8]}]
    with RecordWriter(path) as w:                     # a resumed run starts on a new line
        w.write(rec(TASK, 2, (3e-6,)))
    with pytest.warns(RuntimeWarning):
        assert [r.config["tile_m"][1] for r in load_records(path)] == [8, 2]


def test_best_configs_and_measured_keys(tmp_path):
    path = tmp_path / "tune.jsonl"
    with RecordWriter(path) as w:
        for r in [rec(TASK, 8, (2e-6,)), rec(TASK, 4, (1e-6, 1.2e-6)), rec(TASK, 2, error="wrong_answer"),
                  rec(OTHER, 8, (5e-6,))]:
            w.write(r)
    best = best_configs(path)
    assert best[TASK.key].config == {"tile_m": [1, 4]} and best[OTHER.key].config == {"tile_m": [1, 8]}
    assert best_configs(path, target="c -mcpu=x86-64-v3") == {}
    keys = measured_keys(path)
    assert (TASK.key, config_key({"tile_m": [1, 2]})) in keys        # errors count as measured
    assert len(keys) == 4


def test_thread_counts_round_trip_and_steer_best_configs(tmp_path):
    path = tmp_path / "tune.jsonl"
    one = [Record(TASK, {"tile_m": [1, t]}, (c,), threads=1) for t, c in ((8, 1e-6), (4, 2e-6))]
    two = [Record(TASK, {"tile_m": [1, 2]}, (3e-6,), threads=2), Record(OTHER, {"tile_m": [1, 2]}, (3e-6,), threads=2)]
    with RecordWriter(path) as w:
        for r in one + two:
            w.write(r)
    assert load_records(path) == one + two
    assert json.loads(path.read_text().splitlines()[0])["threads"] == 1
    assert best_configs(path)[TASK.key].config == {"tile_m": [1, 8]}               # the fastest of all
    assert best_configs(path, threads=2)[TASK.key].config == {"tile_m": [1, 2]}    # measured with 2 threads
    assert best_configs(path, threads=1)[TASK.key].config == {"tile_m": [1, 8]}
    # a task with records of another thread count only keeps its default
    assert OTHER.key not in best_configs(path, threads=1)
    # a record without a count (an older file) counts as matching
    legacy = Record(TASK, {"tile_m": [1, 1]}, (4e-6,))
    assert best_configs(two + [legacy], threads=2)[TASK.key].config == {"tile_m": [1, 2]}
    assert best_configs(one[1:] + [legacy], threads=1)[TASK.key].config == {"tile_m": [1, 4]}
    assert best_configs([legacy] + two, threads=3)[TASK.key].config == {"tile_m": [1, 1]}
    assert best_configs(two, threads=3) == {}


def test_task_json_and_key_are_stable():
    again = Task.from_json(json.loads(json.dumps(TASK.to_json())))
    assert again == TASK and again.key == TASK.key
    assert TASK.key == json.dumps(TASK.to_json(), sort_keys=True, separators=(",", ":"))
    assert TASK != OTHER and TASK.key != OTHER.key
    assert Task.for_op("matmul", [((8, 16), "float32"), ((16, 32), "float32")], target="llvm") == TASK


def test_summary_counts_trials_apart_from_confirmations():
    from tensorforge.autotune.report import format_summary, summarize

    default = TASK.config_space.default_config().to_json()
    other = TASK.config_space.get(TASK.config_space.size - 1).to_json()
    records = [Record(TASK, default, (3e-6,)), Record(TASK, other, (1e-6,)),
               Record(TASK, other, (9e-6,), stage="model"), Record(TASK, default, (8e-6,), stage="model")]
    (s,) = summarize(records)
    assert s.trials == 2 and s.best.config == other and s.default.cost == 3e-6
    assert s.confirmations == {"model": 2} and s.applied.config == default and s.applied.stage == "model"
    assert "applied by compile (confirmed in the model, 2 confirmation records) (the default)" in format_summary([s])
