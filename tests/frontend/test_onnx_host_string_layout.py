"""Layout ops on string tensors run on the host by moving element numbers through the usual
converter: compared with the same NumPy operation on the strings."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx_host_helpers import ML, assert_strings_equal, make_model, run, strings

import tensorforge
from tensorforge.frontend import from_onnx

S, I64 = TensorProto.STRING, TensorProto.INT64
WORDS = strings(*[f"w{k}é" for k in range(24)], shape=(2, 3, 4))


@pytest.mark.parametrize("nodes,feeds,expected", [
    ([helper.make_node("Reshape", ["x", "s"], ["y"])], {"s": np.array([4, 0, -1])}, WORDS.reshape(4, 3, 2)),
    ([helper.make_node("Flatten", ["x"], ["y"], axis=2)], {}, WORDS.reshape(6, 4)),
    ([helper.make_node("Transpose", ["x"], ["y"], perm=[2, 0, 1])], {}, WORDS.transpose(2, 0, 1)),
    ([helper.make_node("Unsqueeze", ["x", "a"], ["y"])], {"a": np.array([0, -1])}, WORDS[None, ..., None]),
    ([helper.make_node("Gather", ["x", "i"], ["y"], axis=2)], {"i": np.array([[3, -4], [1, 1]])},
     np.take(WORDS, [[3, 0], [1, 1]], axis=2)),
    ([helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1)], {"i": np.zeros((2, 2, 4), np.int64)},
     np.take_along_axis(WORDS, np.zeros((2, 2, 4), np.int64), axis=1)),
    ([helper.make_node("Slice", ["x", "b", "e", "a", "st"], ["y"])],
     {"b": np.array([-1, 0]), "e": np.array([-100, 3]), "a": np.array([2, 1]), "st": np.array([-2, 2])},
     WORDS[:, 0:3:2, ::-2]),
    ([helper.make_node("Expand", ["x", "s"], ["y"])], {"s": np.array([3, 1, 1, 1])},
     np.broadcast_to(WORDS, (3, 2, 3, 4))),
    ([helper.make_node("Tile", ["x", "r"], ["y"])], {"r": np.array([1, 2, 1])}, np.tile(WORDS, (1, 2, 1))),
    ([helper.make_node("Concat", ["x", "x"], ["y"], axis=-1)], {}, np.concatenate([WORDS, WORDS], axis=-1)),
])
def test_layout_op_on_strings(nodes, feeds, expected):
    out = run(nodes, {"x": WORDS, **feeds}, {"y": S})[0]
    assert_strings_equal(out, np.ascontiguousarray(expected))


def test_squeeze_axes_as_attribute_and_as_input():
    x = strings("a", "b", shape=(1, 2, 1))
    old = run([helper.make_node("Squeeze", ["x"], ["y"], axes=[0])], {"x": x}, {"y": S}, opsets={"": 11})[0]
    assert_strings_equal(old, strings("a", "b", shape=(2, 1)))
    new = run([helper.make_node("Squeeze", ["x"], ["y"])], {"x": x}, {"y": S}, opsets={"": 13})[0]
    assert_strings_equal(new, strings("a", "b"))


def test_where_and_concat_number_several_string_inputs():
    cond = np.array([[True, False], [False, True]])
    a, b = strings("a", "b", "c", "d", shape=(2, 2)), strings("X", "Y", shape=(1, 2))
    out = run([helper.make_node("Where", ["c", "a", "b"], ["y"])], {"c": cond, "a": a, "b": b}, {"y": S})[0]
    assert_strings_equal(out, np.array([["a", "Y"], ["X", "d"]], dtype=object))
    out = run([helper.make_node("Concat", ["a", "b"], ["y"], axis=0)], {"a": a, "b": b}, {"y": S})[0]
    assert_strings_equal(out, np.array([["a", "b"], ["c", "d"], ["X", "Y"]], dtype=object))


def test_shape_and_size_of_strings():
    shape = run([helper.make_node("Shape", ["x"], ["y"], start=1)], {"x": WORDS}, {"y": I64})[0]
    np.testing.assert_array_equal(shape, [3, 4])
    size = run([helper.make_node("Size", ["x"], ["y"])], {"x": WORDS}, {"y": I64})[0]
    assert int(size) == 24


def test_pipeline_reshapes_strings_before_encoding_and_takes_other_shapes():
    """A converter-style pipeline: [N, 1] strings -> Reshape [-1] -> LabelEncoder -> Mul (compiled)."""
    nodes = [helper.make_node("Reshape", ["x", "flat"], ["v"]),
             helper.make_node("LabelEncoder", ["v"], ["ids"], domain=ML, keys_strings=["a", "b"],
                              values_int64s=[1, 2], default_int64=0),
             helper.make_node("Mul", ["ids", "ten"], ["y"])]
    model = tensorforge.compile(from_onnx(make_model(
        nodes, {"x": strings("a", "b", "z", shape=(3, 1))}, {"y": I64}, opsets={ML: 2},
        initializers={"flat": np.array([-1]), "ten": np.array(10)}, dims={"x": ["N", 1]})))
    np.testing.assert_array_equal(model(strings("a", "b", "z", shape=(3, 1)))[0], [10, 20, 0])
    np.testing.assert_array_equal(model(strings("b", "b", "a", "q", "a", shape=(5, 1)))[0], [20, 20, 10, 0, 10])


def test_layout_op_on_a_sequence_is_refused_clearly():
    nodes = [helper.make_node("SequenceConstruct", ["x"], ["s"]), helper.make_node("Reshape", ["s", "r"], ["y"])]
    with pytest.raises(NotImplementedError, match=r"Reshape\) reads a value that is not a numeric tensor \(list\)"):
        run(nodes, {"x": np.zeros(2, np.float32), "r": np.array([2])}, {"y": TensorProto.FLOAT})
