"""Build a small ONNX model with onnx.helper, convert it with from_onnx, compile and call it:
what a user does with a model whose ops run on the host."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import tensorforge
from tensorforge.frontend import from_onnx

ML = "ai.onnx.ml"


def elem_type(a: np.ndarray) -> int:
    a = np.asarray(a)
    if a.dtype.kind in "OUS":
        return TensorProto.STRING
    return helper.np_dtype_to_tensor_dtype(a.dtype)


def strings(*values, shape=None) -> np.ndarray:
    """An object array of str, as string tensors are passed to a model."""
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out.reshape(shape) if shape is not None else out


def make_model(nodes: list, inputs: dict, outputs: dict, opsets: dict | None = None,
               initializers: dict | None = None, dims: dict | None = None):
    """`inputs` {name: example array} (its dtype, and its shape unless `dims` {name: dims} gives
    the declared dimensions, symbols included), `outputs` {name: ONNX element type}."""
    opsets = {"": 20, **(opsets or {})}
    ins = [helper.make_tensor_value_info(n, elem_type(a), list((dims or {}).get(n, np.shape(a))))
           for n, a in inputs.items()]
    outs = [helper.make_tensor_value_info(n, t, None) for n, t in outputs.items()]
    inits = [numpy_helper.from_array(np.asarray(a), n) for n, a in (initializers or {}).items()]
    graph = helper.make_graph(nodes, "host_ops", ins, outs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()])
    model.ir_version = 10
    return model


def run(nodes: list, inputs: dict, outputs: dict, opsets: dict | None = None,
        initializers: dict | None = None) -> list:
    """Convert, compile and call the model on `inputs`; its outputs in order."""
    model = tensorforge.compile(from_onnx(make_model(nodes, inputs, outputs, opsets, initializers)),
                                target="c -O1")
    return model(*inputs.values())


def assert_strings_equal(got, expected) -> None:
    got = np.asarray(got)
    assert got.dtype == object, got.dtype
    assert got.shape == np.asarray(expected).shape, (got.shape, np.asarray(expected).shape)
    assert all(isinstance(s, str) for s in got.reshape(-1))
    assert got.tolist() == np.asarray(expected, dtype=object).tolist()
