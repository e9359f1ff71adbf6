"""tensorforge: an end-to-end optimizing compiler for deep learning.

    from tensorforge import te
    s = te.create_schedule(C.op)
    print(tensorforge.lower(s, [A, B, C]))
    f = tensorforge.build(s, [A, B, C], target="c")
"""
__version__ = "0.1.0"

from . import te
from .driver import build, lower
from .te.schedule import ScheduleError

__all__ = ["te", "lower", "build", "ScheduleError", "nd", "Target"]


def __getattr__(name):  # runtime pieces load on first use
    if name == "nd":
        from .runtime import ndarray
        return ndarray
    if name == "Target":
        from .target import Target
        return Target
    raise AttributeError(f"module 'tensorforge' has no attribute {name!r}")
