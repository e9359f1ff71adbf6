"""median_seconds: the calls it times."""
from __future__ import annotations

import time

from tensorforge.testing.timing import MAX_BLOCK_CALLS, median_seconds


def _counting(pause: float = 0.0):
    calls = []

    def fn() -> None:
        calls.append(time.perf_counter())
        if pause:
            time.sleep(pause)
    return fn, calls


def test_repeat_calls_after_the_warm_up():
    fn, calls = _counting()
    assert median_seconds(fn, repeat=5, warmup=2) >= 0
    assert len(calls) == 7


def test_a_minimum_block_times_the_calls_that_fill_it():
    """A fast call is timed as often as fills min_block_s at the warm-up's pace (at most
    MAX_BLOCK_CALLS times); a slow one keeps `repeat`."""
    fast, calls = _counting()
    median_seconds(fast, repeat=3, warmup=0, warmup_s=0.01, min_block_s=0.01)
    warm = sum(1 for t in calls if t < calls[0] + 0.01)
    assert len(calls) - warm > 3 and len(calls) - warm <= MAX_BLOCK_CALLS + 1
    slow, calls = _counting(pause=0.004)
    median_seconds(slow, repeat=3, warmup=0, min_block_s=0.004)
    assert len(calls) == 1 + 3         # the call that measured the pace, then `repeat`
