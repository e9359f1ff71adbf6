"""Model-guided search: the `cost model -> next configs to measure` arrow of autotune/ (the
paper's section 5.3) and the model-based tuner built on it.

Planning a batch.  The cost model scores configs; the search looks for the unvisited ones
(neither measured nor proposed) with the highest scores:

- a space of at most `exhaustive_limit` points is scored whole (its features are computed
  once and cached, so later rounds cost a prediction, a few milliseconds);
- a larger space is searched by parallel simulated annealing: `n_chains` chains start from
  the best measured configs and from random points; each step moves every chain to a
  random neighbour (`ConfigSpace.mutate`: one knob changed), accepted when it scores higher,
  or else with probability exp(delta / T), T falling linearly from `temperature` to 0 (scores
  are divided by their spread first, so T does not depend on the model's scale).  Every
  unvisited point scored is a candidate; the search stops after `n_steps` steps or
  `max_points` distinct points scored (each new point is featurized, the costly part).

From the candidates, best first, `pick_batch` takes a diverse batch: a candidate joins when it
differs from every one already taken in at least `diversity` knobs, and the bar is lowered
one knob at a time when too few pass it.  Each slot is instead a uniformly random unvisited
config with probability `epsilon`, so a model that is wrong about a region still sees it.

`ModelBasedTuner` implements `tuner.Tuner`: random configs until the model has something to
rank (or from the transfer history at once), then after every `update` a refit on all of the
task's measurements and a batch planned as above.
"""
from __future__ import annotations

import heapq
import math
from random import Random
from typing import Callable, Sequence

import numpy as np

from ..te.space import ConfigEntity, ConfigSpace
from .cost_model import XGBoostCostModel
from .features import FeatureExtractor, knob_features
from .measure import MeasureResult
from .records import Record
from .task import Task
from .tuners import _TunerBase

Scorer = Callable[[Sequence[ConfigEntity]], np.ndarray]


def knob_distance(a: ConfigEntity, b: ConfigEntity) -> int:
    """Number of knobs whose values differ."""
    return sum(x != y for x, y in zip(a.indices, b.indices))


def score_space(space: ConfigSpace, scores: np.ndarray, visited: set[int], n_best: int) -> list[tuple[float, ConfigEntity]]:
    """The `n_best` unvisited points with the highest `scores` (one score per index of the
    space), best first."""
    order = np.argsort(-np.asarray(scores), kind="stable")
    out = []
    for i in order:
        if int(i) not in visited:
            out.append((float(scores[i]), space.get(int(i))))
            if len(out) >= n_best:
                break
    return out


def simulated_annealing(space: ConfigSpace, score: Scorer, visited: set[int], n_best: int, rng: Random,
                        starts: Sequence[ConfigEntity] = (), n_chains: int = 8, n_steps: int = 100,
                        max_points: int = 128, temperature: float = 1.0) -> list[tuple[float, ConfigEntity]]:
    """Parallel simulated annealing (see the module docstring); returns up to `n_best`
    (score, config) pairs of distinct unvisited configs, best first."""
    chains = list({c.index: c for c in starts}.values())[:n_chains]
    tries = 0
    while len(chains) < n_chains and tries < 4 * n_chains:
        c = space.random(rng)
        tries += 1
        if all(c.index != x.index for x in chains):
            chains.append(c)
    memo: dict[int, float] = {}
    configs: dict[int, ConfigEntity] = {}

    def scored(batch: list[ConfigEntity]) -> list[float]:
        new = list({c.index: c for c in batch if c.index not in memo}.values())
        if new:
            for c, s in zip(new, score(new)):
                memo[c.index] = float(s)
                configs[c.index] = c
        return [memo[c.index] for c in batch]

    current = scored(chains)
    spread = float(np.std(current)) or 1.0
    for step in range(n_steps):
        t = temperature * (1.0 - step / n_steps)
        moves = [space.mutate(c, rng) for c in chains]
        if len(memo) + len({m.index for m in moves if m.index not in memo}) > max_points:
            break
        proposed = scored(moves)
        for k, (old, new) in enumerate(zip(current, proposed)):
            delta = (new - old) / spread
            if delta >= 0 or (t > 0 and rng.random() < math.exp(max(delta / t, -50.0))):
                chains[k], current[k] = moves[k], new
    best = heapq.nlargest(n_best, ((s, i) for i, s in memo.items() if i not in visited))
    return [(s, configs[i]) for s, i in best]


def pick_batch(candidates: Sequence[tuple[float, ConfigEntity]], n: int, rng: Random, epsilon: float = 0.05,
               diversity: int = 2, random_config: Callable[[], ConfigEntity | None] | None = None) -> list[ConfigEntity]:
    """Up to `n` distinct configs: the best candidates that differ from each other in at least
    `diversity` knobs (fewer when too few do), each slot replaced with probability `epsilon`
    by `random_config()` (a random unvisited config, or None)."""
    n_random = sum(rng.random() < epsilon for _ in range(n)) if random_config is not None else 0
    want = n - n_random
    picked: list[ConfigEntity] = []
    taken: set[int] = set()
    for bar in range(max(diversity, 1), 0, -1):
        for _, c in candidates:
            if len(picked) >= want:
                break
            if c.index not in taken and all(knob_distance(c, p) >= bar for p in picked):
                picked.append(c)
                taken.add(c.index)
        if len(picked) >= want:
            break
    for _ in range(8 * n if random_config is not None else 0):     # bounded: a nearly used-up space
        if len(picked) >= n:
            break
        c = random_config()
        if c is None:
            break
        if c.index not in taken:
            picked.append(c)
            taken.add(c.index)
    return picked


class ModelBasedTuner(_TunerBase):
    """A tuner that measures what a cost model (XGBoostCostModel by default) predicts to be
    fastest (see the module docstring).

    task: the task whose space this is; needed for loop-program features.  Without it the
    model reads `knob_features` (the knob values themselves), which need no lowering but do
    not transfer between tasks.  features: "loop" or "knob" (default: "loop" with a task).
    transfer: records of other tasks of the same template to learn from before the first
    measurement (more can come through `transfer`).  plan_size: candidates kept from the
    search for picking a batch (at least 4 times the batch).  n_parallel: processes that
    featurize large batches (default: half the CPUs).

    The defaults bound the featurizing, the costly part (it lowers each config): a space of up
    to 1024 points is featurized once, whole; a larger one by annealing that scores at most 128
    points a round, which featurizes a fraction of a large space and still finds its best
    points (tests/autotune/test_search.py)."""

    def __init__(self, space: ConfigSpace, seed: int = 0, *, task: Task | None = None, model=None,
                 features: str | None = None, transfer: Sequence[Record] | None = None, epsilon: float = 0.05,
                 diversity: int = 2, exhaustive_limit: int = 1024, n_chains: int = 8, n_steps: int = 100,
                 max_points: int = 128, plan_size: int = 64, n_parallel: int | None = None):
        super().__init__(space, seed)
        features = features or ("loop" if task is not None else "knob")
        if features not in ("loop", "knob"):
            raise ValueError(f"ModelBasedTuner features must be 'loop' or 'knob', got {features!r}")
        if features == "loop" and task is None:
            raise ValueError("loop-program features need the task: ModelBasedTuner(space, task=task)")
        if task is not None and [(k, len(v)) for k, v in task.config_space.knobs.items()] != \
                [(k, len(v)) for k, v in space.knobs.items()]:
            raise ValueError(f"the space is not the task's: {space} vs {task.config_space}")
        self.task, self.features = task, features
        self.epsilon, self.diversity, self.exhaustive_limit = epsilon, diversity, exhaustive_limit
        self.n_chains, self.n_steps, self.max_points, self.plan_size = n_chains, n_steps, max_points, plan_size
        if features == "loop":
            featurizer = FeatureExtractor(n_parallel)     # processes only while a large batch runs
        else:
            featurizer = lambda task_, configs: knob_features(space, configs)   # noqa: E731
        self.model = model if model is not None else XGBoostCostModel(featurizer, seed=seed)
        self.measured: dict[int, tuple[ConfigEntity, MeasureResult]] = {}
        self._everything: list[ConfigEntity] | None = None     # the whole space, when it is scored whole
        if transfer:
            self.transfer(transfer)

    # learning -----------------------------------------------------------------------------
    def transfer(self, records: Sequence[Record]) -> int:
        """Learn from records of other tasks of the same template; returns how many were used."""
        if self.task is None or self.features != "loop":
            return 0
        mine = [r for r in records if r.task.template == self.task.template and r.task.key != self.task.key]
        if mine:
            self.model.fit_records(mine)
        return len(mine)

    def update(self, configs: Sequence[ConfigEntity], results: Sequence[MeasureResult]) -> None:
        super().update(configs, results)
        for c, r in zip(configs, results):
            self.measured[c.index] = (c, r)
        if not configs:
            return
        items = list(self.measured.values())
        self.model.fit(self.task, [c for c, _ in items], [r for _, r in items])

    # planning -----------------------------------------------------------------------------
    def next_batch(self, n: int) -> list[ConfigEntity]:
        out: list[ConfigEntity] = []
        if n > 0 and self.model.fitted and self.has_next():
            out = pick_batch(self._candidates(max(self.plan_size, 4 * n)), n, self.rng, self.epsilon,
                             self.diversity, self._random_unvisited)
            self.visited.update(c.index for c in out)
        return self._fill_random(out, n)

    def predicted_scores(self, configs: Sequence[ConfigEntity]) -> list[float | None]:
        """The model's scores of `configs` (None each before the model is fit); the tuning loop
        correlates them with what was measured."""
        if not self.model.fitted:
            return [None] * len(configs)
        return [float(s) for s in self._score(configs)]

    def _score(self, configs: Sequence[ConfigEntity]) -> np.ndarray:
        return self.model.predict(self.task, configs)

    def _candidates(self, k: int) -> list[tuple[float, ConfigEntity]]:
        if self.space.size <= self.exhaustive_limit:
            if self._everything is None:
                self._everything = list(self.space)        # featurized on the first call, then cached
            return score_space(self.space, self._score(self._everything), self.visited, k)
        ranked = sorted((r.cost, c.index, c) for c, r in self.measured.values() if r.ok)
        starts = [c for _, _, c in ranked[:max(1, self.n_chains // 2)]]
        return simulated_annealing(self.space, self._score, self.visited, k, self.rng, starts, self.n_chains,
                                   self.n_steps, self.max_points)
