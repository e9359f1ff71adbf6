"""Tuners: the search strategies of the `space -> best config` arrow.

A tuner proposes configs of one task's space and learns from their results; it implements
the `Tuner` protocol (`next_batch(n)`, `update(configs, results)`, `has_next()`).  Here:
random search, grid search (index order), a genetic algorithm, and the model-based tuner
("xgb": simulated annealing over a learned cost model, search.py).  The tuning loop that
drives them, measures and keeps records is tuner.py.
"""
from __future__ import annotations

import random
from typing import Callable, Protocol, Sequence

from ..te.space import ConfigEntity, ConfigSpace
from .measure import MeasureResult
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


    def _fill_random(self, out: list[ConfigEntity], n: int) -> list[ConfigEntity]:
        """`out` topped up to `n` configs with random unvisited ones (marked visited)."""
        while len(out) < n:
            c = self._random_unvisited()
            if c is None:
                break
            self.visited.add(c.index)
            out.append(c)
        return out


class RandomTuner(_TunerBase):
    """Configs drawn uniformly at random, without repetition."""

    def next_batch(self, n: int) -> list[ConfigEntity]:
        return self._fill_random([], n)


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


def _model_based(space: ConfigSpace, seed: int = 0, task: Task | None = None) -> Tuner:
    """Simulated annealing over a learned cost model (search.py), imported on first use: it
    needs xgboost."""
    from .search import ModelBasedTuner
    return ModelBasedTuner(space, seed, task=task)


_model_based.takes_task = True      # type: ignore[attr-defined]

TUNERS: dict[str, Callable[..., Tuner]] = {"random": RandomTuner, "grid": GridTuner, "ga": GATuner,
                                           "xgb": _model_based}


def make_tuner(kind: str, space: ConfigSpace, seed: int = 0, task: Task | None = None) -> Tuner:
    """The tuner `kind` over `space`; `task` goes to the tuners that read the loop program."""
    factory = TUNERS.get(kind)
    if factory is None:
        raise ValueError(f"unknown tuner {kind!r}; available: {', '.join(TUNERS)}")
    if task is not None and getattr(factory, "takes_task", False):
        return factory(space, seed=seed, task=task)
    return factory(space, seed=seed)
