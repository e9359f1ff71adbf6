"""Measurement survives every kind of bad candidate: a compile error, a build that hangs, a
segfault, a hang and a wrong answer each become an error record, and tuning goes on; candidates
run with this process's thread count, on cache-line aligned buffers as in a model."""
import autotune_fault_templates  # noqa: F401  (registers vector_add_faults.test)
import numpy as np

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


def test_a_runner_without_a_thread_count_measures_with_this_process_count(monkeypatch):
    """The measuring process is spawned, so it does not see a `set_num_threads` made here: the
    runner sends the count along (it ran with the machine's default while the records said 1)."""
    from tensorforge.autotune import measure
    from tensorforge.autotune.measure import BuildResult, MeasureInput
    from tensorforge.autotune.tuner import runner_threads
    from tensorforge.runtime import module

    sent = []

    class Process:
        prepared, runs = set(), 0

        def call(self, msg, timeout):
            sent.append(msg)
            return "ok", ({"ok": True} if msg["kind"] == "prepare" else {"costs": [1e-3]})

    monkeypatch.setattr(measure, "_Process", Process)
    monkeypatch.setattr(module, "_num_threads", 1)
    runner = LocalRunner()
    build = BuildResult(MeasureInput(TASK, TASK.config_space.get(0)), lib_path="lib.so", symbol="f", build_s=0.1)
    [result] = runner.run([build])
    assert result.ok and sent[0]["num_threads"] == 1 == runner_threads(runner)
    monkeypatch.setattr(module, "_num_threads", 3)
    assert LocalRunner().threads() == 3 and LocalRunner(num_threads=2).threads() == 2


def test_candidates_are_measured_on_cache_line_aligned_buffers(monkeypatch):
    """As the executor's arena and params: NumPy's 16-byte alignment made a blocked conv's
    vector loads straddle cache lines (30% slower) and misranked the candidates."""
    from tensorforge.autotune.measure import output_buffers, prepare_io
    from tensorforge.autotune.task import build_candidate

    def misaligned(a):
        raw = np.empty(a.nbytes + 64, np.uint8)
        start = 16 + (-raw.ctypes.data % 64)
        view = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
        view[...] = a
        return view

    reference_io = Task.reference_io
    monkeypatch.setattr(Task, "reference_io",
                        lambda self, seed=0: ([misaligned(a) for a in reference_io(self, seed)[0]],
                                              reference_io(self, seed)[1]))
    inputs, expected = prepare_io(TASK, 0)
    assert all(a.ctypes.data % 64 == 0 for a in inputs)
    assert all(np.array_equal(a, b) for a, b in zip(inputs, reference_io(TASK, 0)[0]))
    outs = output_buffers(build_candidate(TASK, TASK.config_space.get(0)), len(inputs))
    assert [o.shape for o in outs] == [e.shape for e in expected] and all(o.ctypes.data % 64 == 0 for o in outs)
    assert np.isnan(outs[0]).all()
