"""Adapters for ../shared/onnx_conformance.py: `run` compiles with tensorforge; `run_reference`
only converts and runs the ops' NumPy references (tests the frontend and references alone)."""
from __future__ import annotations

import numpy as np


def run_reference(model_path: str, inputs: list) -> list:
    from tensorforge.frontend import from_onnx
    from tensorforge.graph.reference import run_reference as ref
    shapes = _shapes(model_path, inputs)
    graph = from_onnx(model_path, shapes=shapes)
    return ref(graph, *[np.asarray(a) for a in inputs])


def _shapes(model_path: str, inputs: list) -> dict:
    import onnx
    model = onnx.load(model_path, load_external_data=False)
    init = {i.name for i in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in init]
    return {n: np.asarray(a).shape for n, a in zip(names, inputs) if a is not None}


def run(model_path: str, inputs: list) -> list:
    """Compile the model with tensorforge (C backend) and run it."""
    import tensorforge
    from tensorforge.frontend import from_onnx
    graph = from_onnx(model_path, shapes=_shapes(model_path, inputs))
    model = tensorforge.compile(graph, target="c -O1")
    present = [np.asarray(a) for a in inputs if a is not None]
    return model(*present)
