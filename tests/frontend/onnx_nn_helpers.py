"""Helpers for the NN-family ONNX frontend tests: one-node models and a check against ONNX Runtime."""
from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper

from tensorforge.frontend import from_onnx
from tensorforge.graph.reference import run_reference
from tensorforge.testing.oracles import INTEGER_PRODUCT_OPS, ort_int8_products_exact


def node_model(op_type: str, inputs: dict, attrs: dict | None = None, consts: tuple = (), outputs=("y",),
               opset: int = 17, out_dtypes: dict | None = None):
    """(model, feeds) for one `op_type` node.  `inputs` maps input names to arrays (None for an
    omitted optional input, written as ""); names in `consts` become initializers.  Outputs have
    the first input's dtype unless `out_dtypes` says otherwise."""
    names = [k if a is not None else "" for k, a in inputs.items()]
    while names and names[-1] == "":   # trailing omitted inputs are dropped (ONNX Runtime crashes on some)
        names.pop()
    inits = [numpy_helper.from_array(a, k) for k, a in inputs.items() if a is not None and k in consts]
    feeds = {k: a for k, a in inputs.items() if a is not None and k not in consts}
    graph_inputs = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                    for k, a in feeds.items()]
    node = helper.make_node(op_type, names, list(outputs), **(attrs or {}))
    first = next(a for a in inputs.values() if a is not None).dtype
    out_dtypes = out_dtypes or {}
    graph_outputs = [helper.make_tensor_value_info(o, _elem_type(out_dtypes.get(o, first)),
                                                   None) for o in outputs if o]
    graph = helper.make_graph([node], op_type.lower(), graph_inputs, graph_outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), feeds


def _elem_type(dtype) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def run_both(model, feeds: dict) -> tuple[list, list]:
    """(tensorforge reference outputs, ONNX Runtime outputs) for the model; for integer products
    on a CPU where ONNX Runtime's are not exact (testing/oracles.py), ONNX's own reference
    evaluator stands in for it."""
    if not ort_int8_products_exact() and any(n.op_type in INTEGER_PRODUCT_OPS for n in model.graph.node):
        from onnx.reference import ReferenceEvaluator
        want = ReferenceEvaluator(model).run(None, feeds)
    else:
        import onnxruntime as ort
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        want = session.run(None, feeds)
    graph = from_onnx(model)
    got = run_reference(graph, *[feeds[v.name] for v in graph.inputs])
    return got, want


def check_against_ort(model, feeds: dict, rtol: float = 1e-5, atol: float = 1e-5) -> list:
    got, want = run_both(model, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape, f"shape {g.shape} != ONNX Runtime's {w.shape}"
        assert g.dtype == w.dtype, f"dtype {g.dtype} != ONNX Runtime's {w.dtype}"
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return got


def rand(shape, dtype="float32", seed: int = 0, scale: float = 1.0) -> np.ndarray:
    return np.asarray(np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)
