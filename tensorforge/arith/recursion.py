"""Room for deep recursion: the arith algorithms recurse over expression trees, and a chain of a
few thousand additions is deeper than Python's default limit of 1000 frames."""
from __future__ import annotations

import contextlib
import sys
from typing import Iterator

_NEEDED = 50_000


@contextlib.contextmanager
def deep_recursion(limit: int = _NEEDED) -> Iterator[None]:
    """Raise the interpreter's recursion limit to at least `limit` for the duration."""
    old = sys.getrecursionlimit()
    if old >= limit:
        yield
        return
    sys.setrecursionlimit(limit)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)
