"""graph/passes/fold_qdq_tables: an elementwise chain from one 8-bit tensor to another (the QDQ
form of GELU, tanh, a reshape between two quantizations) becomes a 256-entry table lookup, and
the model still agrees with ONNX Runtime's run of the same file."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tensorforge  # noqa: E402
from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.passes.fold_qdq_tables import fold_qdq_tables  # noqa: E402
from tensorforge.graph.pipeline import optimize  # noqa: E402


class _Builder:
    def __init__(self, qtype=TensorProto.UINT8):
        self.nodes, self.inits, self.qtype = [], [], qtype
        self.zero = 128 if qtype == TensorProto.UINT8 else 0

    def const(self, value: float, dtype=np.float32) -> str:
        name = f"c{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.array(value, dtype), name))
        return name

    def qdq(self, x: str, scale: float) -> str:
        """x quantized with `scale` and the builder's zero point, then dequantized."""
        s = self.const(scale)
        z = self.const(self.zero, np.uint8 if self.qtype == TensorProto.UINT8 else np.int8)
        q, dq = f"{x}_q", f"{x}_dq"
        self.nodes += [helper.make_node("QuantizeLinear", [x, s, z], [q]),
                       helper.make_node("DequantizeLinear", [q, s, z], [dq])]
        return dq

    def node(self, op: str, inputs: list, **attrs) -> str:
        out = f"t{len(self.nodes)}"
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def model(self, y: str, in_shape: tuple, out_shape: tuple, out_type=TensorProto.FLOAT):
        self.nodes.append(helper.make_node("Identity", [y], ["y"]))
        graph = helper.make_graph(self.nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
                                  [helper.make_tensor_value_info("y", out_type, out_shape)], self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _gelu_model():
    """QDQ GELU as quantize_static writes it: x/sqrt(2), erf, +1, x/2, product, each quantized."""
    b = _Builder()
    x = b.qdq("x", 0.03)
    e = b.qdq(b.node("Erf", [b.qdq(b.node("Mul", [x, b.const(2 ** -0.5)]), 0.02)]), 0.008)
    plus = b.qdq(b.node("Add", [e, b.const(1.0)]), 0.008)
    half = b.qdq(b.node("Mul", [x, b.const(0.5)]), 0.015)
    return b.model(b.qdq(b.node("Mul", [half, plus]), 0.02), (4, 64), (4, 64))


def _tanh_int8_model():
    b = _Builder(TensorProto.INT8)
    return b.model(b.qdq(b.node("Tanh", [b.qdq("x", 0.025)]), 1 / 127), (3, 50), (3, 50))


def _requantize_through_reshape_model():
    """Dequantize, reshape, quantize again with the same parameters: the reshape alone (the
    model's output is the quantized tensor)."""
    b = _Builder()
    shape = b.const(np.array([2, 32, 4], np.int64), np.int64)
    again = b.qdq(b.node("Reshape", [b.qdq("x", 0.03), shape]), 0.03)
    return b.model(again.replace("_dq", "_q"), (4, 64), (2, 32, 4), TensorProto.UINT8)


def _ort(model, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.mark.parametrize("make, shape, step", [(_gelu_model, (4, 64), 0.02), (_tanh_int8_model, (3, 50), 1 / 127)])
def test_chain_becomes_one_lookup_and_matches_onnx_runtime(make, shape, step):
    model = make()
    graph = from_onnx(model)
    ops = [n.op for n in optimize(graph, "c").nodes]
    assert ops.count("gather") == 1 and "erf" not in ops and "tanh" not in ops
    assert ops.count("quantize_linear") == 1            # only the input's
    compiled = tensorforge.compile(graph, target="c")
    for seed in range(3):
        x = (np.random.default_rng(seed).standard_normal(shape) * 2).astype(np.float32)
        got, want = compiled(x)[0], _ort(model, x)
        assert np.mean(np.abs(got - want) <= step * 1.0001) >= 0.99


def test_identity_chain_becomes_the_reshape():
    model = _requantize_through_reshape_model()
    graph = from_onnx(model)
    ops = [n.op for n in optimize(graph, "c").nodes]
    assert "gather" not in ops and ops.count("quantize_linear") == 1 and "reshape" in ops
    x = np.random.default_rng(3).standard_normal((4, 64)).astype(np.float32)
    np.testing.assert_array_equal(tensorforge.compile(graph, target="c")(x)[0], _ort(model, x))


def test_table_is_the_chain_at_every_value():
    """Each entry is the chain's reference at that 8-bit value (signed: entry i for the value
    whose bits are i), which is what gather's wrap-around of negative indices reads; the chain
    ends dequantized, so the table holds the dequantized floats."""
    from tensorforge.graph.passes.fold_constants import fold_constants
    graph = fold_constants(from_onnx(_tanh_int8_model()))
    folded = fold_qdq_tables(graph)
    (lookup,) = [n for n in folded.nodes if n.op == "gather"]
    table = folded.params[lookup.inputs[0]]
    q = np.arange(256, dtype=np.uint8).view(np.int8).astype(np.float32)
    want = np.clip(np.rint(np.tanh(q * np.float32(0.025)) / np.float32(1 / 127)), -128, 127).astype(np.int8)
    np.testing.assert_array_equal(table, want.astype(np.float32) * np.float32(1 / 127))


def test_broadcast_constant_keeps_the_chain():
    """A per-element constant (a bias vector) is not a function of the 8-bit value alone."""
    b = _Builder()
    bias = b.const(np.linspace(-1, 1, 64, dtype=np.float32))
    graph = from_onnx(b.model(b.qdq(b.node("Add", [b.qdq("x", 0.03), bias]), 0.03), (4, 64), (4, 64)))
    assert "gather" not in [n.op for n in optimize(graph, "c").nodes]


def test_transpose_between_same_quantizations_moves_the_bytes():
    """Dequantize, transpose, quantize with the same parameters (attention's heads put back
    together): the transpose runs on the 8-bit values, with no float step left."""
    b = _Builder()
    moved = b.qdq(b.node("Transpose", [b.qdq("x", 0.03)], perm=[1, 0, 2]), 0.03)
    model = b.model(moved.replace("_dq", "_q"), (4, 6, 8), (6, 4, 8), TensorProto.UINT8)
    graph = from_onnx(model)
    nodes = optimize(graph, "c").nodes
    assert [n.op for n in nodes].count("quantize_linear") == 1 and "dequantize_linear" not in [n.op for n in nodes]
    assert all(n.inputs[0].dtype == "uint8" for n in nodes if n.op == "transpose")
    x = np.random.default_rng(4).standard_normal((4, 6, 8)).astype(np.float32)
    np.testing.assert_array_equal(tensorforge.compile(graph, target="c")(x)[0], _ort(model, x))


def test_chain_after_a_transpose_is_looked_up_on_the_moved_bytes():
    """A table chain behind a transpose: the transpose is replayed on the 8-bit source, then
    one lookup."""
    model = _Builder()
    t = model.node("Transpose", [model.qdq("x", 0.03)], perm=[1, 0])
    y = model.qdq(model.node("Tanh", [t]), 1 / 128)
    model = model.model(y, (4, 64), (64, 4))
    graph = from_onnx(model)
    ops = [n.op for n in optimize(graph, "c").nodes]
    assert ops.count("gather") == 1 and "tanh" not in ops
    x = (np.random.default_rng(5).standard_normal((4, 64)) * 2).astype(np.float32)
    got, want = tensorforge.compile(graph, target="c")(x)[0], _ort(model, x)
    assert np.mean(np.abs(got - want) <= 1.0001 / 128) >= 0.99


def test_values_moved_differently_are_not_combined():
    """x + x^T (square) is no function of one element of x: the transposed and the plain
    value are not folded into one table, and the sum stays right."""
    b = _Builder()
    x = b.qdq("x", 0.03)
    y = b.qdq(b.node("Add", [x, b.node("Transpose", [x], perm=[1, 0])]), 0.05)
    model = b.model(y, (8, 8), (8, 8))
    graph = from_onnx(model)
    x_in = np.random.default_rng(6).standard_normal((8, 8)).astype(np.float32)
    got, want = tensorforge.compile(graph, target="c")(x_in)[0], _ort(model, x_in)
    assert np.mean(np.abs(got - want) <= 0.05 * 1.0001) >= 0.99
