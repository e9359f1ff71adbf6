"""The tuning loop: the `space -> best config` arrow of autotune/, driving the tuners of
tuners.py.

`tune(tasks, trials, records, tuner)` runs, per task: measure the template's default config
first (so the result is never worse than the default), then batches that the tuner proposes,
until `trials` configs of the task have been measured (records already in the file count:
a killed run, restarted with the same command, continues where it stopped and measures no
config twice).  Every result is appended to the record file as it arrives.  With a time or
trial budget for all tasks together, a scheduler hands out the rounds (see `tune`).  A tuner
with a `transfer(records)` method (the model-based one) first learns from the records of
other tasks of the same template: the file's and those measured earlier in the run.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from ..te.space import ConfigEntity, ConfigError
from .measure import Builder, LocalBuilder, LocalRunner, MeasureInput, MeasureResult, Runner
from .records import Record, RecordWriter, load_records
from .task import Task
from .tuners import Tuner, make_tuner


@dataclass(frozen=True)
class TuneResult:
    """The outcome for one task: its best config (None when nothing ran correctly) and how
    many configs were measured in all (earlier runs included)."""

    task: Task
    config: ConfigEntity | None
    cost: float
    default_cost: float
    trials: int
    errors: int

    @property
    def gflops(self) -> float:
        return self.task.flops / self.cost / 1e9 if math.isfinite(self.cost) and self.cost > 0 else 0.0


def parse_duration(text: str | float | int) -> float:
    """Seconds from "90", "90s", "10m", "1.5h" (a number alone means seconds)."""
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        raw = str(text).strip().lower()
        scale = {"s": 1.0, "m": 60.0, "h": 3600.0}.get(raw[-1:], None)
        try:
            value = float(raw[:-1] if scale is not None else raw) * (scale or 1.0)
        except ValueError:
            raise ValueError(f"cannot read the duration {text!r}; write e.g. 600, 90s, 10m or 1.5h") from None
    if not value > 0:
        raise ValueError(f"a duration must be positive, got {text!r}")
    return value


class _TaskState:
    """One task's tuning so far: its tuner, every measured config (earlier runs included), and
    the best-so-far cost after each measured trial (the curve the scheduler reads)."""

    def __init__(self, task: Task, tuner: Tuner, previous: list[Record], cap: int | None,
                 session: list[Record] | None = None, earlier: list[Record] | None = None):
        self.task, self.tuner = task, tuner
        self.measure_default = True
        self.session = [] if session is None else session    # every record of this run, all tasks
        self.earlier = earlier or []                          # every record of the file, all tasks
        self.transferred = False
        space = task.config_space
        self.measured: dict[str, tuple[ConfigEntity, MeasureResult]] = {}
        self.stale = 0
        for r in previous:
            try:
                c = space.from_json(r.config)
            except ConfigError:
                self.stale += 1       # recorded with another version of the template
                continue
            self.measured[c.key] = (c, MeasureResult(r.costs, r.error, r.message, r.build_s, r.run_s, r.timestamp))
        self.before = len(self.measured)
        if self.measured:
            tuner.update([c for c, _ in self.measured.values()], [m for _, m in self.measured.values()])
        self.budget = space.size if cap is None else min(cap, space.size)
        self.default = space.default_config()
        self.curve: list[float] = []
        best = math.inf
        for _, m in self.measured.values():
            best = min(best, m.cost)
            self.curve.append(best)
        self.best_at = len(self.measured)
        self.stopped: str | None = None      # why the task stopped early, once it has
        self.seconds = 0.0                   # wall time spent on this task in this run
        self.correlation: float | None = None  # predicted vs measured ranking of the last batch
        self.confirmed: tuple[float, ConfigEntity | None] | None = None   # winner of the confirmation

    # What the scheduler reads ------------------------------------------------------------
    @property
    def trials(self) -> int:
        return len(self.measured)

    @property
    def done(self) -> bool:
        return self.stopped is not None or self.trials >= self.budget

    @property
    def best(self) -> tuple[float, ConfigEntity | None]:
        best: tuple[float, ConfigEntity | None] = (math.inf, None)
        for c, m in self.measured.values():
            if m.ok and m.cost < best[0]:
                best = (m.cost, c)
        return best

    @property
    def errors(self) -> int:
        return sum(1 for _, m in self.measured.values() if not m.ok)

    @property
    def default_cost(self) -> float:
        return self.measured[self.default.key][1].cost if self.default.key in self.measured else math.inf

    def improvement_rate(self, window: int) -> float | None:
        """Relative drop of the best cost per trial over the last `window` trials (None until
        the task has measured more than `window` configs with a finite best)."""
        if len(self.curve) <= window or not math.isfinite(self.curve[-window - 1]):
            return None
        old, new = self.curve[-window - 1], self.curve[-1]
        return (old - new) / old / window

    # One round ---------------------------------------------------------------------------
    def step(self, batch: int, builder: Builder, runner: Runner, writer: RecordWriter | None) -> int:
        """Measure up to `batch` new configs (the default first); returns how many ran."""
        want = min(batch, self.budget - self.trials)
        configs = [] if self.default.key in self.measured or not self.measure_default else [self.default]
        if len(configs) < want and self.tuner.has_next():
            configs += [c for c in self.tuner.next_batch(want - len(configs))
                        if c.key not in self.measured and (c != self.default or not self.measure_default)]
        if not configs:
            self.stopped = "the space is used up"
            return 0
        start = time.perf_counter()
        before = self.best[0]
        outcome = runner.run(builder.build([MeasureInput(self.task, c) for c in configs]))
        best = self.curve[-1] if self.curve else math.inf
        threads = runner_threads(runner)
        for c, m in zip(configs, outcome):
            self.measured[c.key] = (c, m)
            best = min(best, m.cost)
            self.curve.append(best)
            self.keep(Record(self.task, c.to_json(), m.costs, m.error, m.message, m.build_s, m.run_s, m.timestamp,
                             threads=threads), writer)
        self.correlation = _rank_correlation(self.tuner, configs, outcome)
        self.tuner.update(configs, outcome)
        if self.best[0] < before:
            self.best_at = self.trials
        self.seconds += time.perf_counter() - start
        return len(configs)

    def keep(self, record: Record, writer: RecordWriter | None) -> None:
        """Remember a record of this run (transfer reads them) and append it to the file."""
        self.session.append(record)
        if writer is not None:
            writer.write(record)

    def plateaued(self, patience: int | None) -> bool:
        return patience is not None and self.trials - self.best_at >= patience

    def result(self) -> TuneResult:
        cost, config = self.confirmed or self.best
        default = self.default_cost
        if self.confirmed is not None:      # the default's time from the same moment as the winner's
            default = min((r.cost for r in self.session if r.stage == "confirm" and r.task.key == self.task.key
                           and r.config == self.default.to_json()), default=default)
        return TuneResult(self.task, config, cost, default, self.trials, self.errors)


def _rank_correlation(tuner: Tuner, configs: Sequence[ConfigEntity], results: Sequence[MeasureResult]) -> float | None:
    """Spearman correlation of the tuner's predicted scores (higher = faster) with measured
    throughput over a batch, when the tuner predicts (the model-based one does)."""
    predict = getattr(tuner, "predicted_scores", None)
    if predict is None:
        return None
    pairs = [(s, 1.0 / m.cost if m.ok and m.cost > 0 else 0.0)
             for s, m in zip(predict(configs), results) if s is not None and math.isfinite(s)]
    if len(pairs) < 3:
        return None
    import numpy as np

    a = np.argsort(np.argsort([p for p, _ in pairs])).astype(float)
    b = np.argsort(np.argsort([q for _, q in pairs])).astype(float)
    if a.std() == 0 or b.std() == 0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def runner_threads(runner) -> int | None:
    """The thread count a runner's candidates run with, for the records: its `num_threads`, or
    for a local runner without one this process's count (LocalRunner.threads);
    None when unknown (a pool's workers use their own machines' defaults)."""
    from .measure import LocalRunner
    if isinstance(runner, LocalRunner):
        return runner.threads()
    n = getattr(runner, "num_threads", None)
    return int(n) if n is not None else None


def _stderr_line(line: str) -> None:
    import sys
    print(line, file=sys.stderr, flush=True)


def _confirm_state(state: _TaskState, top: int, rounds: int, builder: Builder, runner: Runner,
                   writer: RecordWriter | None) -> tuple[float, ConfigEntity | None]:
    """Re-measure the default and the `top` fastest configs of a task side by side, `rounds`
    times in turn, as "confirm" records; returns the fastest (time, config) among them."""
    ranked = sorted(((m.cost, c.index, c) for c, m in state.measured.values() if m.ok))
    configs = [c for _, _, c in ranked[:top]]
    if state.default not in configs:
        configs.append(state.default)
    builds = builder.build([MeasureInput(state.task, c) for c in configs])
    best: tuple[float, ConfigEntity | None] = (math.inf, None)
    threads = runner_threads(runner)
    for _ in range(rounds):
        for c, m in zip(configs, runner.run(builds)):
            state.keep(Record(state.task, c.to_json(), m.costs, m.error, m.message, m.build_s, m.run_s, m.timestamp,
                              stage="confirm", threads=threads), writer)
            if m.ok and m.cost < best[0]:
                best = (m.cost, c)
    return best


def confirm(tasks: Task | Sequence[Task], records: str, top: int = 3, rounds: int = 3, *,
            builder: Builder | None = None, runner: Runner | None = None,
            log: Callable[[str], None] | None | bool = True) -> dict[Task, tuple[float, ConfigEntity | None]]:
    """For each task of a record file: re-measure its default config and its `top` fastest
    recorded configs side by side (`rounds` times, in turn) and append the results as
    "confirm" records, which then decide the task's best config (records.best_configs).

    Tuning on a busy machine compares times taken at different moments: a config timed while
    another process ran looks slower than one timed at a quiet moment.  Times taken in turn,
    at one moment, compare fairly."""
    tasks = [tasks] if isinstance(tasks, Task) else list(tasks)
    say = (_stderr_line if log is True else (log or (lambda line: None)))
    own_builder, own_runner = builder is None, runner is None
    builder = builder or LocalBuilder()
    runner = runner or LocalRunner()
    threads = runner_threads(runner)
    previous = [r for r in load_records(records) if r.measured_with(threads)]
    out: dict[Task, tuple[float, ConfigEntity | None]] = {}
    try:
        with RecordWriter(records) as writer:
            for task in tasks:
                mine = [r for r in previous if r.task.key == task.key and r.stage != "confirm"]
                if not any(r.ok for r in mine):
                    continue
                state = _TaskState(task, make_tuner("random", task.config_space), mine, None)
                cost, config = out[task] = _confirm_state(state, top, rounds, builder, runner, writer)
                default = min((r.cost for r in state.session
                               if r.task.key == task.key and r.config == state.default.to_json()), default=math.inf)
                say(f"{task.name}: confirmed {'the default' if config == state.default else config} "
                    f"({cost * 1e3:.4f} ms; default {default * 1e3:.4f} ms)")
    finally:
        if own_builder:
            builder.close()     # type: ignore[union-attr]
        if own_runner:
            runner.close()      # type: ignore[union-attr]
    return out


def _new_tuner(kind: str, task: Task, seed: int) -> Tuner:
    import inspect

    if "task" in inspect.signature(make_tuner).parameters:
        return make_tuner(kind, task.config_space, seed=seed, task=task)   # type: ignore[call-arg]
    return make_tuner(kind, task.config_space, seed=seed)


def tune(tasks: Task | Sequence[Task], trials: int | None = None, records: str | None = None, tuner: str = "random",
         seed: int = 0, *, time_budget: float | str | None = None, total_trials: int | None = None,
         builder: Builder | None = None, runner: Runner | None = None, batch_size: int | None = None,
         early_stopping: int | None = None, log: Callable[[str], None] | None | bool = True,
         live: bool | None = None, measure_default: bool = True, confirm: int = 0) -> dict[Task, TuneResult]:
    """Tune `tasks` and return {task: TuneResult}.

    Without a budget, each task in turn gets up to `trials` measured configs (default 64).
    With `time_budget` (seconds or "10m", for this run) and/or `total_trials` (measured configs of
    all tasks together, those already in `records` included: a rerun resumes toward the same
    total), one budget is shared: every task first measures one batch (its
    default config first), then each round goes to the task where a round is expected to
    shrink end-to-end latency most -- weight = occurrences x current best time x the task's
    recent relative improvement per trial (an optimistic rate until a task has history) --
    and a task stops once it plateaus (`early_stopping` trials without a new best; default 64
    in budget mode), runs out of configs, or reaches `trials` (a cap per task, if given).

    records: a JSON-lines file; results are appended as they come, and configs it already
    holds for a task are not measured again (they count toward `trials`).
    tuner: "random", "grid", "ga" or "xgb" (model-based).  builder / runner: LocalBuilder() /
    LocalRunner() by default (closed at the end; ones you pass stay open).  batch_size: configs
    built and run per round (default: two per build process).  log: True shows progress on the
    terminal (a live table with `rich` when the terminal is interactive, else a line per
    round), a callable receives the lines, False/None is quiet; `live` forces the table on/off.
    measure_default: False leaves the template's default config to the tuner like any other
    (a search from scratch, as when comparing tuners).  confirm: at the end, re-measure each
    task's default and its `confirm` fastest configs side by side (three rounds, in turn) as
    "confirm" records, which then decide the best config (see `confirm()`); 0 skips it.

    Measurement runs in processes started with "spawn", which imports the main module again:
    a script that calls tune() needs the usual `if __name__ == "__main__":` guard."""
    tasks = [tasks] if isinstance(tasks, Task) else list(tasks)
    budget_mode = time_budget is not None or total_trials is not None
    if trials is None and not budget_mode:
        trials = 64
    if trials is not None and trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials}")
    if total_trials is not None and total_trials < 1:
        raise ValueError(f"total_trials must be >= 1, got {total_trials}")
    seconds = parse_duration(time_budget) if time_budget is not None else None
    patience = early_stopping if early_stopping is not None or not budget_mode else 64
    if len({t.key for t in tasks}) != len(tasks):
        raise ValueError("tune() got the same task twice")
    from .progress import make_reporter

    report = make_reporter(log, live)
    own_builder, own_runner = builder is None, runner is None
    builder = builder or LocalBuilder()
    runner = runner or LocalRunner()
    batch = batch_size or 2 * getattr(builder, "n_parallel", 4)
    # records measured with another thread count are neither resumed from nor learned from
    threads = runner_threads(runner)
    previous = [r for r in (load_records(records) if records is not None else []) if r.measured_with(threads)]
    writer = RecordWriter(records) if records is not None else None
    session: list[Record] = []
    states = [_TaskState(t, _new_tuner(tuner, t, seed), [r for r in previous if r.task.key == t.key], trials,
                         session, previous) for t in tasks]
    for s in states:
        s.measure_default = measure_default
    clock = _Clock(seconds, total_trials, before=sum(s.before for s in states))
    report.start(states, clock)
    if clock.trials is not None and clock.spent():
        report.note(f"the budget of {clock.trials} trials is used up by the {clock.before} already in {records}; "
                    "raise --total-trials to measure more")
    try:
        if budget_mode:
            _run_shared_budget(states, batch, builder, runner, writer, patience, clock, report)
        else:
            for state in states:
                _run_alone(state, batch, builder, runner, writer, patience, clock, report)
        if confirm > 0:
            for state in states:
                if any(m.ok for _, m in state.measured.values()):
                    state.confirmed = _confirm_state(state, confirm, 3, builder, runner, writer)
                    report.note(f"{state.task.name}: confirmed side by side: "
                                f"{'the default' if state.confirmed[1] == state.default else state.confirmed[1]}")
    finally:
        report.stop()
        if writer is not None:
            writer.close()
        if own_builder:
            builder.close()     # type: ignore[union-attr]
        if own_runner:
            runner.close()      # type: ignore[union-attr]
    return {s.task: s.result() for s in states}


class _Clock:
    """The shared budget: wall time of this run and/or measured trials of the tasks, those
    already in the record file (`before`) included, so a resumed run stops where one
    uninterrupted run with the same budget would have."""

    def __init__(self, seconds: float | None, trials: int | None, before: int = 0):
        self.seconds, self.trials = seconds, trials
        self.start = time.perf_counter()
        self.before = before      # trials of the tasks in the record file when the run began
        self.used = 0             # trials measured in this run

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    @property
    def left(self) -> float | None:
        return None if self.seconds is None else max(0.0, self.seconds - self.elapsed)

    def trials_left(self) -> int | None:
        return None if self.trials is None else self.trials - self.before - self.used

    def spent(self) -> bool:
        return (self.seconds is not None and self.elapsed >= self.seconds) or \
               (self.trials is not None and self.before + self.used >= self.trials)


def _round(state: _TaskState, batch: int, builder, runner, writer, patience, clock: _Clock, report) -> None:
    if not state.transferred:
        state.transferred = True
        learn = getattr(state.tuner, "transfer", None)       # the model-based tuner learns from other tasks
        if learn is not None:
            others = [r for r in state.earlier + state.session
                      if r.task.template == state.task.template and r.task.key != state.task.key]
            if others and learn(others):
                report.note(f"{state.task.name}: the cost model starts from {len(others)} records of "
                            f"{len({r.task.key for r in others})} other task(s) of {state.task.template}")
    left = clock.trials_left()
    n = state.step(batch if left is None else min(batch, left), builder, runner, writer)
    clock.used += n
    if state.plateaued(patience) and not state.done:
        state.stopped = f"no better config in the last {patience} trials"
    report.round(state)


def _run_alone(state: _TaskState, batch, builder, runner, writer, patience, clock, report) -> None:
    while not state.done and not clock.spent():
        _round(state, batch, builder, runner, writer, patience, clock, report)


def _run_shared_budget(states: list[_TaskState], batch, builder, runner, writer, patience, clock: _Clock,
                       report) -> None:
    for state in states:                     # every task's default and a first batch
        if clock.spent():
            return
        if not state.done:
            _round(state, batch, builder, runner, writer, patience, clock, report)
    window = 2 * batch
    while not clock.spent():
        live = [s for s in states if not s.done]
        if not live:
            report.note("every task has stopped (plateaued or used up its space) before the budget ran out")
            return
        _round(max(live, key=lambda s: _priority(s, window)), batch, builder, runner, writer, patience, clock, report)


_OPTIMISTIC_RATE = 0.01     # relative gain per trial assumed for a task with no history yet
_FLOOR_RATE = 1e-4          # a task whose curve is flat still gets a round now and then


def _priority(state: _TaskState, window: int) -> float:
    """Expected end-to-end seconds saved per trial spent on this task next."""
    cost = state.best[0]
    if not math.isfinite(cost):
        return math.inf if state.trials < 2 * window else 0.0      # nothing ran correctly yet: try a bit more
    rate = state.improvement_rate(window)
    rate = _OPTIMISTIC_RATE if rate is None else max(rate, _FLOOR_RATE)
    return state.task.occurrences * cost * rate
