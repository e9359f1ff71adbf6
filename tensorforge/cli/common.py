"""What the commands share: progress lines, loading a model (ONNX, zoo name or compiled .tfm),
and times written with a unit.

Progress and notes go to stderr; what a command produces (results, tables, paths written) goes
to stdout, so `tensorforge tune ... > summary.txt` keeps the summary apart from the progress.
"""
from __future__ import annotations

import math
import os
import sys

from ..errors import InputError


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def threads() -> int:
    from ..runtime.module import get_num_threads
    return get_num_threads()


def is_compiled_model(path: str) -> bool:
    """Whether `path` is a model written by `tensorforge compile` (a zip archive, .tfm)."""
    import zipfile
    return path.endswith(".tfm") or (os.path.isfile(path) and zipfile.is_zipfile(path))


def load_graph(model: str, shapes: dict):
    """A model file, or the name of a zoo model (resnet18, mobilenet_v1, ...) when no such
    file exists.  A model that cannot be imported is an InputError naming the file."""
    from ..errors import UserError
    from ..frontend import from_onnx
    from ..frontend.onnx import InputShapeError
    from ..graph.ir import Graph
    from ..testing import models

    if not os.path.exists(model) and model in models.NAMES:
        proto, _ = models.get(model)
        source = proto
    else:
        if not os.path.exists(model):
            zoo = ", ".join(models.NAMES)
            raise InputError(f"no such model file: {model} (nor is it a zoo model: {zoo})")
        if is_compiled_model(model):
            raise InputError(f"{model} is a compiled model; this command needs the ONNX model it was compiled from")
        source = model
    try:
        graph = from_onnx(source, shapes=shapes)
    except (UserError, OSError):
        raise
    except (ValueError, NotImplementedError, KeyError) as err:
        raise InputError(f"cannot import {model}: {err}") from err
    if not isinstance(graph, Graph):     # an OnnxProgram: compiled at call time, by the Python API
        raise InputShapeError(f"{model} is not one static graph: {graph.reason}. The command line compiles "
                              "static models; the Python API (tensorforge.compile(from_onnx(path))) compiles "
                              "this one at call time")
    return graph


def load_compiled(path: str):
    """A model written by `tensorforge compile`; a file that is not one is an InputError."""
    import tensorforge

    if not os.path.exists(path):
        raise InputError(f"no such model file: {path}")
    try:
        return tensorforge.load(path)
    except (ValueError, KeyError) as err:
        raise InputError(str(err) if path in str(err) else f"cannot load {path}: {err}") from err


def format_time(seconds: float) -> str:
    """A kernel time with a unit that shows its digits (us below 0.1 ms)."""
    if not math.isfinite(seconds):
        return "-"
    return f"{seconds * 1e6:.2f} us" if seconds < 1e-4 else f"{seconds * 1e3:.3f} ms"
