"""Tuners and the tuning loop: the `space -> best config` arrow of autotune/.

A tuner proposes configs of one task's space and learns from their results; it implements
the `Tuner` protocol (`next_batch(n)`, `update(configs, results)`, `has_next()`).  Here:
random search, grid search (index order) and a genetic algorithm; the model-based tuner
(simulated annealing over a learned cost model, cost_model.py) comes next.

`tune(tasks, trials, records, tuner)` runs, per task: measure the template's default config
first (so the result is never worse than the default), then batches that the tuner proposes,
until `trials` configs of the task have been measured (records already in the file count:
a killed run, restarted with the same command, continues where it stopped and measures no
config twice).  Every result is appended to the record file as it arrives.
"""
from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

from .measure import Builder, LocalBuilder, LocalRunner, MeasureInput, MeasureResult, Runner
from .records import Record, RecordWriter, load_records
from .space import ConfigEntity, ConfigError, ConfigSpace
from .task import Task


class Tuner(Protocol):
    def next_batch(self, n: int) -> list[ConfigEntity]:
        """Up to `n` configs not proposed before (fewer only when the space runs out)."""

    def update(self, configs: Sequence[ConfigEntity], results: Sequence[MeasureResult]) -> None:
        """Results of measured configs (also those of earlier runs, read from records)."""

    def has_next(self) -> bool:
        """Whether a config remains that was neither proposed nor measured."""


class _TunerBase:
    """Tracks the configs already proposed or measured (by index) and the best result."""

    def __init__(self, space: ConfigSpace, seed: int = 0):
        self.space = space
        self.rng = random.Random(seed)
        self.visited: set[int] = set()
        self.best: tuple[float, ConfigEntity] | None = None

    def has_next(self) -> bool:
        return len(self.visited) < self.space.size

    def update(self, configs: Sequence[ConfigEntity], results: Sequence[MeasureResult]) -> None:
        for c, r in zip(configs, results):
            self.visited.add(c.index)
            if r.ok and (self.best is None or r.cost < self.best[0]):
                self.best = (r.cost, c)

    def _random_unvisited(self) -> ConfigEntity | None:
        """A uniformly random config not visited yet (None when there is none)."""
        size = self.space.size
        if len(self.visited) >= size:
            return None
        if len(self.visited) < size // 2:
            while True:                     # rejection sampling: at least half of the draws hit
                index = self.rng.randrange(size)
                if index not in self.visited:
                    return self.space.get(index)
        left = [i for i in range(size) if i not in self.visited]     # a small, nearly used-up space
        return self.space.get(self.rng.choice(left))


class RandomTuner(_TunerBase):
    """Configs drawn uniformly at random, without repetition."""

    def next_batch(self, n: int) -> list[ConfigEntity]:
        out = []
        while len(out) < n:
            c = self._random_unvisited()
            if c is None:
                break
            self.visited.add(c.index)
            out.append(c)
        return out


class GridTuner(_TunerBase):
    """Configs in index order (the first knob varies fastest)."""

    def __init__(self, space: ConfigSpace, seed: int = 0):
        super().__init__(space, seed)
        self._next = 0

    def next_batch(self, n: int) -> list[ConfigEntity]:
        out = []
        while len(out) < n and self._next < self.space.size:
            if self._next not in self.visited:
                self.visited.add(self._next)
                out.append(self.space.get(self._next))
            self._next += 1
        return out


class GATuner(_TunerBase):
    """A genetic algorithm over knob choices.  Fitness is 1 / time (0 for an error).  Each
    generation keeps the `elite_num` fittest configs measured so far and breeds children
    from parents picked in proportion to fitness: uniform crossover (each knob from either
    parent), then each knob mutated with probability `mutation_prob`.  Children already
    measured are re-drawn; random configs fill in when breeding keeps repeating itself."""

    def __init__(self, space: ConfigSpace, seed: int = 0, pop_size: int = 16, elite_num: int = 3,
                 mutation_prob: float = 0.1):
        super().__init__(space, seed)
        if pop_size < 2 or not 0 <= elite_num < pop_size:
            raise ValueError("GATuner needs pop_size >= 2 and 0 <= elite_num < pop_size")
        self.pop_size, self.elite_num, self.mutation_prob = pop_size, elite_num, mutation_prob
        self.fitness: dict[int, float] = {}
        self._pending: list[ConfigEntity] = []

    def update(self, configs: Sequence[ConfigEntity], results: Sequence[MeasureResult]) -> None:
        super().update(configs, results)
        for c, r in zip(configs, results):
            self.fitness[c.index] = 1.0 / r.cost if r.ok and r.cost > 0 else 0.0

    def next_batch(self, n: int) -> list[ConfigEntity]:
        out = []
        while len(out) < n and self.has_next():
            if not self._pending:
                self._pending = self._breed()
            c = self._pending.pop(0)
            if c.index in self.visited:
                continue
            self.visited.add(c.index)
            out.append(c)
        return out

    def _breed(self) -> list[ConfigEntity]:
        scored = sorted(self.fitness.items(), key=lambda kv: -kv[1])[:self.pop_size]
        if len(scored) < 2 or scored[0][1] <= 0:
            first = [self._random_unvisited() for _ in range(self.pop_size)]
            return [c for c in first if c is not None]
        parents = [self.space.get(i) for i, _ in scored]
        weights = [f for _, f in scored]
        children: list[ConfigEntity] = []
        seen = set(self.visited)
        for _ in range(self.pop_size * 8):
            if len(children) >= self.pop_size - self.elite_num:
                break
            a, b = self.rng.choices(parents, weights=weights, k=2) if sum(weights) > 0 else self.rng.sample(parents, 2)
            genes = [x if self.rng.random() < 0.5 else y for x, y in zip(a.indices, b.indices)]
            for pos, knob in enumerate(self.space.knobs.values()):
                if self.rng.random() < self.mutation_prob:
                    genes[pos] = self.rng.randrange(len(knob))
            child = ConfigEntity(self.space, tuple(genes))
            if child.index not in seen:
                seen.add(child.index)
                children.append(child)
        while len(children) < self.pop_size - self.elite_num:
            c = self._random_unvisited()
            if c is None or c.index in seen:
                break
            seen.add(c.index)
            children.append(c)
        return children


TUNERS: dict[str, Callable[..., Tuner]] = {"random": RandomTuner, "grid": GridTuner, "ga": GATuner}


def make_tuner(kind: str, space: ConfigSpace, seed: int = 0) -> Tuner:
    try:
        return TUNERS[kind](space, seed=seed)
    except KeyError:
        raise ValueError(f"unknown tuner {kind!r}; available: {', '.join(TUNERS)} "
                         "(the model-based tuner is not there yet)") from None


# The tuning loop ---------------------------------------------------------------------------

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


def _printer() -> Callable[[str], None]:
    """Progress lines on the terminal: through rich when it is installed, else print()."""
    try:
        from rich.console import Console
    except ImportError:
        return lambda line: print(line, flush=True)
    console = Console(highlight=False, soft_wrap=True)
    return lambda line: console.print(line, markup=False)


def tune(tasks: Task | Sequence[Task], trials: int = 64, records: str | None = None, tuner: str = "random",
         seed: int = 0, *, builder: Builder | None = None, runner: Runner | None = None,
         batch_size: int | None = None, early_stopping: int | None = None,
         log: Callable[[str], None] | None | bool = True) -> dict[Task, TuneResult]:
    """Tune each task (up to `trials` measured configs each) and return {task: TuneResult}.

    records: a JSON-lines file; results are appended as they come, and configs it already
    holds for a task are not measured again (they count toward `trials`).
    tuner: "random", "grid" or "ga".  builder / runner: LocalBuilder() / LocalRunner() by
    default (closed at the end; ones you pass stay open).  batch_size: configs built and run
    per round (default: two per build process).  early_stopping: stop a task after this many
    measured configs without a new best.  log: True prints a line per round, a callable
    receives the lines, False/None is quiet.

    Measurement runs in processes started with "spawn", which imports the main module again:
    a script that calls tune() needs the usual `if __name__ == "__main__":` guard."""
    tasks = [tasks] if isinstance(tasks, Task) else list(tasks)
    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials}")
    say = _printer() if log is True else (log or (lambda line: None))
    own_builder, own_runner = builder is None, runner is None
    builder = builder or LocalBuilder()
    runner = runner or LocalRunner()
    batch = batch_size or 2 * getattr(builder, "n_parallel", 4)
    previous = load_records(records) if records is not None else []
    writer = RecordWriter(records) if records is not None else None
    results: dict[Task, TuneResult] = {}
    try:
        for n, task in enumerate(tasks, 1):
            mine = [r for r in previous if r.task.key == task.key]
            results[task] = _tune_task(task, trials, mine, make_tuner(tuner, task.config_space, seed),
                                       builder, runner, writer, batch, early_stopping,
                                       lambda line, n=n: say(f"[{n}/{len(tasks)}] {line}"))
    finally:
        if writer is not None:
            writer.close()
        if own_builder:
            builder.close()     # type: ignore[union-attr]
        if own_runner:
            runner.close()      # type: ignore[union-attr]
    return results


def _tune_task(task: Task, trials: int, previous: list[Record], tuner: Tuner, builder: Builder, runner: Runner,
               writer: RecordWriter | None, batch: int, early_stopping: int | None,
               say: Callable[[str], None]) -> TuneResult:
    space = task.config_space
    measured: dict[str, tuple[ConfigEntity, MeasureResult]] = {}
    stale = 0
    for r in previous:
        try:
            c = space.from_json(r.config)
        except ConfigError:
            stale += 1       # recorded with another version of the template
            continue
        measured[c.key] = (c, MeasureResult(r.costs, r.error, r.message, r.build_s, r.run_s, r.timestamp))
    if measured:
        tuner.update([c for c, _ in measured.values()], [m for _, m in measured.values()])
    budget = min(trials, space.size)
    default = space.default_config()
    say(f"{task.name}: {space.size} configs, {len(measured)} measured before"
        + (f" ({stale} records of another template version ignored)" if stale else ""))
    best_at, start = len(measured), time.perf_counter()
    while len(measured) < budget:
        want = min(batch, budget - len(measured))
        configs = [] if default.key in measured else [default]
        if len(configs) < want and tuner.has_next():
            configs += [c for c in tuner.next_batch(want - len(configs)) if c.key not in measured and c != default]
        if not configs:
            break
        before = _best(measured)
        outcome = runner.run(builder.build([MeasureInput(task, c) for c in configs]))
        for c, m in zip(configs, outcome):
            measured[c.key] = (c, m)
            if writer is not None:
                writer.write(Record(task, c.to_json(), m.costs, m.error, m.message, m.build_s, m.run_s, m.timestamp))
        tuner.update(configs, outcome)
        if _best(measured)[0] < before[0]:
            best_at = len(measured)
        say(_progress(task, measured, budget, time.perf_counter() - start))
        if early_stopping is not None and len(measured) - best_at >= early_stopping:
            say(f"{task.name}: no better config in the last {early_stopping} trials; stopping early")
            break
    cost, config = _best(measured)
    default_cost = measured[default.key][1].cost if default.key in measured else math.inf
    errors = sum(1 for _, m in measured.values() if not m.ok)
    return TuneResult(task, config, cost, default_cost, len(measured), errors)


def _best(measured: dict) -> tuple[float, ConfigEntity | None]:
    best = (math.inf, None)
    for c, m in measured.values():
        if m.ok and m.cost < best[0]:
            best = (m.cost, c)
    return best


def _progress(task: Task, measured: dict, budget: int, elapsed: float) -> str:
    cost, _ = _best(measured)
    errors = sum(1 for _, m in measured.values() if not m.ok)
    if math.isfinite(cost):
        best = f"best {task.flops / cost / 1e9:.2f} GFLOP/s ({cost * 1e3:.4f} ms)"
    else:
        best = "no correct config yet"
    return (f"{task.name}: {len(measured)}/{budget} trials, {best}, {errors} error"
            f"{'s' if errors != 1 else ''}, {elapsed:.1f} s")
