"""Progress of a tuning run on the terminal: a live table per task with `rich` when the terminal
is interactive, otherwise (or without rich) one line per round, which is also what a log
callable receives.  Progress goes to stderr, all of it, so a program's output on stdout (a
summary, a table) stays apart from it.

A reporter gets `start(states, clock)`, `round(state)` after every measured batch, `note(text)`
and `stop()`.  States are tuner._TaskState objects: trials, budget, best, default_cost,
errors, stopped, correlation (predicted vs measured ranking of the last batch).
"""
from __future__ import annotations

import math
import sys
from typing import Callable

from .report import format_speedup, speedup


def make_reporter(log, live: bool | None):
    if log is None or log is False:
        return LineReporter(lambda line: None)
    if callable(log) and log is not True:
        return LineReporter(log)
    if live is None:
        live = sys.stderr.isatty()
    if live:
        try:
            return LiveReporter()
        except ImportError:
            pass
    return LineReporter(_printer())


def _printer() -> Callable[[str], None]:
    """Plain lines: through rich when it is installed (it wraps long lines sensibly), else print()."""
    try:
        from rich.console import Console
    except ImportError:
        return lambda line: print(line, file=sys.stderr, flush=True)
    console = Console(highlight=False, soft_wrap=True, stderr=True)
    return lambda line: console.print(line, markup=False)


def _best_text(state) -> str:
    cost, _ = state.best
    if not math.isfinite(cost):
        return "no correct config yet"
    return f"best {state.task.flops / cost / 1e9:.2f} GFLOP/s ({cost * 1e3:.4f} ms)"


def _left_text(clock) -> str:
    parts = []
    if clock.left is not None:
        parts.append(f"{clock.left:.0f} s left")
    if clock.trials is not None:
        parts.append(f"{max(0, clock.trials_left())} trials left")
    return ", ".join(parts)


class LineReporter:
    def __init__(self, say: Callable[[str], None]):
        self.say = say
        self.index: dict = {}
        self.clock = None

    def start(self, states, clock) -> None:
        self.clock = clock
        for k, s in enumerate(states, 1):
            self.index[s.task.key] = f"[{k}/{len(states)}]"
            self.say(f"{self.index[s.task.key]} {s.task.name}: {s.task.config_space.size} configs, "
                     f"{s.before} measured before"
                     + (f" ({s.stale} records of another template version ignored)" if s.stale else ""))

    def round(self, s) -> None:
        tag = self.index[s.task.key]
        errors = s.errors
        line = (f"{tag} {s.task.name}: {s.trials}/{s.budget} trials, {_best_text(s)}, {errors} error"
                f"{'s' if errors != 1 else ''}, {s.seconds:.1f} s")
        if s.correlation is not None:
            line += f", predicted~measured rank corr {s.correlation:+.2f}"
        left = _left_text(self.clock)
        self.say(line + (f" | {left}" if left else ""))
        if s.stopped and s.stopped.startswith("no better"):
            self.say(f"{tag} {s.task.name}: {s.stopped}; stopping early")

    def note(self, text: str) -> None:
        self.say(text)

    def stop(self) -> None:
        pass


class LiveReporter:
    """A rich table redrawn after every round, printed once more at the end."""

    def __init__(self):
        from rich.console import Console
        from rich.live import Live

        self.console = Console(stderr=True)
        self.live = Live(console=self.console, refresh_per_second=4, transient=False)
        self.states, self.clock, self.notes = [], None, []

    def start(self, states, clock) -> None:
        self.states, self.clock = states, clock
        self.live.start()
        self.live.update(self._table())

    def round(self, s) -> None:
        self.live.update(self._table())

    def note(self, text: str) -> None:
        self.notes.append(text)
        self.live.update(self._table())

    def stop(self) -> None:
        self.live.update(self._table())
        self.live.stop()

    def _table(self):
        from rich.table import Table

        t = Table(title="tuning", caption=self._caption(), caption_justify="left")
        for col in ("task", "x", "trials", "err", "default ms", "best ms", "GFLOP/s", "speedup", "pred~meas",
                    "state"):
            t.add_column(col, justify="left" if col in ("task", "state") else "right")
        for s in self.states:
            cost, _ = s.best
            ok = math.isfinite(cost)
            d = s.default_cost
            t.add_row(s.task.name, str(s.task.occurrences), f"{s.trials}/{s.budget}", str(s.errors),
                      f"{d * 1e3:.4f}" if math.isfinite(d) else "-",
                      f"{cost * 1e3:.4f}" if ok else "-",
                      f"{s.task.flops / cost / 1e9:.1f}" if ok else "-",
                      format_speedup(speedup(d, cost)),
                      f"{s.correlation:+.2f}" if s.correlation is not None else "-",
                      "done" if s.trials >= s.budget else (s.stopped or "tuning"))
        return t

    def _caption(self) -> str:
        total = sum(s.task.occurrences * s.best[0] for s in self.states)
        default = sum(s.task.occurrences * s.default_cost for s in self.states)
        parts = [f"{self.clock.elapsed:.0f} s elapsed", f"{self.clock.used} trials this run"]
        left = _left_text(self.clock)
        if left:
            parts.append(left)
        if math.isfinite(total) and math.isfinite(default):
            parts.append(f"tuned kernels {default * 1e3:.3f} -> {total * 1e3:.3f} ms per run")
        return " | ".join(parts + self.notes[-2:])
