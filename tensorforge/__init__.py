"""tensorforge: an end-to-end optimizing compiler for deep learning.

    from tensorforge import te
    s = te.create_schedule(C.op)
    print(tensorforge.lower(s, [A, B, C]))
    f = tensorforge.build(s, [A, B, C], target="c")

    graph = tensorforge.frontend.from_onnx("model.onnx")
    model = tensorforge.compile(graph, target="c")
    outputs = model(x)
"""
__version__ = "0.1.0"

from . import te
from .driver import build, compile, lower  # noqa: A004
from .te.schedule import ScheduleError

__all__ = ["te", "lower", "build", "compile", "load", "ScheduleError", "nd", "Target", "frontend", "autotune"]


def load(path: str):
    """Load a model written by `Model.export` (needs only the runtime)."""
    from .runtime.model import load as _load
    return _load(path)


def __getattr__(name):  # runtime pieces load on first use
    if name == "nd":
        from .runtime import ndarray
        return ndarray
    if name == "Target":
        from .target import Target
        return Target
    if name in ("frontend", "autotune"):
        import importlib
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'tensorforge' has no attribute {name!r}")
