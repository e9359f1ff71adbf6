"""Reading a record file back: per-task summaries (`tensorforge inspect --records`) and
best-so-far curves (`tensorforge tune --plot`, benchmarks/tuning_curves.py).

Records are in the order they were measured, so a task's tuning records (stage "tune"), in
file order, are its trials; the curve is the best throughput over the first n of them.
Confirmation records (side by side, or in the model) are counted apart: their times are taken
differently (in the model a kernel's inputs and weights are not hot), and the config they pick
is the one `compile` applies, shown per task as "applied".
"""
from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

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

    @property
    def best_gflops(self) -> float:
        return self.task.flops / self.best.cost / 1e9 if self.best is not None else 0.0

    @property
    def speedup(self) -> float | None:
        if self.best is None or self.default is None or not self.default.ok:
            return None
        return self.default.cost / self.best.cost


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
        d = f"{s.default.cost * 1e3:.4f}ms" if s.default is not None and s.default.ok else "-"
        b = f"{s.best.cost * 1e3:.4f}ms" if s.best is not None else "-"
        sp = f"{s.speedup:.2f}x" if s.speedup is not None else "-"
        wall = f"{s.last - s.first:.0f}s" if s.last >= s.first else "-"
        lines.append(f"{s.task.name[:60]:60s} {s.task.occurrences:>3d} {s.trials:>6d} {err:>14s} {d:>10s} {b:>10s} "
                     f"{s.best_gflops:>8.1f} {sp:>7s} {wall:>7s}")
    for s in summaries:
        if s.best is not None:
            lines.append(f"best config of {s.task.name}: {s.best.config}")
        a = s.applied
        if a is not None and (s.best is None or a.config != s.best.config):
            how = {"confirm": "confirmed side by side", "model": "confirmed in the model"}.get(a.stage, a.stage)
            default = " (the default)" if a.config == s.default_json else ""
            lines.append(f"  applied by compile ({how}, {sum(s.confirmations.values())} confirmation "
                         f"records){default}: {a.config}")
    return "\n".join(lines)


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise ImportError('drawing curves needs matplotlib: pip install "tensorforge[plot]"') from None
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
