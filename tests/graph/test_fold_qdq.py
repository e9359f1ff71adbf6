"""graph/passes/fold_qdq: QDQ pairs around conv / dense / matmul become integer products with a
requantizing epilogue; models quantized by ONNX Runtime's quantize_static then run in integers
and agree with ONNX Runtime's run of the same file."""
from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from qdq_models import attention, cnn, input_residual, mlp, mobile, projection, quantized, residual  # noqa: E402

import tensorforge  # noqa: E402
from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.passes.fold_qdq import fold_qdq  # noqa: E402
from tensorforge.graph.pipeline import optimize  # noqa: E402
from tensorforge.testing.oracles import ort_int8_products_exact  # noqa: E402


def _ort(path_or_model, x: np.ndarray) -> np.ndarray:
    """ONNX Runtime's output; where its integer products are not exact (testing/oracles.py),
    with its graph optimizations off, so the QDQ pairs run as written (float products between
    exact quantize and dequantize steps) instead of fused into its int8 kernels."""
    import onnxruntime as ort
    data = path_or_model if isinstance(path_or_model, str) else path_or_model.SerializeToString()
    options = ort.SessionOptions()
    if not ort_int8_products_exact():
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def _within_one_step(got: np.ndarray, want: np.ndarray, step: float) -> float:
    return float(np.mean(np.abs(got.astype(np.float64) - want) <= step * 1.0001))


def _output_step(path: str) -> float:
    """The scale of the model's last DequantizeLinear (one quantization step of the output)."""
    model = onnx.load(path)
    last = [n for n in model.graph.node if n.op_type == "DequantizeLinear"][-1]
    init = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    return float(init[last.input[1]])


@pytest.mark.parametrize("make, shape, ops", [
    (cnn, (1, 3, 16, 16), ["conv_integer", "conv_integer", "matmul_integer"]),
    (mlp, (4, 32), ["matmul_integer"] * 3),
])
def test_quantize_static_model_matches_onnx_runtime(tmp_path, make, shape, ops):
    path = quantized(make(), tmp_path, shape)
    graph = from_onnx(path)
    assert [n.op for n in fold_qdq(graph).nodes if n.op.endswith("_integer")] == ops
    # (on a CPU with an int8 dot-product unit, alter_layout_int8 then packs them for it)
    assert not any(n.op in ("conv2d", "dense", "matmul") for n in optimize(graph, "c").nodes)
    model = tensorforge.compile(graph, target="c")
    step = _output_step(path)
    for seed in range(3):
        x = np.random.default_rng(100 + seed).standard_normal(shape).astype(np.float32)
        got, want = model(x)[0], _ort(path, x)
        assert _within_one_step(got, want, step) >= 0.99


def _qdq_conv_relu(zy: int = 7):
    """Q -> DQ -> Conv(DQ(int8 weight), bias) -> Relu -> Q -> DQ, written by hand (Relu kept)."""
    rng = np.random.default_rng(5)
    inits = [
        numpy_helper.from_array(np.array(0.05, np.float32), "sx"), numpy_helper.from_array(np.array(128, np.uint8), "zx"),
        numpy_helper.from_array(rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8), "wq"),
        numpy_helper.from_array(np.array([0.01, 0.02, 0.015, 0.03], np.float32), "sw"),
        numpy_helper.from_array(np.zeros(4, np.int8), "zw"),
        numpy_helper.from_array(np.array([0.3, -0.2, 0.1, 0.0], np.float32), "b"),
        numpy_helper.from_array(np.array(0.1, np.float32), "sy"), numpy_helper.from_array(np.array(zy, np.uint8), "zy"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
        helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"], axis=0),
        helper.make_node("Conv", ["xd", "wd", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("QuantizeLinear", ["r", "sy", "zy"], ["yq"]),
        helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 3, 6, 6))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 4, 6, 6))], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_fold_structure_with_relu():
    graph = from_onnx(_qdq_conv_relu())
    assert [n.op for n in graph.nodes] == ["quantize_linear", "dequantize_linear", "dequantize_linear", "conv2d",
                                           "add", "relu", "quantize_linear", "dequantize_linear"]
    folded = fold_qdq(graph)
    assert [n.op for n in folded.nodes] == ["quantize_linear", "conv_integer", "add", "requantize", "maximum",
                                            "dequantize_linear"]
    conv = folded.nodes[1]
    assert conv.inputs[0] is graph.nodes[0].outputs[0]                  # reads the quantized input
    assert folded.params[conv.inputs[1]].dtype == np.int8
    bias = folded.params[folded.nodes[2].inputs[1]]
    np.testing.assert_array_equal(bias.reshape(-1), np.rint(np.array([0.3, -0.2, 0.1, 0.0], np.float32)
                                                            / (np.float32(0.05) * np.array([0.01, 0.02, 0.015, 0.03],
                                                                                           np.float32))))
    assert folded.nodes[3].attrs["dtype"] == "uint8"


@pytest.mark.parametrize("zy", [0, 7])
def test_relu_chain_matches_onnx_runtime(zy):
    model = _qdq_conv_relu(zy)
    x = np.random.default_rng(1).standard_normal((1, 3, 6, 6)).astype(np.float32) * 2
    got = tensorforge.compile(from_onnx(model), target="c")(x)[0]
    want = _ort(model, x)
    assert _within_one_step(got, want, 0.1) >= 0.99


def test_unfoldable_chain_stays_float():
    """A product whose output also feeds another node keeps its float form."""
    model = _qdq_conv_relu()
    model.graph.node.append(helper.make_node("Neg", ["c"], ["n"]))
    model.graph.output.append(helper.make_tensor_value_info("n", TensorProto.FLOAT, (1, 4, 6, 6)))
    graph = from_onnx(model)
    assert fold_qdq(graph) is graph
    x = np.random.default_rng(2).standard_normal((1, 3, 6, 6)).astype(np.float32)
    import onnxruntime as ort
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = tensorforge.compile(graph, target="c")(x)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-4, atol=1e-4)


def _int8_unit() -> bool:
    from tensorforge.ops import x86_intrin
    return x86_intrin.int8_unit() is not None


@pytest.mark.skipif(not _int8_unit(), reason="this CPU has no int8 dot-product unit (VNNI, AMX)")
def test_convs_chain_in_rows_layout(tmp_path):
    """alter_layout_int8 keeps a conv's product as rows (NHWC): the epilogue runs on the rows, the
    next conv reads them through im2col over the rows image, and the one transpose back to NCHW
    is left for the consumer that needs it (the pooling)."""
    path = quantized(cnn(), tmp_path, (1, 3, 16, 16))
    graph = from_onnx(path)
    nodes = optimize(graph, "c -mcpu=native").nodes
    im2cols = [n for n in nodes if n.op == "im2col"]
    assert [n.attrs.get("image") for n in im2cols] == [None, (1, 16, 16)]
    assert [n.op for n in nodes].count("transpose") == 1
    assert all(n.outputs[0].ndim == 2 for n in nodes if n.op in ("requantize", "maximum"))
    model = tensorforge.compile(graph, target="c -mcpu=native")
    step = _output_step(path)
    for seed in range(3):
        x = np.random.default_rng(200 + seed).standard_normal((1, 3, 16, 16)).astype(np.float32)
        assert _within_one_step(model(x)[0], _ort(path, x), step) >= 0.99


@pytest.mark.skipif(not _int8_unit(), reason="this CPU has no int8 dot-product unit (VNNI, AMX)")
def test_depthwise_convs_run_on_rows(tmp_path):
    """Depthwise convs between int8 products read and write rows too: the whole MobileNet block
    chain has no transpose until the pooling, and agrees with ONNX Runtime."""
    path = quantized(mobile(), tmp_path, (1, 3, 15, 15))
    graph = from_onnx(path)
    ops = [n.op for n in optimize(graph, "c -mcpu=native").nodes]
    assert ops.count("depthwise_integer_rows") == 2 and "conv_integer" not in ops
    assert ops.count("transpose") == 1 and ops.count("im2col") == 1
    model = tensorforge.compile(graph, target="c -mcpu=native")
    step = _output_step(path)
    for seed in range(3):
        x = np.random.default_rng(300 + seed).standard_normal((1, 3, 15, 15)).astype(np.float32)
        assert _within_one_step(model(x)[0], _ort(path, x), step) >= 0.99


@pytest.mark.skipif(not _int8_unit(), reason="this CPU has no int8 dot-product unit (VNNI, AMX)")
@pytest.mark.parametrize("make, shape, pools, transposes", [
    (residual, (1, 3, 16, 16), 1, [(0, 3, 1, 2)]),
    (input_residual, (1, 8, 12, 12), 0, [(0, 2, 3, 1), (0, 3, 1, 2)]),
])
def test_residual_blocks_run_on_rows(tmp_path, make, shape, pools, transposes):
    """The max pool between a dequantize and a quantize of one scale runs on the 8-bit rows; a
    residual operand that has no rows twin (the model's input) is given one, moved between
    layouts as 8-bit data; the only way back to NCHW is before the average pool, as 8-bit data."""
    path = quantized(make(), tmp_path, shape)
    graph = from_onnx(path)
    nodes = optimize(graph, "c -mcpu=native").nodes
    ops = [n.op for n in nodes]
    assert ops.count("max_pool_rows") == pools and "max_pool2d" not in ops and "max_pool2d_rows" not in ops
    assert [n.attrs["perm"] for n in nodes if n.op == "transpose"] == transposes
    assert all(n.inputs[0].dtype == "uint8" for n in nodes if n.op == "transpose")
    model = tensorforge.compile(graph, target="c -mcpu=native")
    step = _output_step(path)
    for seed in range(3):
        x = np.random.default_rng(400 + seed).standard_normal(shape).astype(np.float32)
        assert _within_one_step(model(x)[0], _ort(path, x), step) >= 0.99


@pytest.mark.skipif(not _int8_unit(), reason="this CPU has no int8 dot-product unit (VNNI, AMX)")
def test_im2col_pads_the_depth_of_the_product(tmp_path):
    """A conv whose window is not a multiple of 4 deep (3 channels x 3 x 3 = 27: ResNet's stem has
    147) has im2col write the padded depth (28 columns) itself, so the int8 product reads the
    im2col matrix in place instead of copying it into a padded buffer first."""
    path = quantized(cnn(), tmp_path, (1, 3, 16, 16))
    graph = from_onnx(path)
    first = [n for n in optimize(graph, "c -mcpu=native").nodes if n.op == "im2col"][0]
    assert first.attrs.get("columns") == 28 and first.outputs[0].shape == (256, 28)
    model = tensorforge.compile(graph, target="c -mcpu=native")
    assert "A_pad" not in model.source
    step = _output_step(path)
    for seed in range(3):
        x = np.random.default_rng(500 + seed).standard_normal((1, 3, 16, 16)).astype(np.float32)
        assert _within_one_step(model(x)[0], _ort(path, x), step) >= 0.99


@pytest.mark.skipif(not _int8_unit(), reason="this CPU has no int8 dot-product unit (VNNI, AMX)")
@pytest.mark.skipif(shutil.which("nm") is None, reason="needs binutils' nm to list the library's symbols")
def test_int8_block_helper_is_compiled_apart_from_the_epilogue(tmp_path):
    """The int8 block helper is a function of its own in the library, not inlined into the conv
    kernel: inlined, the requantize (and residual) epilogue's live vectors left the 4x4 VNNI
    block too few registers, and GCC reloaded B before every vpdpbusd (ResNet-18's 3x3 convs at
    ~75% of the int8 peak instead of ~95%)."""
    from tensorforge.ops import x86_intrin
    if x86_intrin.int8_unit() == "amx":
        pytest.skip("AMX blocks are called helpers already")
    path = quantized(residual(), tmp_path, (1, 3, 16, 16))
    model = tensorforge.compile(from_onnx(path), target="c -mcpu=native")
    assert "requantize" in model.source
    symbols = subprocess.run(["nm", model.lib_path], capture_output=True, text=True, check=True).stdout
    assert re.search(r"\btf_vnni\d+_block_\d+x\d+_k\d+\b", symbols), "the int8 block helper was inlined"


@pytest.mark.skipif(not _int8_unit(), reason="this CPU has no int8 dot-product unit (VNNI, AMX)")
def test_projection_onto_an_odd_panel_count_runs_wide_tiles_into_its_output(tmp_path):
    """A product onto 80 columns (5 panels of 16: no width 2..4 divides them) is tiled 5 vectors
    wide, not 1 (one vpdpbusd per load ran at half the unit's speed: a language model's 10000-word
    head), and its epilogue writes the tile straight into the (seq, 1, words) output of the
    reshape after it, with no whole intermediate buffer copied into it."""
    from tensorforge.ops import x86_intrin
    path = quantized(projection(), tmp_path, (12, 1, 24))
    model = tensorforge.compile(from_onnx(path), target="c -mcpu=native")
    kernel = model.source[model.source.index("matmul_integer_vnni("):]
    kernel = kernel[:kernel.index("\n}\n")]
    if x86_intrin.int8_unit() == "avx512vnni":
        assert re.search(r"tensorized: vnni16_block_\d+x5_k", kernel)
    assert "tf_alloc" not in kernel and "free(" not in kernel
    step = _output_step(path)
    for seed in range(3):
        x = np.random.default_rng(600 + seed).standard_normal((12, 1, 24)).astype(np.float32)
        got = model(x)[0]
        assert got.shape == (12, 1, 80)
        assert _within_one_step(got, _ort(path, x), step) >= 0.99


def test_attention_products_of_activations_fold_to_integers(tmp_path):
    """Q K^T and P V, both operands quantized activations, become integer products with a
    requantizing epilogue (no float matmul is left), and on a CPU with VNNI products on the
    unit (b packed at run time), agreeing with ONNX Runtime within one step.  A target without
    the unit keeps them float."""
    from tensorforge.ops import x86_intrin
    from tensorforge.target import Target
    path = quantized(attention(), tmp_path, (1, 24, 32))
    graph = from_onnx(path)
    ops = [n.op for n in fold_qdq(graph).nodes]
    assert "matmul" not in ops and ops.count("matmul_integer") == 6
    assert [n.op for n in fold_qdq(graph, Target.parse("cuda")).nodes].count("matmul") == 2
    native = [n.op for n in optimize(graph, "c -mcpu=native").nodes]
    if x86_intrin.int8_unit() is not None:
        assert native.count("matmul_act_vnni") == 2 and native.count("pack_act_vnni") == 2
        assert "matmul_integer" not in native
    model = tensorforge.compile(graph, target="c -mcpu=native")
    step = _output_step(path)
    for seed in range(3):
        x = np.random.default_rng(700 + seed).standard_normal((1, 24, 32)).astype(np.float32)
        assert _within_one_step(model(x)[0], _ort(path, x), step) >= 0.99


def _activation_matmul(qtype):
    """MatMul of two quantized inputs, a (2, 8, 16) and b (2, 16, 8), quantized again."""
    zero = 128 if qtype == TensorProto.UINT8 else 0
    np_type = np.uint8 if qtype == TensorProto.UINT8 else np.int8
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "s"),
             numpy_helper.from_array(np.array(zero, np_type), "z")]
    nodes = []
    for name in ("a", "b", "y"):
        src = "m" if name == "y" else name
        nodes += [helper.make_node("QuantizeLinear", [src, "s", "z"], [f"{name}_q"]),
                  helper.make_node("DequantizeLinear", [f"{name}_q", "s", "z"], [f"{name}_dq"])]
        if name == "b":
            nodes.append(helper.make_node("MatMul", ["a_dq", "b_dq"], ["m"]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, (2, 8, 16)),
                                           helper.make_tensor_value_info("b", TensorProto.FLOAT, (2, 16, 8))],
                              [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, (2, 8, 8))], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("qtype, folds", [(TensorProto.UINT8, True), (TensorProto.INT8, False)])
def test_activation_product_folds_only_in_the_form_the_unit_runs(qtype, folds):
    """uint8 x 8-bit activations of the same batch axes fold to an integer product; a signed
    left operand, which the unit's u8 x s8 products do not take, stays a float matmul."""
    ops = [n.op for n in fold_qdq(from_onnx(_activation_matmul(qtype))).nodes]
    assert ("matmul_integer" in ops) == folds and ("matmul" in ops) != folds


def _qdq_matmul(k: int, n: int = 24):
    """x (12 x k) -> Q/DQ (uint8) -> MatMul with a per-column int8 weight (k x n) -> Q/DQ."""
    rng = np.random.default_rng(k)
    w = rng.standard_normal((k, n)).astype(np.float32)
    sw = (np.abs(w).max(0) / 127 + 1e-8).astype(np.float32)
    inits = [numpy_helper.from_array(np.float32(0.05), "sx"), numpy_helper.from_array(np.array(128, np.uint8), "zx"),
             numpy_helper.from_array(np.clip(np.round(w / sw), -127, 127).astype(np.int8), "wq"),
             numpy_helper.from_array(sw, "sw"), numpy_helper.from_array(np.zeros(n, np.int8), "zw")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"], axis=1),
             helper.make_node("MatMul", ["xd", "wd"], ["y"]),
             helper.make_node("QuantizeLinear", ["y", "sx", "zx"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "sx", "zx"], ["z"])]
    g = helper.make_graph(nodes, "qdq_matmul", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (12, k))],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, (12, n))], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.skipif(not _int8_unit(), reason="this CPU has no int8 dot-product unit (VNNI, AMX)")
@pytest.mark.parametrize("k, n", [(1, 24), (3, 24), (4, 24), (5, 24), (1, 3), (4, 3)])
def test_product_over_one_group_of_four_features(k, n):
    """A QDQ MatMul over at most 4 features runs on the dot-product unit with one group of four in
    its packed weight: its region's group index k // 4 is 0, like the unit axis before it.
    tensorize pairs the two instead of skipping the group axis, and ignores the declared stride
    of an axis the intrinsic only indexes at 0 (it refused both tiles, with 2 panels and with 1,
    so the compile failed; found by the random-model campaign)."""
    model = _qdq_matmul(k, n)
    compiled = tensorforge.compile(from_onnx(model), target="c -mcpu=native")
    assert any(n.op == "matmul_integer_vnni" for n in optimize(from_onnx(model), "c -mcpu=native").nodes)
    x = np.random.default_rng(0).standard_normal((12, k)).astype(np.float32)
    assert _within_one_step(compiled(x)[0], _ort(model, x), 0.05) == 1.0
