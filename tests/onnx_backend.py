"""Adapters for ../shared/onnx_conformance.py.

`run_user` does only what a user does: `from_onnx(path)` with no shapes and no constants,
`tensorforge.compile`, call with the inputs (a static Graph or, for models with symbolic shapes,
shape values as inputs, control flow or sequences, a staged model).  It is the yardstick.
`run` binds the inputs that the frontend reads as constants to the test's values and passes
every input's shape, and `run_reference` only converts and runs the ops' NumPy references:
both test parts of the compiler in isolation."""
from __future__ import annotations

import numpy as np


def run_reference(model_path: str, inputs: list) -> list:
    from tensorforge.graph.reference import run_reference as ref
    graph, rest = _convert(model_path, inputs)
    return ref(graph, *[np.asarray(a) for a in rest])


def _convert(model_path: str, inputs: list):
    """(graph, the inputs it still takes).  Inputs that the frontend needs as constants (a
    Reshape's shape, Slice's starts, TopK's K, ... fed as graph inputs by the test) are bound to
    the values given with the model, one at a time as conversion asks for them."""
    import onnx

    from tensorforge.frontend import from_onnx
    from tensorforge.graph.builder import RuntimeValueError
    model = onnx.load(model_path, load_external_data=False)
    init = {i.name for i in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in init]
    given = dict(zip(names, inputs))
    shapes = _shapes(model_path, inputs)
    constants: dict = {}
    while True:
        try:
            graph = from_onnx(model_path, shapes=shapes, constants=constants)
            break
        except RuntimeValueError as err:
            name = err.value.name
            if name not in given or name in constants or given[name] is None:
                raise
            constants[name] = np.asarray(given[name])
    return graph, [a for n, a in zip(names, inputs) if n not in constants]


def _shapes(model_path: str, inputs: list) -> dict:
    import onnx
    model = onnx.load(model_path, load_external_data=False)
    init = {i.name for i in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in init]
    return {n: a.shape for n, a in zip(names, inputs) if isinstance(a, np.ndarray)}


def run_user(model_path: str, inputs: list) -> list:
    """What a user gets: from_onnx(path), compile, call."""
    import tensorforge
    from tensorforge.frontend import from_onnx
    model = tensorforge.compile(from_onnx(model_path), target="c -O1")
    return model(*inputs)


def run_user_opencl(model_path: str, inputs: list) -> list:
    """`run_user` on the first OpenCL device."""
    import tensorforge
    from tensorforge.frontend import from_onnx
    model = tensorforge.compile(from_onnx(model_path), target="opencl")
    return model(*inputs)


def run_user_cuda(model_path: str, inputs: list) -> list:
    """`run_user` on CUDA device 0 (NVRTC compiles for its architecture)."""
    import tensorforge
    from tensorforge.frontend import from_onnx
    model = tensorforge.compile(from_onnx(model_path), target="cuda")
    return model(*inputs)


def run(model_path: str, inputs: list) -> list:
    """Compile the model with tensorforge (C backend) and run it."""
    import tensorforge
    graph, rest = _convert(model_path, inputs)
    model = tensorforge.compile(graph, target="c -O1")
    present = [np.asarray(a) for a in rest if a is not None]
    return model(*present)


def run_opencl(model_path: str, inputs: list) -> list:
    """Compile the model with tensorforge for OpenCL (the GPU templates and device executor) and
    run it on the first OpenCL device."""
    import tensorforge
    graph, rest = _convert(model_path, inputs)
    model = tensorforge.compile(graph, target="opencl")
    present = [np.asarray(a) for a in rest if a is not None]
    return model(*present)
