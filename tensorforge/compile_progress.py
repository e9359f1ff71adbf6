"""Progress of a long compile: one line on stderr, redrawn in place, while the kernels the
lowering cache lacks are lowered and then while the C compiler builds them.

A cold compile of a large model takes seconds (GoogLeNet: 13 s on 2 cores, most of it lowering
68 kernels and compiling their C), a warm one a fraction of a second.  `compile(progress=...)`:

  None (the default)  the line appears when stderr is a terminal and at least SHOW_FROM kernels
                      are missing (a warm compile, a small model or a log file see nothing);
  True                the line appears whenever a kernel is missing, terminal or not;
  False               nothing;
  a callable          receives each text instead ("lowering 12/68 kernels", "compiling C: 68
                      kernels", "done"), for a caller with its own display.

Updates come from the compiling thread and the threads that talk to lowering workers
(parallel_lowering.py), so the count is kept under a lock; the terminal line is redrawn at most
every REDRAW_S seconds.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import Callable

SHOW_FROM = 12       # missing kernels from which a terminal shows the line by default
REDRAW_S = 0.1
_WIDTH = 30


class CompileProgress:
    """Counts kernels lowered out of `total` and reports through `emit(text)`."""

    def __init__(self, total: int, emit: Callable[[str], None], bar: bool):
        self.total, self.emit, self.bar = total, emit, bar
        self.done = 0
        self._lock = threading.Lock()
        self._drawn = 0.0
        self._report(f"lowering 0/{total} kernels", force=True)

    def lowered(self) -> None:
        """One more kernel lowered (thread-safe)."""
        with self._lock:
            self.done = min(self.total, self.done + 1)
            self._report(f"lowering {self.done}/{self.total} kernels", force=self.done == self.total)

    def compiling(self, kernels: int) -> None:
        with self._lock:
            self._report(f"compiling C: {kernels} kernels", force=True)

    def close(self) -> None:
        with self._lock:
            if self.bar:
                sys.stderr.write("\n")
                sys.stderr.flush()
            else:
                self.emit("done")

    def _report(self, text: str, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._drawn < REDRAW_S:
            return
        self._drawn = now
        if not self.bar:
            self.emit(text)
            return
        filled = _WIDTH * self.done // max(1, self.total)
        sys.stderr.write(f"\rcompiling [{'#' * filled}{'.' * (_WIDTH - filled)}] {text:<32}")
        sys.stderr.flush()


def start(progress, missing: int) -> CompileProgress | None:
    """The progress of a compile that will lower `missing` kernels, as `progress` asks for
    (module docstring); None when nothing is to be shown."""
    if progress is False or missing == 0:
        return None
    if callable(progress) and progress is not True:
        return CompileProgress(missing, progress, bar=False)
    if progress is None and not (missing >= SHOW_FROM and _stderr_is_terminal()):
        return None
    return CompileProgress(missing, lambda text: None, bar=True)


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False
