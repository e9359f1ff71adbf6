"""Reading a record file back: per-task summaries (`tensorforge inspect --records`) and
best-so-far curves (`tensorforge tune --plot`, benchmarks/tuning_curves.py).

Records are in the order they were measured, so a task's tuning records (stage "tune"), in
file order, are its trials; the curve is the best throughput over the first n of them.
Confirmation records (side by side, or in the model) are counted apart: their times are taken
differently (in the model a kernel's inputs and weights are not hot), and the config they pick
is the one `compile` applies, shown per task as "applied".

A task's speedup is `speedup(default time, best time)` with both times from one stage: the
confirmation that picked the applied config, when there is one (its times were taken side by
side, at one moment), else the tuning trials.  `tensorforge tune`'s closing summary and
`tensorforge inspect --records` both read it from a TaskSummary, so they agree on a file.
"""
from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from ..errors import MissingDependencyError
from ..te.space import config_key, format_config
from .records import Record, _records


@dataclass
class TaskSummary:
    task: object
    trials: int = 0
    errors: Counter = field(default_factory=Counter)
    best: Record | None = None
    default: Record | None = None
    curve: list = field(default_factory=list)      # best-so-far GFLOP/s after each trial
    first: float = math.inf                          # timestamps of the first and last record
    last: float = 0.0
    default_json: dict | None = None                 # the template's default config, when known
    confirmations: Counter = field(default_factory=Counter)   # stage -> records of confirmations
    applied: Record | None = None                    # what compile applies (records.best_configs)

    stage_costs: dict = field(default_factory=dict)  # (stage, config key) -> fastest time (inf: no correct run)

    @property
    def best_gflops(self) -> float:
        return self.task.flops / self.best.cost / 1e9 if self.best is not None else 0.0

    @property
    def compared_stage(self) -> str:
        """The stage whose times the default and best columns compare: the confirmation that
        picked the applied config when it also timed the default, else "tune"."""
        a = self.applied
        if a is not None and a.stage != "tune" and self.default_json is not None \
                and math.isfinite(self.stage_costs.get((a.stage, config_key(self.default_json)), math.inf)):
            return a.stage
        return "tune"

    @property
    def default_cost(self) -> float:
        """Seconds of the template's default config (infinity when it has no correct run)."""
        if self.default_json is None:
            return math.inf
        return self.stage_costs.get((self.compared_stage, config_key(self.default_json)), math.inf)

    @property
    def best_cost(self) -> float:
        """Seconds of the best config: the applied one's, in the compared stage."""
        stage = self.compared_stage
        if stage != "tune":
            return self.stage_costs.get((stage, config_key(self.applied.config)), math.inf)
        return self.best.cost if self.best is not None else math.inf

    @property
    def speedup(self) -> float | None:
        return speedup(self.default_cost, self.best_cost)


def speedup(default_cost: float, best_cost: float) -> float | None:
    """How many times faster the best config runs than the default (None when either has no
    correct run).  The one definition that every report of a speedup uses."""
    if not (math.isfinite(default_cost) and math.isfinite(best_cost)) or best_cost <= 0:
        return None
    return default_cost / best_cost


def format_speedup(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def summarize(source: str | os.PathLike | Iterable[Record]) -> list[TaskSummary]:
    """One summary per task, in order of first appearance."""
    from .records import best_configs

    records = list(_records(source))
    out: dict[str, TaskSummary] = {}
    for r in records:
        s = out.get(r.task.key)
        if s is None:
            s = out[r.task.key] = TaskSummary(r.task, default_json=_default_json(r.task))
        if r.timestamp:
            s.first, s.last = min(s.first, r.timestamp), max(s.last, r.timestamp)
        slot = (r.stage, config_key(r.config))
        s.stage_costs[slot] = min(s.stage_costs.get(slot, math.inf), r.cost)
        if r.stage != "tune":
            s.confirmations[r.stage] += 1
            continue
        s.trials += 1
        if not r.ok:
            s.errors[r.error] += 1
        elif s.best is None or r.cost < s.best.cost:
            s.best = r
        if s.default is None and r.config == s.default_json:
            s.default = r
        s.curve.append(s.best_gflops)
    for key, r in best_configs(records).items():
        out[key].applied = r
    return list(out.values())


def _default_json(task) -> dict | None:
    try:
        return task.config_space.default_config().to_json()
    except Exception:          # a template that is gone or changed: no default to compare with
        return None


def format_summary(summaries: Sequence[TaskSummary]) -> str:
    lines = [f"{'task':60s} {'x':>3s} {'trials':>6s} {'errors':>14s} {'default':>10s} {'best':>10s} "
             f"{'GFLOP/s':>8s} {'speedup':>7s} {'wall':>7s}"]
    for s in summaries:
        err = ", ".join(f"{n} {k}" for k, n in s.errors.most_common()) or "0"
        d = f"{s.default_cost * 1e3:.4f}ms" if math.isfinite(s.default_cost) else "-"
        b = f"{s.best_cost * 1e3:.4f}ms" if math.isfinite(s.best_cost) else "-"
        sp = format_speedup(s.speedup)
        wall = f"{s.last - s.first:.0f}s" if s.last >= s.first else "-"
        lines.append(f"{s.task.name[:60]:60s} {s.task.occurrences:>3d} {s.trials:>6d} {err:>14s} {d:>10s} {b:>10s} "
                     f"{_gflops(s.task, s.best_cost):>8.1f} {sp:>7s} {wall:>7s}")
    if any(s.compared_stage != "tune" for s in summaries):
        lines.append("(default and best of a confirmed task: its times in the confirmation that picked the "
                     "config compile applies)")
    for s in summaries:
        if s.best is not None:
            lines.append(f"best config of {s.task.name}: {format_config(s.best.config)}")
        a = s.applied
        if a is not None and (s.best is None or a.config != s.best.config):
            how = {"confirm": "confirmed side by side", "model": "confirmed in the model"}.get(a.stage, a.stage)
            default = " (the default)" if a.config == s.default_json else ""
            lines.append(f"  applied by compile ({how}, {sum(s.confirmations.values())} confirmation "
                         f"records){default}: {format_config(a.config)}")
    return "\n".join(lines)


def _gflops(task, seconds: float) -> float:
    return task.flops / seconds / 1e9 if math.isfinite(seconds) and seconds > 0 else 0.0


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise MissingDependencyError('drawing curves needs matplotlib: pip install "tensorforge[plot]"') from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_curves(source: str | os.PathLike | Iterable[Record], path: str | os.PathLike, title: str = "") -> str:
    """Best-so-far GFLOP/s against measured trials, one line per task, saved as an image."""
    plt = _pyplot()
    summaries = summarize(source)
    if not summaries:
        raise ValueError("no records to plot")
    fig, ax = plt.subplots(figsize=(8, 5))
    for s in summaries:
        ax.plot(range(1, len(s.curve) + 1), s.curve, label=s.task.name[:50])
    ax.set_xlabel("measured trials")
    ax.set_ylabel("best GFLOP/s so far")
    ax.set_title(title or "tuning curves")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)
