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

# Everything loads on first use: `tensorforge.load` needs only the runtime, and
# `import tensorforge` stays cheap.
_LAZY = {"te": (".te", None), "lower": (".build_module", "lower"), "build": (".build_module", "build"),
         "compile": (".driver", "compile"), "ScheduleError": (".te.schedule", "ScheduleError"),
         "nd": (".runtime.ndarray", None), "Target": (".target", "Target"),
         "frontend": (".frontend", None), "autotune": (".autotune", None)}

__all__ = ["te", "lower", "build", "compile", "load", "ScheduleError", "nd", "Target", "frontend", "autotune"]


def load(path: str):
    """Load a model written by `Model.export` (needs only the runtime)."""
    from .runtime.model import load as _load
    return _load(path)


def __getattr__(name):
    entry = _LAZY.get(name)
    if entry is None:
        raise AttributeError(f"module 'tensorforge' has no attribute {name!r}")
    import importlib
    module = importlib.import_module(entry[0], __name__)
    value = module if entry[1] is None else getattr(module, entry[1])
    globals()[name] = value
    return value
