"""Helpers for the transform / index / reduction ONNX frontend tests: one-node models whose
attribute-like inputs (shapes, axes, pads, ...) are initializers, checked against ONNX Runtime."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from tensorforge.frontend import from_onnx
from tensorforge.graph.reference import run_reference


def one_node(op_type: str, data: dict, consts: dict | None = None, attrs: dict | None = None,
             opset: int = 18, n_outputs: int = 1, input_order: list | None = None):
    """(model, feeds): `data` are graph inputs, `consts` initializers ({name: array}, None for an
    omitted optional input); the node reads them in `input_order` (default: data, then consts)."""
    consts = consts or {}
    order = input_order or list(data) + list(consts)
    names = [n if (n in data or consts.get(n) is not None) else "" for n in order]
    while names and names[-1] == "":
        names.pop()
    outputs = [f"y{k}" for k in range(n_outputs)]
    node = helper.make_node(op_type, names, outputs, **(attrs or {}))
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
              for n, a in data.items()]
    inits = [numpy_helper.from_array(np.asarray(a), n) for n, a in consts.items() if a is not None]
    outs = [helper.make_value_info(o, onnx.TypeProto()) for o in outputs]   # typed by shape inference
    graph = helper.make_graph([node], op_type.lower(), inputs, outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model), dict(data)


def check_ort(model, feeds: dict, rtol: float = 1e-5, atol: float = 1e-6) -> list:
    """Convert with tensorforge, run the references, and compare every output with ONNX Runtime
    (integers and bools exactly, shapes and dtypes too)."""
    import onnxruntime as ort
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)
    graph = from_onnx(model)
    got = run_reference(graph, *[feeds[v.name] for v in graph.inputs])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape, f"shape {g.shape} != ONNX Runtime's {w.shape}"
        assert g.dtype == w.dtype, f"dtype {g.dtype} != ONNX Runtime's {w.dtype}"
        if np.issubdtype(w.dtype, np.floating):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, w)
    return got


def rand(shape, dtype="float32", seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.issubdtype(np.dtype(dtype), np.integer):
        return rng.integers(-20, 20, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def i64(*values) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)
