"""Wall-clock medians for side-by-side measurements (benchmarks, the demo)."""
from __future__ import annotations

import statistics
import time
from typing import Callable


def median_seconds(fn: Callable[[], object], repeat: int = 10, warmup: int = 1,
                   warmup_s: float = 0.0) -> float:
    """Median wall time of `repeat` calls of `fn`, after `warmup` untimed calls and, with
    `warmup_s`, untimed calls for at least that many seconds (lets a peer's thread pool that is
    still spinning from its own runs go quiet before the timing starts)."""
    for _ in range(warmup):
        fn()
    end = time.perf_counter() + warmup_s
    while time.perf_counter() < end:
        fn()
    times = []
    for _ in range(max(1, repeat)):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
