"""If nodes whose condition is known while the graph is built are inlined (onnx_ops/control_if.py):
a shape-derived condition folds, so the model is one static graph; a condition computed from data
makes the staged model specialize on its boolean value instead of running the If on the host."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import tensorforge
from tensorforge.frontend import from_onnx
from tensorforge.frontend.onnx_host import HOST_OPS
from tensorforge.graph.ir import Graph

TARGET = "c"


def _branch(name: str, op: str, inputs: list[str], out: str, **attrs) -> onnx.GraphProto:
    node = helper.make_node(op, inputs, [f"{name}_y"], **attrs)
    return helper.make_graph([node], name, [], [helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, None)])


def _squeeze_if_model(batch) -> onnx.ModelProto:
    """y = relu(x.squeeze(0) if x.shape[0] == 1 else x) * 2, as PyTorch exports a conditional squeeze."""
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [0])
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["d0"], axis=0),
        helper.make_node("Equal", ["d0", "one"], ["c"]),
        helper.make_node("If", ["c"], ["z"],
                         then_branch=_branch("then", "Squeeze", ["x", "axes"], "z"),
                         else_branch=_branch("else", "Identity", ["x"], "z")),
        helper.make_node("Relu", ["z"], ["r"]),
        helper.make_node("Mul", ["r", "two"], ["y"]),
    ]
    inits = [axes, helper.make_tensor("zero", TensorProto.INT64, [], [0]),
             helper.make_tensor("one", TensorProto.INT64, [], [1]),
             helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])]
    g = helper.make_graph(nodes, "squeeze_if", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _data_if_model() -> onnx.ModelProto:
    """y = (x + 1 if sum(x) > 0 else x * 3) - 0.5: the condition is data."""
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["c"]),
        helper.make_node("If", ["c"], ["z"],
                         then_branch=_branch("then", "Add", ["x", "one"], "z"),
                         else_branch=_branch("else", "Mul", ["x", "three"], "z")),
        helper.make_node("Sub", ["z", "half"], ["y"]),
    ]
    inits = [helper.make_tensor(n, TensorProto.FLOAT, [], [v])
             for n, v in (("zero", 0.0), ("one", 1.0), ("three", 3.0), ("half", 0.5))]
    g = helper.make_graph(nodes, "data_if", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("batch", [1, 2])
def test_shape_condition_folds_to_one_static_graph(batch):
    graph = from_onnx(_squeeze_if_model(batch))
    assert isinstance(graph, Graph), "a condition on static shapes must not need staging"
    x = np.random.default_rng(batch).standard_normal((batch, 3, 4)).astype(np.float32)
    (got,) = tensorforge.compile(graph, target=TARGET)(x)
    want = np.maximum(x[0] if batch == 1 else x, 0) * 2
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_symbolic_batch_inlines_the_branch_per_shape(monkeypatch):
    """With a symbolic batch the condition folds once the call's shape is known: no host If."""
    prog = from_onnx(_squeeze_if_model("batch"))
    assert not isinstance(prog, Graph)
    ran = []
    host_if = HOST_OPS["If"]
    monkeypatch.setitem(HOST_OPS, "If", lambda *a: ran.append(1) or host_if(*a))
    model = tensorforge.compile(prog, target=TARGET)
    for batch in (1, 3, 1):
        x = np.random.default_rng(batch).standard_normal((batch, 3, 4)).astype(np.float32)
        (got,) = model(x)
        np.testing.assert_allclose(got, np.maximum(x[0] if batch == 1 else x, 0) * 2, rtol=1e-6)
    assert not ran
    assert model.info["specializations"] == 2


def test_data_condition_specializes_on_its_value(monkeypatch):
    ran = []
    host_if = HOST_OPS["If"]
    monkeypatch.setitem(HOST_OPS, "If", lambda *a: ran.append(1) or host_if(*a))
    # batch 5 would run as 4 + 1 on batch buckets; without them each stretch is one specialization
    model = tensorforge.compile(from_onnx(_data_if_model()), target=TARGET, batch_buckets=())
    rng = np.random.default_rng(0)
    for sign in (1, -1, 1, -1):
        x = (sign * np.abs(rng.standard_normal((5, 4)))).astype(np.float32)
        (got,) = model(x)
        want = (x + 1 if x.sum() > 0 else x * 3) - 0.5
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert not ran, "the If must be compiled into the stretch, not run on the host"
    # the reduction before the If, then the rest once per value of the condition
    assert model.info["specializations"] == 3


def test_branch_that_cannot_compile_runs_on_the_host():
    """A branch holding an op with no converter (a sequence op) still runs: on the host."""
    seq = helper.make_graph(
        [helper.make_node("SequenceConstruct", ["x", "x"], ["q"]),
         helper.make_node("ConcatFromSequence", ["q"], ["then_y"], axis=0)],
        "then", [], [helper.make_tensor_value_info("then_y", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=seq,
                              else_branch=_branch("else", "Neg", ["x"], "y"))]
    g = helper.make_graph(nodes, "seq_if", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])])
    model = tensorforge.compile(from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])),
                                target=TARGET)
    x = np.abs(np.random.default_rng(1).standard_normal((2, 3))).astype(np.float32)
    np.testing.assert_allclose(model(x)[0], np.concatenate([x, x]), rtol=1e-6)
    np.testing.assert_allclose(model(-x)[0], x, rtol=1e-6)
