"""Measurement survives every kind of bad candidate: a compile error, a build that hangs, a
segfault, a hang and a wrong answer each become an error record, and tuning goes on."""
import autotune_fault_templates  # noqa: F401  (registers vector_add_faults.test)

from tensorforge.autotune import tune
from tensorforge.autotune.measure import ErrorKind, LocalBuilder, LocalRunner
from tensorforge.autotune.records import load_records
from tensorforge.autotune.task import Task

TASK = Task.create("vector_add_faults.test", [((64,), "float32"), ((64,), "float32")])
EXPECTED = {"segfault": ErrorKind.CRASH, "hang": ErrorKind.TIMEOUT, "wrong": ErrorKind.WRONG,
            "build_error": ErrorKind.BUILD, "build_hang": ErrorKind.BUILD_TIMEOUT}


def test_tuning_goes_on_past_bad_candidates(tmp_path):
    path = tmp_path / "faults.jsonl"
    with LocalBuilder(n_parallel=2, timeout=3.0) as builder, \
            LocalRunner(number=2, repeat=2, timeout=2.0, num_threads=1) as runner:
        # grid order: the fault knob varies fastest, so configs 0-5 are "none" and the five
        # faults (tile 64 x 1); config 6 is a correct one measured after them
        result = tune(TASK, trials=7, records=str(path), tuner="grid", builder=builder, runner=runner,
                      batch_size=8, log=False)[TASK]
    records = load_records(path)
    assert len(records) == 7 == result.trials and result.errors == 5
    by_fault = {r.config["fault"]: r for r in records if r.config["tile"] == [64, 1]}
    assert {f: r.error for f, r in by_fault.items()} == {"none": None, **EXPECTED}
    assert "signal" in by_fault["segfault"].message
    assert "a deliberately broken config" in by_fault["build_error"].message
    assert "64 of 64 elements differ" in by_fault["wrong"].message
    after = [r for r in records if r.config["tile"] != [64, 1]]
    assert len(after) == 1 and all(r.ok and len(r.costs) == 2 for r in after)
    assert result.config["fault"].val == "none" and result.cost == min(r.cost for r in records)
