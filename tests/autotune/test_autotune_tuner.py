"""Tuners and the tuning loop: no config twice, resume from a record file, early stopping,
and a real random search on a small GEMM (records structure, best = fastest measured)."""
import math

import pytest

from tensorforge.autotune import GATuner, GridTuner, RandomTuner, tune
from tensorforge.autotune.measure import BuildResult, LocalBuilder, LocalRunner, MeasureResult
from tensorforge.autotune.records import load_records
from tensorforge.autotune.task import Task
from tensorforge.autotune.tuners import make_tuner

# a fixed 16-lane target (AVX-512): the space (4608 configs) does not depend on the machine
GEMM = Task.for_op("matmul", [((32, 48), "float32"), ((48, 64), "float32")], target="c -mcpu=skylake-avx512")


def fake_cost(config) -> float:
    """A deterministic, separable 'time' over the knob choices (best: every knob at index 1)."""
    return 1e-3 * (1 + sum((i - 1) ** 2 for i in config.indices))


class FakeBuilder:
    """The Builder protocol without compiling anything."""

    n_parallel = 4

    def build(self, inputs):
        return [BuildResult(i) for i in inputs]


class FakeRunner:
    """The Runner protocol: 'times' a candidate with fake_cost and remembers what it ran."""

    def __init__(self, fail_after: int | None = None):
        self.seen: list[str] = []
        self.fail_after = fail_after

    def run(self, builds):
        if self.fail_after is not None and len(self.seen) >= self.fail_after:
            raise KeyboardInterrupt("the run is killed")
        self.seen += [b.input.config.key for b in builds]
        return [MeasureResult((fake_cost(b.input.config),)) for b in builds]


@pytest.mark.parametrize("kind", ["random", "grid", "ga"])
def test_tuners_never_propose_a_config_twice(kind):
    space = GEMM.config_space
    tuner = make_tuner(kind, space, seed=1)
    seen = set()
    for _ in range(12):
        batch = tuner.next_batch(8)
        assert len(batch) == 8
        keys = {c.key for c in batch}
        assert len(keys) == 8 and not keys & seen
        seen |= keys
        tuner.update(batch, [MeasureResult((fake_cost(c),)) for c in batch])


def test_small_space_is_covered_exactly():
    import autotune_fault_templates  # noqa: F401
    task = Task.create("vector_add_faults.test", [((8,), "float32"), ((8,), "float32")])
    for cls in (RandomTuner, GridTuner, GATuner):
        tuner = cls(task.config_space, seed=0)
        got = []
        while tuner.has_next():
            batch = tuner.next_batch(5)
            got += batch
            tuner.update(batch, [MeasureResult((1.0,))] * len(batch))
        assert sorted(c.index for c in got) == list(range(task.config_space.size)), cls.__name__


def test_genetic_search_finds_good_configs():
    space = GEMM.config_space
    ranked = sorted(fake_cost(c) for c in space)
    good = ranked[2]       # among the 3 best of 4608 (random search with 120 trials: ~10th best)
    for seed in range(3):
        runner = FakeRunner()
        result = tune(GEMM, trials=120, tuner="ga", seed=seed, builder=FakeBuilder(), runner=runner, log=False)[GEMM]
        assert result.cost <= good, seed


def test_default_first_resume_and_kill(tmp_path):
    path = str(tmp_path / "tune.jsonl")
    runner = FakeRunner(fail_after=8)                         # killed after two batches of 4
    with pytest.raises(KeyboardInterrupt):
        tune(GEMM, trials=20, records=path, builder=FakeBuilder(), runner=runner, batch_size=4, log=False)
    first = load_records(path)
    assert len(first) == 8
    assert first[0].config == GEMM.config_space.default_config().to_json()     # the default comes first
    again = FakeRunner()
    result = tune(GEMM, trials=20, records=path, builder=FakeBuilder(), runner=again, batch_size=4, log=False)[GEMM]
    assert len(again.seen) == 12                              # only the configs not measured before
    assert not set(again.seen) & set(runner.seen)
    records = load_records(path)
    assert len(records) == 20 == result.trials
    assert result.cost == min(r.cost for r in records)
    lines = []
    tune(GEMM, trials=20, records=path, builder=FakeBuilder(), runner=FakeRunner(), log=lines.append)
    assert "20 measured before" in lines[0] and len(load_records(path)) == 20       # nothing left to do


def test_records_of_another_thread_count_are_not_resumed(tmp_path):
    path = str(tmp_path / "tune.jsonl")
    one, two = FakeRunner(), FakeRunner()
    one.num_threads, two.num_threads = 1, 2
    tune(GEMM, trials=8, records=path, builder=FakeBuilder(), runner=one, batch_size=4, log=False)
    assert {r.threads for r in load_records(path)} == {1}
    tune(GEMM, trials=8, records=path, builder=FakeBuilder(), runner=two, batch_size=4, log=False)
    assert len(two.seen) == 8                                 # measured again, with 2 threads
    records = load_records(path)
    assert [r.threads for r in records] == [1] * 8 + [2] * 8
    again = FakeRunner()
    again.num_threads = 2
    tune(GEMM, trials=8, records=path, builder=FakeBuilder(), runner=again, batch_size=4, log=False)
    assert again.seen == []                                   # its own thread count: resumed


def test_early_stopping():
    lines = []
    result = tune(GEMM, trials=200, tuner="grid", builder=FakeBuilder(), runner=FakeRunner(), batch_size=4,
                  early_stopping=8, log=lines.append)[GEMM]
    assert result.trials < 200 and "stopping early" in lines[-1]


def test_unknown_tuner():
    with pytest.raises(ValueError, match="unknown tuner 'simplex'"):
        tune(GEMM, trials=2, tuner="simplex", builder=FakeBuilder(), runner=FakeRunner(), log=False)


def test_random_search_on_a_small_gemm(tmp_path):
    gemm = Task.for_op("matmul", GEMM.inputs)        # for this machine: it is built and run
    path = tmp_path / "gemm.jsonl"
    lines = []
    with LocalBuilder(n_parallel=2) as builder, LocalRunner(number=3, repeat=2, num_threads=1) as runner:
        result = tune([gemm], trials=8, records=str(path), tuner="random", seed=0, builder=builder, runner=runner,
                      log=lines.append)[gemm]
    records = load_records(path)
    assert len(records) == 8 == result.trials
    assert len({r.key for r in records}) == 8
    assert records[0].config == gemm.config_space.default_config().to_json()
    for r in records:
        assert r.task == gemm and r.version == 1 and r.timestamp > 0
        assert r.ok, (r.config, r.error, r.message)
        assert len(r.costs) == 2 and all(c > 0 for c in r.costs)
    assert result.cost == min(r.cost for r in records)
    assert result.cost <= result.default_cost and math.isfinite(result.default_cost)
    assert result.config.to_json() == min(records, key=lambda r: r.cost).config
    assert 0 < result.gflops and "GFLOP/s" in lines[-1] and lines[-1].startswith("[1/1] matmul.cpu")
