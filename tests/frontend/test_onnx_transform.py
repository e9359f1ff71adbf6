"""ONNX layout converters (Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Expand, Concat, Split,
Tile, Slice, Pad, DepthToSpace, SpaceToDepth, Shape, Size) against ONNX Runtime, across the opsets
where attributes became inputs; errors for run-time shapes and bad attributes."""
from __future__ import annotations

import numpy as np
import pytest

import tensorforge

pytest.importorskip("onnxruntime")
from onnx_transform_helpers import check_ort, i64, one_node, rand  # noqa: E402

from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.ir import GraphError  # noqa: E402

X = rand((2, 3, 4))


@pytest.mark.parametrize("shape, allowzero, opset", [((0, -1), 0, 13), ((4, 0, 2), 0, 14), ((24,), 1, 14)])
def test_reshape(shape, allowzero, opset):
    attrs = {"allowzero": allowzero} if opset >= 14 else {}
    check_ort(*one_node("Reshape", {"x": X}, {"shape": i64(*shape)}, attrs, opset=opset))


def test_flatten_transpose_expand():
    check_ort(*one_node("Flatten", {"x": X}, attrs={"axis": 2}))
    check_ort(*one_node("Flatten", {"x": X}, attrs={"axis": -1}))
    check_ort(*one_node("Transpose", {"x": X}, attrs={"perm": [1, 2, 0]}))
    check_ort(*one_node("Transpose", {"x": X}))
    check_ort(*one_node("Expand", {"x": X[:, :1]}, {"shape": i64(2, 1, 3, 1)}))


@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze_unsqueeze(opset):
    x = rand((1, 3, 1, 2))
    if opset < 13:
        check_ort(*one_node("Squeeze", {"x": x}, attrs={"axes": [0, -2]}, opset=opset))
        check_ort(*one_node("Unsqueeze", {"x": x}, attrs={"axes": [0, 5]}, opset=opset))
    else:
        check_ort(*one_node("Squeeze", {"x": x}, {"axes": i64(0, -2)}, opset=opset))
        check_ort(*one_node("Unsqueeze", {"x": x}, {"axes": i64(0, 5)}, opset=opset))
    check_ort(*one_node("Squeeze", {"x": x}, opset=opset))


def test_concat_tile():
    check_ort(*one_node("Concat", {"a": X, "b": X[:, :1]}, {"c": X[:, 2:]}, attrs={"axis": 1}))
    check_ort(*one_node("Tile", {"x": X}, {"repeats": i64(2, 1, 3)}))


@pytest.mark.parametrize("opset, split, attrs, n", [
    (11, None, {"axis": 1, "split": [1, 2]}, 2),
    (13, i64(3, 0, 1), {"axis": -1}, 3),
    (13, None, {"axis": 2}, 2),
    (18, None, {"axis": 2, "num_outputs": 3}, 3),     # uneven: 2, 1, 1 -> ceil
])
def test_split(opset, split, attrs, n):
    x = rand((2, 3, 4)) if opset != 18 else rand((2, 3, 5))
    consts = {"split": split} if split is not None else None
    check_ort(*one_node("Split", {"x": x}, consts, attrs, opset=opset, n_outputs=n))


def test_slice():
    check_ort(*one_node("Slice", {"x": X}, attrs={"starts": [1, -3], "ends": [100, -1], "axes": [0, 2]}, opset=9))
    check_ort(*one_node("Slice", {"x": X}, {"starts": i64(-1, 2), "ends": i64(-100, 0), "axes": i64(2, 1),
                                            "steps": i64(-2, -1)}))
    check_ort(*one_node("Slice", {"x": X}, {"starts": i64(0), "ends": i64(2 ** 62)}))


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad(mode):
    x = rand((2, 3, 4), "int32") if mode == "edge" else X
    value = np.asarray(2, x.dtype)
    check_ort(*one_node("Pad", {"x": x}, {"pads": i64(0, 2, 1, 1, 1, 3), "value": value}, {"mode": mode}, opset=19))
    check_ort(*one_node("Pad", {"x": x}, {"pads": i64(1, 2), "value": None, "axes": i64(-1)}, {"mode": mode},
                        opset=19))


def test_pad_legacy_attributes():
    check_ort(*one_node("Pad", {"x": X}, attrs={"pads": [0, 1, 0, 0, 2, 1], "value": 3.0}, opset=10))


def test_depth_space_shape_size():
    x = rand((1, 8, 2, 3))
    check_ort(*one_node("DepthToSpace", {"x": x}, attrs={"blocksize": 2, "mode": "CRD"}))
    check_ort(*one_node("DepthToSpace", {"x": x}, attrs={"blocksize": 2}))
    check_ort(*one_node("SpaceToDepth", {"x": rand((1, 2, 4, 6))}, attrs={"blocksize": 2}))
    graph = from_onnx(one_node("Shape", {"x": X}, attrs={"start": 1, "end": -1})[0])
    np.testing.assert_array_equal(graph.params[graph.outputs[0]], [3])
    graph = from_onnx(one_node("Size", {"x": X})[0])
    assert graph.params[graph.outputs[0]].shape == () and graph.params[graph.outputs[0]] == 24


def test_run_time_shape_is_read_when_called():
    model, _ = one_node("Reshape", {"x": X, "shape": i64(4, 6)})
    program = from_onnx(model)
    assert "Reshape shape %shape is computed at run time" in program.reason
    staged = tensorforge.compile(program)
    for shape in ((4, 6), (2, -1), (24, 1)):
        np.testing.assert_array_equal(staged(X, i64(*shape))[0], X.reshape(shape))


def test_non_zero_of_an_input_runs_on_the_host():
    x = (X > 0.5).astype(np.float32)
    staged = tensorforge.compile(from_onnx(one_node("NonZero", {"x": X})[0]))
    np.testing.assert_array_equal(staged(x)[0], np.array(np.nonzero(x), dtype=np.int64))
    graph = from_onnx(one_node("NonZero", {}, {"x": np.array([[0, 3], [4, 0]])})[0])
    np.testing.assert_array_equal(graph.params[graph.outputs[0]], [[0, 1], [1, 0]])


def test_a_host_node_is_not_converted_again_on_every_call():
    """NonZero of data has no static form: after the first call the staged model knows that it
    runs on the host and does not try to convert it again (that try cost 60 us per call)."""
    program = from_onnx(one_node("NonZero", {"x": X})[0])
    staged = tensorforge.compile(program)
    planned = []
    plan = program.plan
    program.plan = lambda start, env, bound: planned.append(start) or plan(start, env, bound)
    rng = np.random.default_rng(0)
    for _ in range(4):
        x = (rng.random(X.shape) > 0.5).astype(np.float32)
        np.testing.assert_array_equal(staged(x)[0], np.array(np.nonzero(x), dtype=np.int64))
    assert planned == [0]


def test_a_repeated_node_runs_once():
    """Exporters write torch.nonzero(mask) twice where a module selects with the mask and returns
    its indices too: the repeat is dropped (its readers take the first's output), so the host op
    runs once and the nodes after it make one stretch; a repeat that is a graph output stays one.
    Results against ONNX Runtime."""
    from onnx import TensorProto, helper
    nodes = [helper.make_node("Greater", ["x", "zero"], ["mask"]),
             helper.make_node("NonZero", ["mask"], ["nz1"]),
             helper.make_node("Transpose", ["nz1"], ["idx"]),
             helper.make_node("GatherND", ["x", "idx"], ["picked"]),
             helper.make_node("Exp", ["picked"], ["e1"]),
             helper.make_node("NonZero", ["mask"], ["nz2"]),
             helper.make_node("Exp", ["picked"], ["e2"]),
             helper.make_node("Add", ["e1", "e2"], ["sum"])]
    graph = helper.make_graph(nodes, "repeats", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                              [helper.make_tensor_value_info("sum", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("nz2", TensorProto.INT64, None)],
                              [helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    program = from_onnx(model)
    ops = [n.op_type for n in program.nodes]
    assert ops.count("NonZero") == 1 and ops.count("Exp") == 1 and ops.count("Identity") == 1
    staged = tensorforge.compile(program)
    hosts = []
    run_host = staged._host
    staged._host = lambda prog, k, env: hosts.append(k) or run_host(prog, k, env)
    import onnxruntime as ort
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    for _ in range(3):
        x = rng.standard_normal((3, 4)).astype(np.float32)
        for got, want in zip(staged(x), session.run(None, {"x": x})):
            np.testing.assert_allclose(got, want, rtol=1e-6)
    assert len(hosts) == 3


@pytest.mark.parametrize("op_type, consts, attrs, message", [
    ("Reshape", {"shape": i64(5, -1)}, {}, "cannot reshape"),
    ("Split", {"split": i64(1, 1)}, {"axis": 1}, "add up"),
    ("Transpose", None, {"perm": [0, 1]}, "not a permutation"),
    ("DepthToSpace", None, {"blocksize": 2, "mode": "XYZ"}, "DCR or CRD"),
])
def test_bad_attributes(op_type, consts, attrs, message):
    x = rand((1, 4, 2, 2)) if op_type == "DepthToSpace" else X
    model, _ = one_node(op_type, {"x": x}, consts, attrs, n_outputs=2 if op_type == "Split" else 1)
    with pytest.raises(GraphError, match=message):
        from_onnx(model)
