"""ONNX elementwise converters: one-node models through from_onnx + run_reference against ONNX
Runtime, opset-dependent forms (Clip, Dropout, Cast, legacy broadcasting), and clear errors.
ONNX Runtime is the only oracle: when it cannot run a model the test fails and says why."""
from __future__ import annotations

import numpy as np
import pytest

import tensorforge

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.ir import GraphError  # noqa: E402
from tensorforge.graph.reference import run_reference  # noqa: E402


def tensor_type(a: np.ndarray) -> int:
    return helper.np_dtype_to_tensor_dtype(a.dtype)


def node_model(op: str, feeds: dict, consts: dict | None = None, opset: int = 18, outputs=("y",),
               input_order=None, **attrs):
    """(model, feeds): one `op` node reading graph inputs `feeds` and initializers `consts` in
    `input_order` ("" for an absent optional input)."""
    consts = consts or {}
    order = list(input_order) if input_order is not None else [*feeds, *consts]
    node = helper.make_node(op, order, list(outputs), **attrs)
    graph = helper.make_graph(
        [node], op.lower(),
        [helper.make_tensor_value_info(n, tensor_type(a), a.shape) for n, a in feeds.items()],
        [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outputs],
        [numpy_helper.from_array(a, n) for n, a in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return with_output_types(model), feeds


def with_output_types(model):
    """`model` with its graph outputs typed by ONNX shape inference: ONNX Runtime refuses a
    model whose outputs have no element type."""
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


def expected(model, feeds) -> list:
    """ONNX Runtime's outputs; a model it cannot load or run fails the test (no other oracle)."""
    try:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as e:
        pytest.fail(f"ONNX Runtime cannot load the test model: {e}")
    return sess.run(None, feeds)


def ours(model, feeds) -> list:
    return run_reference(from_onnx(model), *feeds.values())


def check(model, feeds, rtol=1e-5, atol=1e-6) -> list:
    got, want = ours(model, feeds), expected(model, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        if g.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, w)
    return got


RNG = np.random.default_rng(7)
UNARY_DOMAINS = {
    "Abs": (-5, 5), "Neg": (-5, 5), "Exp": (-4, 4), "Log": (0.1, 9), "Sqrt": (0, 9), "Reciprocal": (0.5, 4),
    "Floor": (-5, 5), "Ceil": (-5, 5), "Round": (-5, 5), "Sign": (-5, 5), "Sin": (-3, 3), "Cos": (-3, 3),
    "Tan": (-1, 1), "Asin": (-0.9, 0.9), "Acos": (-0.9, 0.9), "Atan": (-5, 5), "Sinh": (-3, 3), "Cosh": (-3, 3),
    "Asinh": (-5, 5), "Acosh": (1.1, 5), "Atanh": (-0.9, 0.9), "Erf": (-3, 3), "IsNaN": (-1, 1), "Relu": (-5, 5),
    "Sigmoid": (-8, 8), "Tanh": (-4, 4), "Softplus": (-30, 30), "Softsign": (-5, 5), "HardSwish": (-6, 6),
    "Mish": (-8, 8),
}


@pytest.mark.parametrize("op", sorted(UNARY_DOMAINS))
def test_unary_float(op):
    lo, hi = UNARY_DOMAINS[op]
    x = RNG.uniform(lo, hi, (2, 3, 4)).astype(np.float32)
    check(*node_model(op, {"x": x}))


@pytest.mark.parametrize("op,dtype", [("Abs", np.int32), ("Neg", np.int64), ("Sign", np.int32),
                                      ("Relu", np.int8), ("BitwiseNot", np.int32), ("BitwiseNot", np.uint8),
                                      ("Abs", np.float64), ("Exp", np.float16)])
def test_unary_other_dtypes(op, dtype):
    x = np.array([[-3, 0, 2], [7, -1, 4]]).astype(dtype) if np.dtype(dtype).kind != "u" else \
        np.array([[3, 0, 2], [255, 1, 4]], dtype)
    check(*node_model(op, {"x": x}), rtol=2e-3)


def test_not_and_isinf():
    check(*node_model("Not", {"x": np.array([True, False])}))
    x = np.array([np.inf, -np.inf, np.nan, 1.0], np.float32)
    for pos, neg in ((1, 1), (1, 0), (0, 1)):
        check(*node_model("IsInf", {"x": x}, detect_positive=pos, detect_negative=neg))


ACTIVATIONS = [
    ("LeakyRelu", 16, {"alpha": 0.2}), ("LeakyRelu", 16, {}), ("Elu", 22, {"alpha": 0.5}), ("Selu", 22, {}),
    ("Selu", 22, {"alpha": 1.5, "gamma": 2.0}), ("Celu", 12, {"alpha": 2.0}), ("HardSigmoid", 22, {}),
    ("HardSigmoid", 22, {"alpha": 0.3, "beta": 0.4}), ("ThresholdedRelu", 22, {"alpha": 0.5}),
    ("Shrink", 9, {"bias": 0.5, "lambd": 1.0}), ("Gelu", 20, {}), ("Gelu", 20, {"approximate": "tanh"}),
    ("Swish", 24, {"alpha": 0.7}), ("Relu", 14, {}),
]


@pytest.mark.parametrize("op,opset,attrs", ACTIVATIONS)
def test_activations(op, opset, attrs):
    x = RNG.normal(0, 3, (3, 4)).astype(np.float32)
    check(*node_model(op, {"x": x}, opset=opset, **attrs))


def test_prelu_slopes():
    x = RNG.normal(0, 3, (2, 3, 4, 4)).astype(np.float32)
    check(*node_model("PRelu", {"x": x, "slope": RNG.random((3, 1, 1)).astype(np.float32)}, opset=16))
    check(*node_model("PRelu", {"x": x}, {"slope": RNG.random((4,)).astype(np.float32)}, opset=16))
    # A 1-D per-channel slope that only matches axis 1: aligned by the converter.
    slope = np.array([0.1, 0.2, 0.3], np.float32)
    model, feeds = node_model("PRelu", {"x": x}, {"slope": slope}, opset=16)
    (got,) = ours(model, feeds)
    np.testing.assert_allclose(got, np.where(x > 0, x, x * slope.reshape(3, 1, 1)), rtol=1e-6)


BINARY = ["Add", "Sub", "Mul", "Div", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"]


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
@pytest.mark.parametrize("op", BINARY)
def test_binary_broadcasting(op, dtype):
    a = RNG.integers(-9, 9, (2, 3, 4)).astype(dtype)
    b = RNG.integers(1, 5, (3, 1)).astype(dtype) * np.where(RNG.random((3, 1)) > 0.5, 1, -1).astype(dtype)
    check(*node_model(op, {"a": a, "b": b}))


@pytest.mark.parametrize("fmod,dtype", [(0, np.int32), (1, np.int32), (0, np.int64), (1, np.float32),
                                        (1, np.float64), (0, np.uint8)])
def test_mod(fmod, dtype):
    a = np.array([[5, -5, 7, -7, 0, 3]], dtype=np.int64)
    b = np.array([[3], [-3], [2]], dtype=np.int64)
    if np.dtype(dtype).kind == "u":
        a, b = np.abs(a), np.abs(b)
    check(*node_model("Mod", {"a": a.astype(dtype), "b": b.astype(dtype)}, fmod=fmod))


@pytest.mark.parametrize("base,exponent", [(np.float32, np.float32), (np.float32, np.int64), (np.int32, np.int32),
                                           (np.int64, np.int64), (np.int32, np.float32), (np.float64, np.int32)])
def test_pow_mixed_dtypes(base, exponent):
    a = np.array([[1, 2, 3, 4]], np.float64).astype(base)
    b = np.array([[0], [1], [2], [3]], np.float64).astype(exponent)
    check(*node_model("Pow", {"a": a, "b": b}, opset=15))


def test_logic_and_bitwise():
    p, q = np.array([[True, False, True]]), np.array([[True], [False]])
    for op in ("And", "Or", "Xor"):
        check(*node_model(op, {"a": p, "b": q}))
    a, b = np.array([[12, -7, 255, 0]], np.int32), np.array([[10], [-1], [6]], np.int32)
    for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor"):
        check(*node_model(op, {"a": a, "b": b}))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint32, np.uint64])
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bitshift(direction, dtype):
    x, s = np.array([16, 4, 1, 255], dtype), np.array([1, 2, 3, 7], dtype)
    check(*node_model("BitShift", {"x": x, "s": s}, opset=11, direction=direction))


@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Mean"])
def test_variadic(op):
    feeds = {"a": RNG.normal(size=(2, 3)).astype(np.float32), "b": RNG.normal(size=(3,)).astype(np.float32),
             "c": RNG.normal(size=(2, 1)).astype(np.float32)}
    check(*node_model(op, feeds, opset=13))
    check(*node_model(op, {"a": feeds["a"]}, opset=13))


def test_where():
    cond = np.array([[True, False, True]])
    check(*node_model("Where", {"c": cond, "x": np.arange(6, dtype=np.int64).reshape(2, 3),
                                "other": np.array(-1, np.int64)}, opset=16))


def test_clip_forms():
    x = RNG.normal(0, 3, (3, 4)).astype(np.float32)
    check(*node_model("Clip", {"x": x}, opset=6, min=-1.0, max=2.0))
    check(*node_model("Clip", {"x": x}, opset=6, max=2.0))
    lo, hi = np.array(-1.5, np.float32), np.array(0.5, np.float32)
    model, feeds = node_model("Clip", {"x": x}, {"lo": lo, "hi": hi}, opset=13)
    node = from_onnx(model).nodes[0]
    assert node.op == "clip" and node.attrs == {"min": -1.5, "max": 0.5} and node.inputs[1:] == (None, None)
    check(model, feeds)
    check(*node_model("Clip", {"x": x, "lo": lo, "hi": hi}, opset=13))          # bounds computed at run time
    check(*node_model("Clip", {"x": x, "hi": hi}, opset=13, input_order=["x", "", "hi"]))
    check(*node_model("Clip", {"x": x}, opset=13))
    xi = np.array([-300, -5, 0, 5, 300], np.int32)
    check(*node_model("Clip", {"x": xi}, {"lo": np.array(-10, np.int32), "hi": np.array(10, np.int32)}, opset=13))


CAST_INPUTS = {   # values whose conversion is defined (no out-of-range float -> integer)
    np.float32: np.array([[0, 1.5, -2.7, 100.25, 3]], np.float32),
    np.int64: np.array([[0, 1, -2, 2049, 65000]], np.int64),
    np.int32: np.array([[0, 1, 255, 256, -300]], np.int32),
    np.bool_: np.array([[True, False, True]]),
}


@pytest.mark.parametrize("to,src", [(TensorProto.INT32, np.float32), (TensorProto.FLOAT16, np.int64),
                                    (TensorProto.BOOL, np.float32), (TensorProto.UINT8, np.int32),
                                    (TensorProto.DOUBLE, np.bool_), (TensorProto.INT8, np.int64)])
@pytest.mark.parametrize("opset", [13, 19, 21])
def test_cast(to, src, opset):
    check(*node_model("Cast", {"x": CAST_INPUTS[src]}, opset=opset, to=to))


def test_old_opset_forms():
    model, feeds = node_model("Cast", {"x": np.array([1.5, -2.5], np.float64)}, opset=5, to="FLOAT")
    (got,) = ours(model, feeds)
    assert got.dtype == np.float32
    x = np.array([np.inf, -np.inf, 1.0], np.float32)        # Clip-6 defaults to +-FLT_MAX
    (got,) = ours(*node_model("Clip", {"x": x}, opset=6, min=0.0))
    np.testing.assert_array_equal(got, [np.finfo(np.float32).max, 0.0, 1.0])


def test_cast_like_identity_dropout():
    x, like = RNG.normal(size=(2, 3)).astype(np.float32), np.zeros((1,), np.float16)
    check(*node_model("CastLike", {"x": x, "like": like}, opset=19), rtol=1e-3)
    check(*node_model("Identity", {"x": x}, opset=16))
    check(*node_model("Dropout", {"x": x}, opset=13, outputs=("y", "mask")))
    # Opset 10 leaves the inference-mode mask unstated; ONNX Runtime's kernel returns all False,
    # later opsets (and tensorforge for every opset) all True.  The data output must match.
    model, feeds = node_model("Dropout", {"x": x}, opset=10, ratio=0.3, outputs=("y", "mask"))
    (y, mask), (want_y, _) = ours(model, feeds), expected(model, feeds)
    np.testing.assert_array_equal(y, want_y)
    assert mask.dtype == np.bool_ and mask.all()
    check(*node_model("Dropout", {"x": x}, {"r": np.array(0.5, np.float32), "t": np.array(False)}, opset=13,
                      outputs=("y", "mask")))
    model, feeds = node_model("Dropout", {"x": x}, opset=7, outputs=("y", "mask"))
    y, mask = ours(model, feeds)
    np.testing.assert_array_equal(y, x)
    assert mask.dtype == np.float32 and (mask == 1).all()


def test_legacy_broadcast_with_axis():
    a = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    b = RNG.normal(size=(3,)).astype(np.float32)
    model, feeds = node_model("Add", {"a": a}, {"b": b}, opset=6, broadcast=1, axis=1)
    (got,) = ours(model, feeds)
    np.testing.assert_allclose(got, a + b.reshape(3, 1))
    model, feeds = node_model("Mul", {"a": a, "b": b}, opset=6, broadcast=1, axis=1)
    with pytest.raises(NotImplementedError, match="broadcast=1 with axis=1 is only supported when B is a constant"):
        from_onnx(model)


def test_errors_name_the_node_and_the_problem():
    x = np.ones((2, 2), np.float32)
    with pytest.raises(NotImplementedError, match="element type COMPLEX64 is not supported"):
        from_onnx(node_model("Cast", {"x": x}, to=TensorProto.COMPLEX64)[0])
    with pytest.raises(GraphError, match="gelu: approximate must be 'none' or 'tanh'"):
        from_onnx(node_model("Gelu", {"x": x}, opset=20, approximate="exact")[0])
    with pytest.raises(GraphError, match="fmod must be 0 or 1"):
        from_onnx(node_model("Mod", {"a": x, "b": x}, fmod=2)[0])
    with pytest.raises(GraphError, match="direction must be 'LEFT' or 'RIGHT'"):
        from_onnx(node_model("BitShift", {"a": x.astype(np.uint8), "b": x.astype(np.uint8)}, direction="UP")[0])
    with pytest.raises(GraphError, match="input 1 has dtype int32 but input 0 has float32"):
        from_onnx(node_model("Add", {"a": x, "b": x.astype(np.int32)})[0])
    # training_mode given at run time: the staged model reads it when called
    staged = tensorforge.compile(from_onnx(node_model("Dropout", {"x": x, "r": np.array(0.5, np.float32),
                                                                 "t": np.array(True)}, opset=13)[0]))
    np.testing.assert_array_equal(staged(x, np.array(0.5, np.float32), np.array(False))[0], x)
    dropped = staged(x, np.array(0.5, np.float32), np.array(True))[0]     # kept values scaled by 2
    assert set(np.unique(dropped)) <= {0.0, 2.0}
