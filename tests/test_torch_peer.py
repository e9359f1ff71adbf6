"""benchmarks/torch_peer.py: the PyTorch peer of the end-to-end benchmark computes what ONNX
Runtime computes, for every zoo model, for the attribute values its converters implement and for
what exporters write around them in real models (shape arithmetic, masks, pads, resizes), and
names the op, node and opset of anything it does not implement."""
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch peer runs models in PyTorch")
ort = pytest.importorskip("onnxruntime", reason="the torch peer is checked against ONNX Runtime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tensorforge.testing import models  # noqa: E402

PEER_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "torch_peer.py"
RTOL = ATOL = 1e-4


def _load_peer():
    """benchmarks/ is not a package; load the file as the module e2e.py imports."""
    spec = importlib.util.spec_from_file_location("torch_peer", PEER_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["torch_peer"] = module          # dataclasses look their module up while it runs
    spec.loader.exec_module(module)
    return module


tp = _load_peer()


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _assert_matches_ort(model, feeds):
    module = tp.to_torch(model)
    inputs = [torch.from_numpy(feeds[n]) for n in module.input_names]
    with torch.inference_mode():
        got = [t.numpy() for t in module(*inputs)]
    expected = _ort(model, feeds)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL)


# -- the zoo ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", models.NAMES)
def test_zoo_model_matches_onnxruntime(name):
    model, feeds = models.get(name)
    _assert_matches_ort(model, feeds)


@pytest.mark.parametrize("name, mode", [("lstm_lm", "jit.freeze"), ("bert_encoder", "jit.freeze"),
                                        ("dcgan_generator", "jit.freeze"), ("dqn", "eager+channels_last"),
                                        ("dqn", "jit.optimize_for_inference+channels_last")])
def test_variants_match_onnxruntime(name, mode):
    """Freezing folds batch norm and constants, channels_last changes memory order; the result
    must still be the model's."""
    model, feeds = models.get(name)
    inputs = [torch.from_numpy(feeds[n]) for n in tp.to_torch(model).input_names]
    fn = tp.variant(model, inputs, mode)
    with torch.inference_mode():
        got = fn(*inputs)
    for g, e in zip(got, _ort(model, feeds)):
        np.testing.assert_allclose(g.numpy(), e, rtol=RTOL, atol=ATOL)


def test_channels_last_modes_only_for_4d_models():
    assert tp.modes_for(models.get("dqn")[0]) == [*tp.MODES, *(m + "+channels_last" for m in tp.MODES)]
    assert tp.modes_for(models.get("bert_encoder")[0]) == list(tp.MODES)


def test_fastest_picks_a_working_mode():
    model, feeds = models.get("dqn")
    found = tp.variants(model, feeds)
    assert "eager" in found.fns and set(found.fns) | set(found.rejected) == set(tp.modes_for(model))
    peer = tp.fastest(found, rounds=1, repeat=2, warmup_s=0.0)
    assert peer.mode in found.fns and set(peer.timings_ms) == set(found.fns)
    np.testing.assert_allclose(peer(*found.inputs)[0].numpy(), _ort(model, feeds)[0], rtol=RTOL, atol=ATOL)


# -- attribute semantics, one node at a time -------------------------------------------------------
def _one_node(op, inputs, inits, opset=17, n_outputs=1, **attrs):
    """A one-node model: `inputs` maps graph-input names to arrays, `inits` initializer names to
    arrays; float outputs of unstated shape (ONNX Runtime infers them).  Returns (model, feeds)."""
    outs = [f"y{k}" for k in range(n_outputs)]
    node = helper.make_node(op, list(inputs) + list(inits), outs, name=f"{op.lower()}_node", **attrs)
    vis = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
           for n, a in inputs.items()]
    outputs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs]
    graph = helper.make_graph([node], op, vis, outputs,
                              [numpy_helper.from_array(a, n) for n, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model, dict(inputs)


def _rand(*shape, seed=0):
    return np.random.default_rng(seed + len(shape)).normal(size=shape).astype(np.float32)


def _cases():
    x = _rand(1, 4, 7, 9)
    x8 = _rand(1, 4, 8, 9, seed=20)     # SAME padding of 1 row: the two auto_pad modes differ
    w = _rand(6, 2, 3, 3, seed=1)
    yield "conv same_upper stride 2 group 2 bias", _one_node(
        "Conv", {"x": x8}, {"w": w, "b": _rand(6, seed=2)}, auto_pad="SAME_UPPER", strides=[2, 2], group=2)
    yield "conv same_lower", _one_node(
        "Conv", {"x": x}, {"w": _rand(6, 4, 2, 4, seed=3)}, auto_pad="SAME_LOWER", strides=[2, 3])
    yield "conv dilated", _one_node(
        "Conv", {"x": x}, {"w": _rand(6, 4, 3, 3, seed=3)}, pads=[2, 1, 2, 1], dilations=[2, 1])
    yield "conv asymmetric pads", _one_node(
        "Conv", {"x": x}, {"w": _rand(6, 4, 3, 2, seed=4)}, pads=[0, 1, 2, 0], strides=[1, 2])
    yield "conv_transpose asymmetric pads output_padding", _one_node(
        "ConvTranspose", {"x": x}, {"w": _rand(4, 3, 4, 4, seed=5)}, strides=[2, 2], pads=[1, 0, 2, 1],
        output_padding=[1, 0])
    yield "conv_transpose group 2 bias", _one_node(
        "ConvTranspose", {"x": x}, {"w": _rand(4, 2, 3, 3, seed=6), "b": _rand(4, seed=7)}, 
        strides=[2, 1], pads=[1, 1, 1, 1], group=2)
    yield "maxpool asymmetric pads", _one_node(
        "MaxPool", {"x": x}, {}, kernel_shape=[3, 2], strides=[2, 2], pads=[0, 1, 1, 0])
    yield "maxpool same_lower", _one_node(
        "MaxPool", {"x": x8}, {}, kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_LOWER")
    yield "global average pool", _one_node("GlobalAveragePool", {"x": x}, {})
    yield "batch norm", _one_node(
        "BatchNormalization", {"x": x}, {"s": _rand(4, seed=8), "b": _rand(4, seed=9), "m": _rand(4, seed=10),
                                         "v": np.abs(_rand(4, seed=11)) + 0.5}, epsilon=1e-3)
    a, b = _rand(5, 3), _rand(4, 5, seed=1)
    yield "gemm transA transB alpha beta", _one_node(
        "Gemm", {"a": a}, {"b": b, "c": _rand(1, 4, seed=2)}, transA=1, transB=1, alpha=0.5, beta=2.0)
    yield "gemm no C", _one_node("Gemm", {"a": _rand(2, 4)}, {"b": _rand(4, 3, seed=3)})
    yield "matmul batched broadcast", _one_node("MatMul", {"a": _rand(2, 1, 3, 4)}, {"b": _rand(5, 4, 2, seed=4)})
    data = _rand(3, 5, 2)
    yield "gather axis 1 negative indices", _one_node(
        "Gather", {"d": data, "i": np.array([[0, -1], [4, -5]], np.int64)}, {}, axis=1)
    yield "reshape 0 and -1", _one_node("Reshape", {"x": x}, {"s": np.array([0, -1, 9], np.int64)})
    yield "flatten axis 0", _one_node("Flatten", {"x": x}, {}, axis=0)
    yield "flatten axis -2", _one_node("Flatten", {"x": x}, {}, axis=-2)
    yield "flatten axis = rank", _one_node("Flatten", {"x": x}, {}, axis=4)
    yield "transpose default perm", _one_node("Transpose", {"x": x}, {})
    yield "squeeze all", _one_node("Squeeze", {"x": _rand(1, 3, 1, 2)}, {})
    yield "squeeze axes opset 11", _one_node("Squeeze", {"x": _rand(1, 3, 1, 2)}, {}, opset=11, axes=[-2])
    yield "softmax opset 11 coerces to 2-d", _one_node("Softmax", {"x": _rand(2, 3, 4)}, {}, opset=11, axis=1)
    yield "softmax axis 1", _one_node("Softmax", {"x": _rand(2, 3, 4)}, {}, axis=1)
    yield "layer norm axis -2", _one_node(
        "LayerNormalization", {"x": _rand(2, 3, 4)}, {"s": _rand(3, 4, seed=5), "b": _rand(3, 4, seed=6)}, 
        axis=-2, epsilon=1e-5)
    yield "layer norm broadcast scale", _one_node(
        "LayerNormalization", {"x": _rand(2, 3, 4)}, {"s": _rand(4, seed=7)}, axis=1)
    yield "elementwise", _one_node("Add", {"x": _rand(2, 3)}, {"c": _rand(3, seed=8)})
    h = 5
    lstm_inits = {"W": _rand(2, 4 * h, 3, seed=9) * 0.5, "R": _rand(2, 4 * h, h, seed=10) * 0.5,
                  "B": _rand(2, 8 * h, seed=11) * 0.5}
    lstm_x = {"x": _rand(4, 2, 3, seed=12)}
    model, feeds = _one_node("LSTM", lstm_x, lstm_inits, n_outputs=3, hidden_size=h,
                             direction="bidirectional")
    node = model.graph.node[0]
    node.input.extend(["", "h0", "c0"])
    model.graph.input.extend([helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 2, h]) for n in ("h0", "c0")])
    feeds.update(h0=_rand(2, 2, h, seed=13), c0=_rand(2, 2, h, seed=14))
    yield "lstm bidirectional initial state, all outputs", (model, feeds)


def _graph(nodes, inputs, inits, opset=17):
    """A model of several nodes whose last output "y" is float (ONNX Runtime infers the rest)."""
    vis = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
           for n, a in inputs.items()]
    graph = helper.make_graph(nodes, "g", vis, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(a, n) for n, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model, dict(inputs)


def _node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, **attrs)


def _exported_cases():
    """What exporters write around the zoo's ops in real models."""
    x = _rand(1, 4, 7, 9)
    ints = lambda *v: np.array(v, np.int64)      # noqa: E731
    yield "cast, shape arithmetic, run-time reshape", _graph(
        [_node("Shape", ["x"], ["s"]), _node("Slice", ["s", "z", "two"], ["s2"]), _node("Concat", ["s2", "m1"], ["t"], axis=0),
         _node("Reshape", ["x", "t"], ["r"]), _node("Cast", ["r"], ["ri"], to=7), _node("Cast", ["ri"], ["y"], to=1)],
        {"x": x * 3}, {"z": ints(0), "two": ints(2), "m1": ints(-1)})
    yield "constant nodes, unsqueeze, concat, expand", _graph(
        [_node("Constant", [], ["c"], value=numpy_helper.from_array(ints(0, 2))),
         _node("Unsqueeze", ["x", "c"], ["u"]), _node("Expand", ["u", "e"], ["v"]),
         _node("Concat", ["v", "v"], ["y"], axis=2)], {"x": _rand(3, 5)}, {"e": ints(2, 3, 1, 5, 1)})
    yield "mask: constant of shape, equal, and, where", _graph(
        [_node("Shape", ["x"], ["s"]), _node("ConstantOfShape", ["s"], ["o"],
                                             value=numpy_helper.from_array(np.array([1], np.int64))),
         _node("Equal", ["o", "m"], ["e"]), _node("GreaterOrEqual", ["x", "zero"], ["g"]), _node("And", ["e", "g"], ["a"]),
         _node("Where", ["a", "x", "neg"], ["y"])],
        {"x": _rand(2, 6), "m": np.array([[1, 0, 1, 1, 0, 1]] * 2, np.int64)},
        {"zero": np.zeros(1, np.float32), "neg": np.full(1, -1e4, np.float32)})
    yield "slice backwards and strided (reflect padding by hand)", _graph(
        [_node("Slice", ["x", "b", "e", "a", "st"], ["r"]), _node("Slice", ["x", "b2", "e2", "a2", "st2"], ["q"]),
         _node("Slice", ["x", "z", "e3", "a", "two"], ["p"]), _node("Concat", ["r", "q", "p"], ["y"], axis=3)],
        {"x": x}, {"b": ints(4), "e": ints(0), "a": ints(3), "st": ints(-1), "b2": ints(0, -1), "e2": ints(100, 0),
                   "a2": ints(2, 3), "st2": ints(1, -3), "z": ints(0), "e3": ints(9), "two": ints(2)})
    yield "split, sub, div, pow, sqrt, sigmoid", _graph(
        [_node("Split", ["x", "sp"], ["p", "q"], axis=2), _node("Sub", ["p", "q"], ["d"]), _node("Pow", ["d", "two"], ["s"]),
         _node("Sqrt", ["s"], ["r"]), _node("Div", ["r", "three"], ["t"]), _node("Sigmoid", ["t"], ["y"])],
        {"x": _rand(1, 3, 8, 5)}, {"sp": ints(4, 4), "two": np.array(2.0, np.float32), "three": np.array(3.0, np.float32)})
    yield "integer division truncates", _graph(
        [_node("Div", ["a", "b"], ["q"]), _node("Cast", ["q"], ["y"], to=1)],
        {"a": np.array([7, -7, 5, -9], np.int64)}, {"b": np.array([2, 2, -3, 4], np.int64)})
    yield "clip, hard sigmoid, hard swish, gelu", _graph(
        [_node("Clip", ["x", "lo", "hi"], ["c"]), _node("HardSigmoid", ["c"], ["h"], alpha=0.3, beta=0.4),
         _node("HardSwish", ["h"], ["w"]), _node("Gelu", ["w"], ["y"], approximate="tanh")],
        {"x": x * 4}, {"lo": np.array(-1.5, np.float32), "hi": np.array(2.0, np.float32)}, opset=20)
    yield "reduce mean (axes attribute), log softmax", _graph(
        [_node("ReduceMean", ["x"], ["m"], axes=[2, 3], keepdims=1), _node("LogSoftmax", ["m"], ["y"], axis=1)],
        {"x": x}, {})
    yield "reduce mean (axes input, opset 18)", _graph(
        [_node("ReduceMean", ["x", "ax"], ["y"], keepdims=0)], {"x": x}, {"ax": ints(-1)}, opset=18)
    yield "average pool, max pool with ceil_mode", _graph(
        [_node("AveragePool", ["x"], ["a"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=0),
         _node("MaxPool", ["a"], ["y"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)], {"x": x}, {})
    yield "pad constant and reflect", _graph(
        [_node("Pad", ["x", "p", "v"], ["c"]), _node("Pad", ["c", "p2"], ["y"], mode="reflect")],
        {"x": x}, {"p": ints(0, 0, 1, 2, 0, 0, 0, 1), "v": np.array(0.5, np.float32), "p2": ints(0, 0, 2, 1, 0, 0, 1, 3)})
    yield "resize nearest and linear", _graph(
        [_node("Resize", ["x", "", "sc"], ["n"], mode="nearest", coordinate_transformation_mode="asymmetric",
               nearest_mode="floor"),
         _node("Resize", ["n", "", "", "sz"], ["y"], mode="linear", coordinate_transformation_mode="half_pixel")],
        {"x": x}, {"sc": np.array([1, 1, 2, 2], np.float32), "sz": ints(1, 4, 10, 31)})
    yield "depth to space DCR and CRD, instance norm", _graph(
        [_node("DepthToSpace", ["x"], ["d"], blocksize=2, mode="DCR"), _node("InstanceNormalization", ["d", "s", "b"], ["n"]),
         _node("Unsqueeze", ["n", "z"], ["u"]), _node("Concat", ["u", "u", "u", "u"], ["c"], axis=0),
         _node("Reshape", ["c", "shp"], ["r"]), _node("DepthToSpace", ["r"], ["y"], blocksize=2, mode="CRD")],
        {"x": _rand(1, 8, 3, 5)}, {"s": _rand(2, seed=3), "b": _rand(2, seed=4), "z": ints(0), "shp": ints(1, 8, 6, 10)})
    yield "a weight computed from constants (folded once)", _graph(
        [_node("Transpose", ["w"], ["wt"], perm=[1, 0]), _node("MatMul", ["x", "wt"], ["y"])],
        {"x": _rand(3, 4)}, {"w": _rand(5, 4, seed=5)})


CASES = dict(_cases())
CASES.update(_exported_cases())


@pytest.mark.parametrize("case", list(CASES))
def test_node_matches_onnxruntime(case):
    model, feeds = CASES[case]
    _assert_matches_ort(model, feeds)


# -- what is not supported -------------------------------------------------------------------------
def test_unsupported_op_is_named_with_node_and_opset():
    model, _ = _one_node("Sin", {"x": _rand(2, 3)}, {})
    with pytest.raises(NotImplementedError, match=r"op\(s\) Sin \(node 'sin_node', opset 17\); supported: .*Conv"):
        tp.to_torch(model)


def test_unsupported_attribute_value_is_named():
    model, _ = _one_node("MaxPool", {"x": _rand(1, 1, 5, 5)}, {}, kernel_shape=[2, 2], auto_pad="WRAP")
    with pytest.raises(NotImplementedError, match=r"MaxPool \(node 'maxpool_node', opset 17\).*auto_pad='WRAP'"):
        tp.to_torch(model)


def test_supported_ops_cover_the_zoos():
    used = {n.op_type for name in models.NAMES for n in models.get(name)[0].graph.node}
    assert used <= set(tp.supported_ops())


# -- the benchmark's column ------------------------------------------------------------------------
@pytest.mark.parametrize("with_torch", [True, False], ids=["torch", "no-torch"])
def test_e2e_benchmark_torch_column(tmp_path, with_torch):
    """benchmarks/e2e.py on the smallest model: the PyTorch column names its mode and ratio, or
    says n/a when torch cannot be imported (a module named torch that fails shadows it)."""
    import os
    import subprocess

    env = dict(os.environ, TENSORFORGE_CACHE_DIR=str(tmp_path / "cache"))
    if not with_torch:
        (tmp_path / "torch.py").write_text("raise ImportError('PyTorch hidden by the test')\n")
        env["PYTHONPATH"] = os.pathsep.join([str(tmp_path)] + [p for p in [env.get("PYTHONPATH")] if p])
    proc = subprocess.run([sys.executable, str(PEER_PATH.parent / "e2e.py"), "--models", "dqn", "--repeat", "1"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    row = next(line for line in proc.stdout.splitlines() if line.startswith("dqn "))
    assert "onnxruntime" in row and "ratio" in row
    if with_torch:
        mode = row.split("torch (", 1)[1].split(")", 1)[0]
        assert mode.removesuffix("+channels_last") in tp.MODES and "tf/torch" in row
        assert "geometric mean ratio tensorforge/torch, 1 thread(s)" in proc.stdout
    else:
        assert row.endswith("torch n/a")
        assert "tensorforge/torch" not in proc.stdout
