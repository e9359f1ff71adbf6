"""One weight or one input read by two convolutions (a module called twice in forward, a siamese
pair, two heads on one feature map): every layout path derives its constants and intermediates
twice under one name, which the model description cannot hold.  Each path compiles, matches the
reference, and keeps one copy of a weight it packed the same way twice."""
from __future__ import annotations

import numpy as np
import pytest

import tensorforge
from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.reference import run_reference

CASES = {   # x shape, weight shape, padding: the path each takes
    "blocked": ((1, 16, 14, 14), (32, 16, 3, 3), (1, 1, 1, 1)),
    "blocked_1x1": ((1, 16, 14, 14), (32, 16, 1, 1), (0, 0, 0, 0)),
    "winograd": ((1, 64, 14, 14), (64, 64, 3, 3), (1, 1, 1, 1)),
    "pointwise_gemm": ((1, 8, 6, 6), (3, 8, 1, 1), (0, 0, 0, 0)),
    "narrow_filters": ((1, 8, 6, 6), (3, 8, 3, 3), (1, 1, 1, 1)),
    "column_conv": ((1, 8, 20, 1), (16, 8, 5, 1), (2, 0, 2, 0)),
    "trimmed_taps": ((1, 8, 20, 1), (16, 8, 5, 5), (2, 2, 2, 2)),
    "conv1d_im2col": ((1, 8, 30), (3, 8, 3), (1, 1)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_weight_shared_by_two_convs(case):
    xs, ws, pad = CASES[case]
    rank = len(xs) - 2
    rng = np.random.default_rng(0)
    b = GraphBuilder("shared")
    x = b.input("x", xs, "float32")
    w = b.const(rng.standard_normal(ws).astype("float32"), "w")
    attrs = {"strides": (1,) * rank, "padding": pad, "dilations": (1,) * rank, "groups": 1}
    y1 = b.add1(f"conv{rank}d", [x, w], attrs)                        # the same input and weight
    y2 = b.add1(f"conv{rank}d", [x, w], attrs)
    y3 = b.add1(f"conv{rank}d", [b.add1("relu", [x]), w], attrs)      # the same weight, another input
    graph = b.finish([b.add1("add", [b.add1("add", [y1, b.add1("relu", [y2])]), y3])])
    xv = rng.standard_normal(xs).astype("float32")
    model = tensorforge.compile(graph)
    np.testing.assert_allclose(model(xv)[0], run_reference(graph, xv)[0], rtol=1e-4, atol=2e-3)
    names = [v.name for v in model.info["graph"].params]
    assert len(names) == len(set(names))
    sizes = sorted(a.size for a in model.info["graph"].params.values())
    assert sizes.count(sizes[-1]) == 1          # the largest constant (the weight as packed) once


def test_an_onnx_initializer_read_by_two_conv_nodes():
    """The same Conv weight applied twice, as an exporter writes a module called twice."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    w = (rng.standard_normal((16, 16, 3, 3)) * 0.1).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "W"], ["a"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Conv", ["b", "W"], ["c"], pads=[1, 1, 1, 1])]
    g = helper.make_graph(nodes, "twice", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 16, 8, 8))],
                          [helper.make_tensor_value_info("c", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(w, "W")])
    graph = tensorforge.frontend.from_onnx(helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 17)]))
    xv = rng.standard_normal((1, 16, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(tensorforge.compile(graph)(xv)[0], run_reference(graph, xv)[0], rtol=1e-4, atol=1e-4)


def _onnx_shared_matmuls(spelling: str):
    """Four MatMul layers applying one weight, as exporters write a weight-shared encoder (ALBERT):
    through an Identity of the initializer per layer, or as a copy of the initializer per layer."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(2)
    w = (rng.standard_normal((128, 128)) * 0.1).astype(np.float32)
    nodes, inits, x = [], [numpy_helper.from_array(w, "W")], "x"
    for k in range(4):
        name = "W"
        if spelling == "identity":
            name = f"W{k}"
            nodes.append(helper.make_node("Identity", ["W"], [name]))
        elif spelling == "copies" and k:
            name = f"W{k}"
            inits.append(numpy_helper.from_array(w.copy(), name))
        nodes += [helper.make_node("MatMul", [x, name], [f"m{k}"]), helper.make_node("Tanh", [f"m{k}"], [f"y{k}"])]
        x = f"y{k}"
    g = helper.make_graph(nodes, "shared", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (16, 128))],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, None)], inits)
    return tensorforge.frontend.from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))


@pytest.mark.parametrize("spelling", ["identity", "copies"])
def test_a_weight_reused_by_layers_is_held_once(spelling):
    """The compiled model holds the weight (as packed) once, not once per layer: ALBERT-base's 44 MB
    of weights were 356 MB."""
    graph = _onnx_shared_matmuls(spelling)
    if spelling == "identity":       # the Identity outputs are the initializer itself
        assert len(graph.params) == 1
    model = tensorforge.compile(graph)
    params = model.info["graph"].params
    assert sum(a.nbytes for a in params.values()) < 2 * 128 * 128 * 4
    xv = np.random.default_rng(3).standard_normal((16, 128)).astype(np.float32)
    np.testing.assert_allclose(model(xv)[0], run_reference(graph, xv)[0], rtol=1e-4, atol=1e-5)



def test_the_specializations_of_a_staged_model_hold_its_derived_weights_once():
    """A MatMul with a symbolic row count compiled at three row counts that pack the weight
    alike (a few rows pack it in wider panels): each specialization derives the transposed,
    packed weight again, and all three hold one array of it (before, each held its own, and its
    converted graph another)."""
    from onnx import TensorProto, helper, numpy_helper

    from tensorforge.frontend import from_onnx
    from tensorforge.graph.passes.share_equal_params import MIN_BYTES

    rng = np.random.default_rng(0)
    w = rng.standard_normal((256, 256)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])], "m",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", 256])],
        initializer=[numpy_helper.from_array(w, "w")])
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model = tensorforge.compile(from_onnx(onnx_model), batch_buckets=(), target="c -O1")
    for rows in (17, 40, 64):
        x = rng.standard_normal((rows, 256)).astype(np.float32)
        np.testing.assert_allclose(model(x)[0], np.maximum(x @ w, 0), rtol=1e-4, atol=1e-4)
    entries = list(model._compiled.entries.values())
    assert len(entries) == 3
    held = [{id(a) for a in m.executor.params.values() if a.nbytes >= MIN_BYTES} for _, m in entries]
    assert held[0] and held[0] == held[1] == held[2]
    assert all(segment.graph is None for segment, _ in entries)
