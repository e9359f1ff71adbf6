"""Room for deep recursion: the arith algorithms recurse over expression trees, and a chain of a
few thousand additions is deeper than Python's default limit of 1000 frames."""
from __future__ import annotations

import contextlib
import sys
from typing import Iterator

# From 3.11 on, Python-to-Python calls do not use the C stack, so a high limit is safe; before,
# every frame does and the limit must stay well below what an 8 MiB stack holds.
_NEEDED = 100_000 if sys.version_info >= (3, 11) else 15_000


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
