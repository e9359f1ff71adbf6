"""Wall-clock medians for side-by-side measurements (benchmarks, the demo)."""
from __future__ import annotations

import statistics
import time
from typing import Callable

# the most calls `min_block_s` adds to a block
MAX_BLOCK_CALLS = 1000


def median_seconds(fn: Callable[[], object], repeat: int = 10, warmup: int = 1,
                   warmup_s: float = 0.0, min_block_s: float = 0.0) -> float:
    """Median wall time of `repeat` calls of `fn`, after `warmup` untimed calls and, with
    `warmup_s`, untimed calls for at least that many seconds (lets a peer's thread pool that is
    still spinning from its own runs go quiet before the timing starts).  With `min_block_s`,
    at least as many calls as fill that many seconds at the warm-up's pace (at most
    MAX_BLOCK_CALLS): a model of 0.1 ms timed in 3 calls saw a moment of the machine, not its
    speed."""
    for _ in range(warmup):
        fn()
    start = time.perf_counter()
    end, calls = start + warmup_s, 0
    while time.perf_counter() < end:
        fn()
        calls += 1
    if min_block_s > 0:
        if calls == 0:
            t = time.perf_counter()
            fn()
            calls, start = 1, t
        pace = (time.perf_counter() - start) / calls
        repeat = max(repeat, min(MAX_BLOCK_CALLS, int(min_block_s / max(pace, 1e-9))))
    times = []
    for _ in range(max(1, repeat)):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
