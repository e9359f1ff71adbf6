"""Helpers for ONNX converter tests that check the compiled model (from_onnx, then
tensorforge.compile for the C backend, then a call) against a NumPy reference written in the
test: one-node models in any opset and domain, and the compile-and-run step."""
from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper

import tensorforge
from tensorforge.frontend import from_onnx


def one_node_model(op_type: str, inputs: dict, attrs: dict | None = None, outputs=("y",), opset: int = 23,
                   domain: str = "", consts: tuple = (), out_dtypes: dict | None = None):
    """(model, feeds): one `op_type` node.  `inputs` maps names to arrays (None: an omitted
    optional input); names in `consts` become initializers.  Outputs take the first input's dtype
    unless `out_dtypes` names another."""
    names = [k if a is not None else "" for k, a in inputs.items()]
    while names and names[-1] == "":
        names.pop()
    inits = [numpy_helper.from_array(np.asarray(a), k) for k, a in inputs.items() if a is not None and k in consts]
    feeds = {k: np.asarray(a) for k, a in inputs.items() if a is not None and k not in consts}
    graph_inputs = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                    for k, a in feeds.items()]
    node = helper.make_node(op_type, names, list(outputs), domain=domain or None, **(attrs or {}))
    first = np.asarray(next(a for a in inputs.values() if a is not None)).dtype
    out_dtypes = out_dtypes or {}
    graph_outputs = [helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(np.dtype(out_dtypes.get(o, first))),
                                                   None) for o in outputs if o]
    graph = helper.make_graph([node], op_type.lower(), graph_inputs, graph_outputs, inits)
    opsets = [helper.make_opsetid("", opset)]
    if domain:
        opsets.append(helper.make_opsetid(domain, 1))
    return helper.make_model(graph, opset_imports=opsets), feeds


def convert(model):
    """from_onnx(model)."""
    return from_onnx(model)


def compile_and_run(model, feeds: dict) -> list:
    """The model's outputs as a user gets them: converted, compiled for C, called."""
    graph = convert(model)
    compiled = tensorforge.compile(graph, target="c -O1")
    outs = compiled(*[feeds[v.name] for v in graph.inputs])
    return [np.asarray(o) for o in (outs if isinstance(outs, (list, tuple)) else [outs])]


def rand(shape, dtype="float32", seed: int = 0, scale: float = 1.0) -> np.ndarray:
    return np.asarray(np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)
