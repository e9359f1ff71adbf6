"""The learned cost model: predicting which configs of a task run fastest, without running
them (the paper's section 5.2; the `configs -> predicted ranking` arrow of autotune/).

`CostModel` is the protocol; `XGBoostCostModel` implements it with gradient-boosted trees
(xgboost, the optional extra `tensorforge[tune]`, imported when a model is made) over the
loop-program features of features.py.

Training data.  Each measured config of a task is one row: its feature vector and its
normalized throughput, best cost / cost in (0, 1] (a failed config counts 0).  Only the order
matters, so the trees fit a ranking objective (`rank:pairwise`: pairs of configs of one task
whose labels differ, the faster one to score higher) and a prediction is a score, never a
time.  A task is one ranking group: rows of different tasks are never compared, which is what
lets records of other tasks help.

Transfer.  `fit_records(records)` keeps the records of other tasks (of the same template, so
that the feature layout means the same thing) as extra groups, normalized within each task.
Every fit trains on the current task's group plus those, each transfer group weighted
`transfer_weight` times the current task's group at most (a large history does not drown the
task being tuned); before the task has any measurement the model is fit on the history alone,
so the first planned batch already follows it.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Protocol, Sequence

import numpy as np

from ..te.space import ConfigEntity, ConfigError
from .features import FeatureExtractor, Featurizer
from .measure import MeasureResult
from .records import Record
from .task import Task


class CostModel(Protocol):
    """Predicts a relative score per config of one task: higher means faster.  Scores are only
    compared with each other (a ranking), never read as times."""

    @property
    def fitted(self) -> bool:
        """Whether the scores mean anything yet (a tuner proposes random configs until then)."""

    def fit(self, task: Task | None, configs: Sequence[ConfigEntity], results: Sequence[MeasureResult]) -> None:
        """(Re)train on all measurements of `task` so far; failed results count as the slowest."""

    def fit_records(self, records: Sequence[Record]) -> None:
        """Warm-start from the records of other tasks (transfer learning); may be a no-op."""

    def predict(self, task: Task, configs: Sequence[ConfigEntity]) -> np.ndarray:
        """Scores of `configs` (shape (len(configs),)); must be far cheaper than measuring:
        a batch of 500 well under the time of one measurement."""


def import_xgboost():
    """The xgboost module, or an ImportError that names the extra to install."""
    try:
        import xgboost
    except ImportError:
        from ..errors import MissingDependencyError
        raise MissingDependencyError('the XGBoost cost model (tuner "xgb") needs xgboost: '
                          'pip install "tensorforge[tune]" (or: pip install xgboost-cpu)') from None
    return xgboost


def normalized_throughput(costs: Sequence[float]) -> np.ndarray:
    """best cost / cost per entry (0 for a failure: an infinite or non-positive cost)."""
    c = np.asarray(costs, np.float64)
    ok = np.isfinite(c) & (c > 0)
    out = np.zeros(len(c))
    if ok.any():
        out[ok] = c[ok].min() / c[ok]
    return out


DEFAULT_PARAMS = {
    "objective": "rank:pairwise",
    "max_depth": 6,
    "eta": 0.3,
    "min_child_weight": 1,
    "gamma": 1e-4,
    "subsample": 1.0,
    "lambda": 1.0,
    "tree_method": "hist",
    "max_bin": 64,          # few distinct values per feature; fewer bins train faster
    "verbosity": 0,
}


class XGBoostCostModel:
    """Gradient-boosted trees (rank:pairwise) on loop-program features.

    featurizer: (task, configs) -> feature matrix (default: a `FeatureExtractor`, loop-program
    features, cached; or `knob_features`).  num_rounds: boosting rounds per fit.  transfer_weight: the most a transfer group weighs relative to the current
    task's group.  nthread: xgboost's threads (default: 1, cheap for a few hundred rows and
    fair to measurements running beside it)."""

    def __init__(self, featurizer: Featurizer | None = None, *, num_rounds: int = 64,
                 params: dict | None = None, transfer_weight: float = 0.5, seed: int = 0,
                 nthread: int = 1):
        self.xgb = import_xgboost()
        self.featurizer = featurizer or FeatureExtractor()
        self.num_rounds = num_rounds
        self.params = {**DEFAULT_PARAMS, "seed": seed, "nthread": nthread, **(params or {})}
        self.transfer_weight = transfer_weight
        self.booster = None
        # task key -> (features, labels) of the transfer history
        self._history: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()

    @property
    def fitted(self) -> bool:
        return self.booster is not None

    # training -----------------------------------------------------------------------------
    def fit(self, task: Task | None, configs: Sequence[ConfigEntity], results: Sequence[MeasureResult]) -> None:
        """Train on `task`'s measurements (all of them so far) plus the transfer history.
        With nothing to rank (fewer than two distinct throughputs anywhere) the model is left
        as it was."""
        if len(configs) != len(results):
            raise ValueError(f"fit: {len(configs)} configs but {len(results)} results")
        own = None
        if configs:
            x = self.featurizer(task, list(configs))
            y = normalized_throughput([r.cost for r in results])
            own = (x, y)
        self._train(own, exclude=getattr(task, "key", None))     # no task: knob features

    def fit_records(self, records: Sequence[Record]) -> None:
        """Add the records (of other tasks) to the transfer history, one group per task, and
        retrain on the history when nothing of the current task was fit yet."""
        by_task: dict[str, list[Record]] = {}
        tasks: dict[str, Task] = {}
        for r in records:
            by_task.setdefault(r.task.key, []).append(r)
            tasks[r.task.key] = r.task
        for key, recs in by_task.items():
            try:
                space = tasks[key].config_space
            except (KeyError, ValueError):      # a template this process does not know
                continue
            configs, costs = [], []
            for r in recs:
                try:
                    configs.append(space.from_json(r.config))
                except ConfigError:             # recorded with another version of the template
                    continue
                costs.append(r.cost)
            if len(configs) < 2:
                continue
            self._history[key] = (self.featurizer(tasks[key], configs), normalized_throughput(costs))
        if self.booster is None:
            self._train(None, exclude=None)

    def _train(self, own: tuple | None, exclude: str | None) -> None:
        groups = [] if own is None else [(own[0], own[1], 1.0)]
        n_own = 0 if own is None else len(own[1])
        for key, (x, y) in self._history.items():
            if key == exclude:
                continue
            weight = self.transfer_weight * (min(1.0, max(n_own, 1) / len(y)) if n_own else 1.0)
            groups.append((x, y, weight))
        groups = [g for g in groups if len(np.unique(g[1])) > 1]      # a group must have something to rank
        if not groups:
            return
        dmat = self.xgb.DMatrix(np.concatenate([g[0] for g in groups]), label=np.concatenate([g[1] for g in groups]))
        dmat.set_group([len(g[1]) for g in groups])
        dmat.set_weight(np.array([g[2] for g in groups], np.float32))     # per group for ranking
        self.booster = self.xgb.train(self.params, dmat, num_boost_round=self.num_rounds)

    # prediction ---------------------------------------------------------------------------
    def predict(self, task: Task, configs: Sequence[ConfigEntity]) -> np.ndarray:
        """Scores of `configs` (higher: predicted faster); zeros before the first fit."""
        if not configs:
            return np.zeros(0)
        return self.predict_features(self.featurizer(task, list(configs)))

    def predict_features(self, x: np.ndarray) -> np.ndarray:
        if self.booster is None:
            return np.zeros(len(x))
        return np.asarray(self.booster.inplace_predict(x), np.float64)

