"""One budget shared by the tasks of a model: time or trials, spent where the weighted latency
falls most, plateaued tasks stopped, and the live progress table drawn without errors."""
import dataclasses
import io
import types

import pytest
from test_autotune_tuner import FakeBuilder, FakeRunner, fake_cost

from tensorforge.autotune import tune
from tensorforge.autotune import tuner as tuner_module
from tensorforge.autotune.records import load_records
from tensorforge.autotune.task import Task
from tensorforge.autotune.tuner import parse_duration

HEAVY = dataclasses.replace(Task.for_op("matmul", [((32, 48), "float32"), ((48, 64), "float32")]), occurrences=10)
LIGHT = Task.for_op("matmul", [((16, 48), "float32"), ((48, 64), "float32")])


def test_parse_duration():
    assert parse_duration("10m") == 600 and parse_duration("90s") == 90 and parse_duration("1.5h") == 5400
    assert parse_duration(30) == 30 and parse_duration("45") == 45
    for bad in ("ten minutes", "-5m", "0"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_shared_trial_budget_goes_to_the_heavier_task(tmp_path):
    path = tmp_path / "t.jsonl"
    runner = FakeRunner()
    results = tune([LIGHT, HEAVY], total_trials=96, records=str(path), tuner="random", seed=0,
                   builder=FakeBuilder(), runner=runner, batch_size=8, log=False)
    assert len(runner.seen) == 96 == len(load_records(path))
    light, heavy = results[LIGHT], results[HEAVY]
    assert light.trials >= 8 and heavy.trials >= 8             # each task got its first batch
    assert heavy.trials > light.trials                         # 10 occurrences vs 1 at a similar cost
    assert light.trials + heavy.trials == 96


def test_priority_weighs_occurrences_cost_and_progress():
    from tensorforge.autotune.measure import MeasureResult
    from tensorforge.autotune.tuner import _priority, _TaskState
    from tensorforge.autotune.tuners import make_tuner

    def state(task, costs):
        s = _TaskState(task, make_tuner("random", task.config_space), [], None)
        s.curve = []
        best = float("inf")
        for c in costs:
            best = min(best, c)
            s.curve.append(best)
        s.measured = {str(k): (None, MeasureResult((c,))) for k, c in enumerate(costs)}
        return s

    flat = [1e-3] * 20
    falling = [1e-3 * (1 - 0.02 * k) for k in range(20)]
    assert _priority(state(HEAVY, flat), 8) > _priority(state(LIGHT, flat), 8)        # weight decides
    assert _priority(state(LIGHT, falling), 8) > _priority(state(LIGHT, flat), 8)     # progress decides
    assert _priority(state(LIGHT, [1e-3] * 4), 8) > _priority(state(HEAVY, flat), 8)  # new tasks get a chance


def test_budget_stops_plateaued_tasks_and_ends_early():
    lines = []
    results = tune([LIGHT, HEAVY], total_trials=10_000, tuner="grid", builder=FakeBuilder(), runner=FakeRunner(),
                   batch_size=8, early_stopping=16, log=lines.append)
    assert all(r.trials < 200 for r in results.values())
    assert sum("stopping early" in line for line in lines) == 2
    assert "every task has stopped" in lines[-1]


def test_time_budget_is_respected(monkeypatch):
    # A virtual clock that only the runner moves: each round of measurement takes 0.05 s, so a
    # 0.6 s budget buys exactly 12 rounds (the first batch of each task included), no matter how
    # busy the machine is.
    now = [0.0]

    class SlowRunner(FakeRunner):
        def run(self, builds):
            now[0] += 0.05
            return super().run(builds)

    monkeypatch.setattr(tuner_module, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    runner = SlowRunner()
    results = tune([LIGHT, HEAVY], time_budget=0.6, tuner="random", builder=FakeBuilder(), runner=runner,
                   batch_size=4, log=False)
    assert now[0] == pytest.approx(0.6)                       # stopped at the first round past the budget
    assert len(runner.seen) == sum(r.trials for r in results.values()) == 12 * 4
    assert all(r.trials >= 4 for r in results.values())       # each task measured its first batch


def test_live_table_renders():
    pytest.importorskip("rich")
    from rich.console import Console

    from tensorforge.autotune import progress

    reporter = progress.LiveReporter()
    reporter.console = Console(file=io.StringIO(), width=160, force_terminal=True)
    reporter.live.console = reporter.console
    results = {}

    def make(log, live):
        return reporter

    orig = progress.make_reporter
    progress.make_reporter = make
    try:
        results = tune([LIGHT, HEAVY], total_trials=24, builder=FakeBuilder(), runner=FakeRunner(), batch_size=8)
    finally:
        progress.make_reporter = orig
    out = reporter.console.file.getvalue()
    assert "GFLOP/s" in out and "matmul.cpu" in out and "24 trials this run" in out
    assert sum(r.trials for r in results.values()) == 24


def test_inspect_records_and_plot(tmp_path, capsys):
    from tensorforge.autotune.report import summarize
    from tensorforge.cli import main

    path = tmp_path / "t.jsonl"
    tune([LIGHT, HEAVY], total_trials=40, records=str(path), builder=FakeBuilder(), runner=FakeRunner(),
         batch_size=8, log=False)
    summaries = summarize(path)
    assert [s.task.key for s in summaries] == [LIGHT.key, HEAVY.key]
    for s in summaries:
        assert s.default is not None and s.speedup >= 1.0
        assert len(s.curve) == s.trials and s.curve == sorted(s.curve)      # best-so-far never falls
    assert main(["inspect", "--records", str(path)]) == 0
    out = capsys.readouterr().out
    assert "40 records of 2 task(s): 40 tuning trials, 0 confirmation records" in out
    assert "best config of matmul.cpu" in out
    pytest.importorskip("matplotlib")
    from tensorforge.autotune.report import plot_curves

    png = plot_curves(path, tmp_path / "c.png")
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert main(["inspect", "--records", str(tmp_path / "missing.jsonl")]) == 1
    assert capsys.readouterr().err == f"tensorforge: error: no record file {tmp_path / 'missing.jsonl'}\n"


def test_model_based_tuner_learns_from_other_tasks_of_the_template(tmp_path):
    pytest.importorskip("xgboost")
    path = tmp_path / "t.jsonl"
    tune(LIGHT, trials=24, records=str(path), tuner="random", builder=FakeBuilder(), runner=FakeRunner(),
         batch_size=8, log=False)
    lines = []
    tune([LIGHT, HEAVY], trials=8, records=str(path), tuner="xgb", builder=FakeBuilder(), runner=FakeRunner(),
         batch_size=8, log=lines.append)
    assert any("starts from 24 records of 1 other task(s) of matmul.cpu" in line for line in lines)


def test_search_from_scratch_leaves_the_default_to_the_tuner(tmp_path):
    path = tmp_path / "t.jsonl"
    result = tune(LIGHT, trials=8, records=str(path), tuner="random", seed=3, builder=FakeBuilder(),
                  runner=FakeRunner(), batch_size=4, log=False, measure_default=False)[LIGHT]
    default = LIGHT.config_space.default_config().to_json()
    assert all(r.config != default for r in load_records(path)) and result.trials == 8


def test_confirmation_compares_times_taken_side_by_side(tmp_path):
    """A config timed at a quiet moment looked faster than the default timed at a busy one;
    re-measured side by side, the default wins and compile-time lookup follows the confirmation."""
    from tensorforge.autotune import confirm
    from tensorforge.autotune.measure import MeasureResult
    from tensorforge.autotune.records import Record, RecordWriter, best_configs

    space = LIGHT.config_space
    default, other = space.default_config(), space.get(7)
    assert default != other
    path = tmp_path / "t.jsonl"
    with RecordWriter(path) as w:
        w.write(Record(LIGHT, default.to_json(), (5e-3,)))          # busy moment
        w.write(Record(LIGHT, other.to_json(), (2e-3,)))            # quiet moment
    assert best_configs(path)[LIGHT.key].config == other.to_json()

    class TrueRunner(FakeRunner):          # side by side: the default is the faster one
        def run(self, builds):
            self.seen += [b.input.config.key for b in builds]
            return [MeasureResult((1e-3 if b.input.config == default else 3e-3,)) for b in builds]

    runner = TrueRunner()
    won = confirm(LIGHT, str(path), top=2, rounds=2, builder=FakeBuilder(), runner=runner, log=False)
    assert won[LIGHT] == (1e-3, default) and len(runner.seen) == 4
    records = load_records(path)
    assert [r.stage for r in records] == ["tune", "tune"] + ["confirm"] * 4
    assert best_configs(path)[LIGHT.key].config == default.to_json()
    result = tune(LIGHT, trials=8, records=str(path), builder=FakeBuilder(), runner=FakeRunner(), log=False,
                  confirm=2)[LIGHT]
    assert result.config is not None and load_records(path)[-1].stage == "confirm"


def test_each_task_reports_its_own_confirmed_default():
    class ScaledRunner(FakeRunner):     # the two tasks' times differ by 10x
        def run(self, builds):
            out = super().run(builds)
            return [MeasureResult(tuple(c * (10 if b.input.task == HEAVY else 1) for c in m.costs))
                    for b, m in zip(builds, out)]

    from tensorforge.autotune.measure import MeasureResult

    results = tune([LIGHT, HEAVY], trials=8, builder=FakeBuilder(), runner=ScaledRunner(), batch_size=4, log=False,
                   confirm=2)
    for task, res in results.items():
        default = task.config_space.default_config()
        want = fake_cost(default) * (10 if task == HEAVY else 1)
        assert res.default_cost == pytest.approx(want) and res.cost <= res.default_cost
