"""The cost model protocol: predicting which configs of a task run fastest, without running them
(the paper's section 5.2; the `configs -> predicted ranking` arrow of autotune/).

Only the protocol lives here so far.  The plan (issue 5):

- `features.py` turns a candidate's lowered loop program (`task.build_candidate(task, config)`)
  into a fixed-length vector: for each buffer access at each loop level, the touched elements
  and bytes, reuse ratio, stride and loop extents, plus one-hot loop annotations (vectorized,
  unrolled, parallel).  Features are computed in the builder processes, beside compilation.
- `XGBoostCostModel` (optional extra `xgboost`, imported lazily) fits gradient-boosted trees
  with a ranking objective (rank:pairwise) on (features, throughput) and is refitted as
  measurements arrive.  Only the order of predictions matters: a search keeps the top ones.
- Transfer: `fit_records` on records of other tasks of the same template warm-starts a new
  task's model.
- `search.py` (parallel simulated annealing over `ConfigSpace.mutate` moves, scored by the
  model) and a model-based tuner implementing `tuner.Tuner` use it.
"""
from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np

from .measure import MeasureResult
from .records import Record
from .space import ConfigEntity
from .task import Task


class CostModel(Protocol):
    """Predicts a relative score per config of one task: higher means faster.  Scores are only
    compared with each other (a ranking), never read as times."""

    def fit(self, task: Task, configs: Sequence[ConfigEntity], results: Sequence[MeasureResult]) -> None:
        """(Re)train on all measurements of `task` so far; failed results count as the slowest."""

    def fit_records(self, records: Sequence[Record]) -> None:
        """Warm-start from the records of other tasks (transfer learning); may be a no-op."""

    def predict(self, task: Task, configs: Sequence[ConfigEntity]) -> np.ndarray:
        """Scores of `configs` (shape (len(configs),)); must be far cheaper than measuring:
        a batch of 500 well under the time of one measurement."""
