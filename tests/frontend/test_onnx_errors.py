"""Bad input gives a clear error, never a crash: truncated or foreign files, unsupported ops,
wrong input names/shapes/dtypes, cycles, dynamic shapes."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import tensorforge
from tensorforge.frontend import from_onnx
from tensorforge.frontend.onnx import ModelLoadError, UnsupportedOpsError
from tensorforge.graph.ir import GraphError


def _model(nodes, inputs, outputs, opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def relu_model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    return _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [x], [y])


def test_truncated_file(tmp_path):
    data = relu_model().SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelLoadError, match="not a valid ONNX model"):
        from_onnx(str(path))


def test_not_onnx(tmp_path):
    path = tmp_path / "notes.onnx"
    path.write_text("hello, this is not a model")
    with pytest.raises(ModelLoadError, match="not a valid ONNX model"):
        from_onnx(str(path))


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such model file"):
        from_onnx(str(tmp_path / "nothing.onnx"))


def test_weights_in_an_external_data_file(tmp_path, monkeypatch):
    """torch.onnx.export writes NAME.onnx.data beside NAME.onnx: from_onnx(path) reads it from the
    model's folder, whatever the working directory; the bytes alone cannot find it."""
    import onnx
    w = np.random.default_rng(0).standard_normal((3, 4)).astype("float32")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    model = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [x], [y])
    model.graph.initializer.append(onnx.numpy_helper.from_array(w, "w"))
    folder = tmp_path / "models"
    folder.mkdir()
    onnx.save_model(model, str(folder / "m.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="m.onnx.data", size_threshold=0)
    monkeypatch.chdir(tmp_path)
    xv = np.ones((2, 3), "float32")
    np.testing.assert_allclose(tensorforge.compile(from_onnx(str(folder / "m.onnx")))(xv)[0], xv @ w, rtol=1e-5)
    with pytest.raises(ModelLoadError, match="external files; pass the model's path"):
        from_onnx((folder / "m.onnx").read_bytes())
    (folder / "m.onnx.data").unlink()
    with pytest.raises(ModelLoadError, match="cannot read its external tensor data"):
        from_onnx(str(folder / "m.onnx"))


def test_unsupported_ops_listed_together():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="ok"),
             helper.make_node("FooBar", ["a"], ["b"], name="weird1", domain="com.example"),
             helper.make_node("NoSuchOp", ["b"], ["c"], name="strs"),
             helper.make_node("FooBar", ["c"], ["y"], name="weird2", domain="com.example")]
    m = _model(nodes, [x], [y])
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(UnsupportedOpsError) as err:
        from_onnx(m)
    text = str(err.value)
    assert isinstance(err.value, NotImplementedError)
    assert "FooBar" in text and "weird1" in text and "weird2" in text
    assert "NoSuchOp (opset 17)" in text and "strs" in text


def test_cycle_in_onnx_graph():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="n1"),
             helper.make_node("Relu", ["a"], ["b"], name="n2"),
             helper.make_node("Relu", ["b"], ["y"], name="n3")]
    with pytest.raises(GraphError, match="n1 .* reads 'b', which is never defined"):
        from_onnx(_model(nodes, [x], [y]))


def test_symbolic_batch_takes_any_batch_and_checks_symbols():
    """A symbolic dimension stays a symbol: the staged model takes any batch, checks that a
    symbol has one value across the inputs, and `shapes=` still gives a static Graph.  The
    stretch is one element-wise op: compiled for the first batch, then once with a shape
    variable for the batch (shape_generic.py), which serves every other batch."""
    from tensorforge.frontend.onnx_program import OnnxProgram
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])
    m = _model([helper.make_node("Add", ["x", "z"], ["y"])], [x, z], [y])
    program = from_onnx(m)
    assert isinstance(program, OnnxProgram) and "symbolic dimensions [batch, 3]" in program.reason
    model = tensorforge.compile(program)
    for batch in (1, 4, 2, 4):
        a, b = np.random.rand(batch, 3).astype("float32"), np.random.rand(batch, 3).astype("float32")
        np.testing.assert_allclose(model(a, b)[0], a + b, rtol=1e-6)
    assert model.info["specializations"] == 1 and model.info["shape_generic"]["stretches"] == 1
    with pytest.raises(ValueError, match="input 'z': dimension 0 is batch, which is 2 in input 'x', but 3 here"):
        model(np.zeros((2, 3), "float32"), np.zeros((3, 3), "float32"))
    with pytest.raises(ValueError, match=r"input 'x': expected shape \[batch, 3\], got \(2, 4\)"):
        model(np.zeros((2, 4), "float32"), np.zeros((2, 4), "float32"))
    with pytest.raises(TypeError, match="input 'x': expected dtype float32, got float64"):
        model(np.zeros((2, 3)), np.zeros((2, 3), "float32"))
    g = from_onnx(m, shapes={"x": (4, 3), "z": (4, 3)})
    assert g.inputs[0].shape == (4, 3)


def test_wrong_inputs_to_compiled_model():
    model = tensorforge.compile(from_onnx(relu_model()))
    with pytest.raises(ValueError, match=r"input 'x': expected shape \(2, 3\), got \(3, 2\)"):
        model(np.zeros((3, 2), "float32"))
    with pytest.raises(TypeError, match="input 'x': expected dtype float32, got int64"):
        model(np.zeros((2, 3), "int64"))
    with pytest.raises(TypeError, match=r"unknown input\(s\) \['z'\]"):
        model.run(z=np.zeros((2, 3), "float32"))
    with pytest.raises(TypeError, match="takes 1 input"):
        model()


def test_bad_attribute_names_the_node():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])
    w = helper.make_tensor("w", TensorProto.FLOAT, [1, 1, 3, 3], np.ones(9, "float32"))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="badconv", strides=[0, 1])
    m = helper.make_model(helper.make_graph([node], "g", [x], [y], [w]),
                          opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises((GraphError, ValueError), match="badconv"):
        from_onnx(m)


def test_symbolic_dimensions_named_with_static_ones_as_numbers():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 32, 32])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3, 32, 32])
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [x], [y])
    text = from_onnx(m).reason       # what the command line says when it needs a static graph
    assert "[batch, 3, 32, 32]" in text and "?" not in text
    assert "--shape x=1,3,32,32" in text and "shapes={'x': (1, 3, 32, 32)}" in text


def test_input_without_shape_information_takes_any_shape_not_a_scalar():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [x], [y])
    program = from_onnx(m)
    assert "input x has no shape information" in program.reason
    model = tensorforge.compile(program)
    for shape in ((2, 5), (7,), ()):
        a = np.asarray(np.random.randn(*shape), dtype="float32")
        np.testing.assert_array_equal(model(a)[0], np.maximum(a, 0))
    assert from_onnx(m, shapes={"x": (2, 5)}).inputs[0].shape == (2, 5)
    scalar = helper.make_tensor_value_info("x", TensorProto.FLOAT, [])     # a real scalar still is one
    assert from_onnx(_model([helper.make_node("Relu", ["x"], ["y"])], [scalar], [y])).inputs[0].shape == ()


def test_shape_for_an_unknown_input_names_the_real_ones():
    from tensorforge.frontend.onnx import InputShapeError

    with pytest.raises(InputShapeError, match="shape was given for 'X', which is not an input.*inputs are x"):
        from_onnx(relu_model(), shapes={"X": (2, 3)})


def test_shape_of_the_wrong_rank():
    from tensorforge.frontend.onnx import InputShapeError

    with pytest.raises(InputShapeError, match=r"input x has 2 dimension\(s\) \[2, 3\].*has 1: \(6,\)"):
        from_onnx(relu_model(), shapes={"x": (6,)})


def test_opset_newer_than_the_frontend_knows_warns():
    from tensorforge.frontend.onnx import NEWEST_OPSET

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    with pytest.warns(UserWarning, match=f"opset 99, newer than opset {NEWEST_OPSET}"):
        from_onnx(_model([helper.make_node("Relu", ["x"], ["y"])], [x], [y], opset=99))
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from_onnx(relu_model())                      # opset 17: no warning


def test_staged_model_keeps_the_most_recent_specializations():
    from tensorforge.staged import StagedModel
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 2])
    w = np.array([[1, -1], [0.5, 2]], "float32")
    m = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [x], [y])   # a product: specialized per shape
    m.graph.initializer.append(onnx.numpy_helper.from_array(w, "w"))
    program = from_onnx(m)
    model = StagedModel(program, {"target": "c -O1"}, max_specializations=2, batch_buckets=())
    for n in (2, 3, 4, 3, 2):
        a = np.linspace(-1, 1, 2 * n).astype("float32").reshape(n, 2)
        np.testing.assert_allclose(model(a)[0], a @ w, rtol=1e-6)
    assert model.info["specializations"] == 4 and model.info["evicted"] == 2    # 2 was dropped for 4
    with pytest.raises(ValueError, match="max_specializations must be at least 1"):
        StagedModel(program, {}, max_specializations=0)


def test_specializations_share_the_weights_read_from_the_file():
    """A weight is read from the file once, aligned for the kernels: every specialization of a
    staged model runs on that array, not on a copy of its own (a new sequence length of a
    transformer used to copy its 31 MB embedding table)."""
    import onnx

    from tensorforge.runtime.memory import ALIGN
    w = np.random.default_rng(1).standard_normal((1000, 24)).astype("float32")
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["n"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 24])
    m = _model([helper.make_node("Gather", ["w", "ids"], ["y"])], [ids], [y])
    m.graph.initializer.append(onnx.numpy_helper.from_array(w, "w"))
    program = from_onnx(m)
    weight = program.initializers["w"]
    assert weight.ctypes.data % ALIGN == 0
    model = tensorforge.compile(program, target="c -O1", shape_generic=False)    # a specialization per length
    for n in (3, 5):
        idx = np.arange(n, dtype=np.int64) * 7
        np.testing.assert_array_equal(model(idx)[0], w[idx])
    executors = [entry[1].executor for entry in model._compiled.entries.values() if entry[1] is not None]
    assert len(executors) == 2
    for ex in executors:
        assert any(np.shares_memory(p, weight) for p in ex.params.values())


@pytest.mark.parametrize("batch", [2, "b"])
def test_output_listed_twice_is_returned_at_both_places(batch):
    """torch.onnx.export of a forward that returns one tensor twice lists its name twice among the
    graph outputs; the compile used to stop on the clashing names.  A graph input listed twice
    (and once more after a computed output) works too."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 3])
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [x],
                   [y, y, helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3]), x])
    compiled = tensorforge.compile(from_onnx(model))
    for rows in ((2, 5) if batch == "b" else (2,)):
        a = np.random.default_rng(rows).standard_normal((rows, 3)).astype(np.float32)
        outs = compiled(a)
        assert len(outs) == 4
        for got, want in zip(outs, (np.maximum(a, 0), np.maximum(a, 0), a, a)):
            np.testing.assert_array_equal(got, want)
