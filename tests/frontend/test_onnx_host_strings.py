"""String ops on the host: models built with onnx.helper, converted, compiled and called;
results compared with values computed by hand or with Python's str methods."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx_host_helpers import assert_strings_equal, make_model, run, strings

import tensorforge
from tensorforge.frontend import from_onnx
from tensorforge.frontend.onnx_program import OnnxProgram

S, B, I64 = TensorProto.STRING, TensorProto.BOOL, TensorProto.INT64


def normalizer(x, **attrs):
    return run([helper.make_node("StringNormalizer", ["x"], ["y"], **attrs)], {"x": x}, {"y": S},
               opsets={"": 10})[0]


def test_string_normalizer_stopwords_and_case():
    x = strings("Monday", "tuesday", "MONDAY", "wednesday")
    assert_strings_equal(normalizer(x, stopwords=["monday"]), strings("tuesday", "wednesday"))
    assert_strings_equal(normalizer(x, stopwords=["monday"], is_case_sensitive=1),
                         strings("Monday", "tuesday", "MONDAY", "wednesday"))
    assert_strings_equal(normalizer(x, stopwords=["Monday"], is_case_sensitive=1, case_change_action="UPPER"),
                         strings("TUESDAY", "MONDAY", "WEDNESDAY"))
    assert_strings_equal(normalizer(x, case_change_action="LOWER"),
                         strings("monday", "tuesday", "monday", "wednesday"))


def test_string_normalizer_keeps_1xC_and_empties_to_one_string():
    x = strings("a", "B", "c", shape=(1, 3))
    assert_strings_equal(normalizer(x, case_change_action="UPPER"), strings("A", "B", "C", shape=(1, 3)))
    assert_strings_equal(normalizer(x, stopwords=["A", "b", "C"]), strings("", shape=(1, 1)))
    assert_strings_equal(normalizer(strings("x", "x"), stopwords=["x"]), strings(""))
    with pytest.raises(ValueError, match=r"X must have shape \[C\] or \[1, C\], got \[2, 2\]"):
        normalizer(strings("a", "b", "c", "d", shape=(2, 2)))


@pytest.mark.parametrize("delimiter,maxsplit", [(None, None), ("", None), (",", None), (",", 1), (None, 2), ("ab", None)])
def test_string_split_matches_str_split(delimiter, maxsplit):
    x = strings("a,b,,c", "  one two  three ", "", "xabyabz", ",", shape=(5,))
    attrs = {k: v for k, v in (("delimiter", delimiter), ("maxsplit", maxsplit)) if v is not None}
    y, z = run([helper.make_node("StringSplit", ["x"], ["y", "z"], **attrs)], {"x": x}, {"y": S, "z": I64})
    parts = [s.split(delimiter or None, -1 if maxsplit is None else maxsplit) for s in x]
    width = max(len(p) for p in parts)
    assert_strings_equal(y, np.array([p + [""] * (width - len(p)) for p in parts], dtype=object))
    np.testing.assert_array_equal(z, [len(p) for p in parts])
    assert z.dtype == np.int64


def test_string_split_keeps_rank_and_empty_input():
    x = strings("a b", "c", "d e f", "", shape=(2, 2))
    y, z = run([helper.make_node("StringSplit", ["x"], ["y", "z"])], {"x": x}, {"y": S, "z": I64})
    assert y.shape == (2, 2, 3)
    assert y[1, 0].tolist() == ["d", "e", "f"] and y[0, 1].tolist() == ["c", "", ""]
    np.testing.assert_array_equal(z, [[2, 1], [3, 0]])
    y, z = run([helper.make_node("StringSplit", ["x"], ["y", "z"])], {"x": strings()}, {"y": S, "z": I64})
    assert y.shape == (0, 0) and z.shape == (0,)


def test_string_concat_broadcasts_and_keeps_utf8():
    x = strings("ab", "é", "", shape=(3, 1))
    y = strings("1", "ü2", shape=(1, 2))
    out = run([helper.make_node("StringConcat", ["x", "y"], ["z"])], {"x": x, "y": y}, {"z": S})[0]
    assert_strings_equal(out, np.array([["ab1", "abü2"], ["é1", "éü2"], ["1", "ü2"]], dtype=object))
    scalar = run([helper.make_node("StringConcat", ["x", "y"], ["z"])],
                 {"x": np.array("a", dtype=object), "y": np.array("b", dtype=object)}, {"z": S})[0]
    assert scalar.shape == () and scalar.item() == "ab"


def test_regex_full_match():
    x = strings("alice@example.com", "bob@test.org", "not an email", "carol@example.com.au", shape=(2, 2))
    pattern = r"[a-z]+@[a-z]+\.(com|org)"
    out = run([helper.make_node("RegexFullMatch", ["x"], ["y"], pattern=pattern)], {"x": x}, {"y": B})[0]
    np.testing.assert_array_equal(out, [[True, True], [False, False]])
    ends = run([helper.make_node("RegexFullMatch", ["x"], ["y"], pattern=r"a+\z|\\z")],
               {"x": strings("aaa", "\\z", "z", "aab")}, {"y": B})[0]     # RE2's \z ends the text
    np.testing.assert_array_equal(ends, [True, True, False, False])
    with pytest.raises(ValueError, match="is not a valid regular expression"):
        run([helper.make_node("RegexFullMatch", ["x"], ["y"], pattern="(a")], {"x": x}, {"y": B})


def test_equal_of_strings_on_host_and_numbers_compiled():
    a = strings("x", "y", "z", "x", shape=(2, 2))
    b = strings("x", "z", shape=(1, 2))
    out = run([helper.make_node("Equal", ["a", "b"], ["c"])], {"a": a, "b": b}, {"c": B})[0]
    np.testing.assert_array_equal(out, [[True, False], [False, False]])
    assert out.dtype == np.bool_
    graph = from_onnx(make_model([helper.make_node("Equal", ["a", "b"], ["c"])],
                                 {"a": np.zeros(3, np.int64), "b": np.zeros(3, np.int64)}, {"c": B}))
    assert not isinstance(graph, OnnxProgram)    # numeric Equal stays a compiled op


def test_cast_numbers_to_strings():
    x = np.array([0.1, -2.5, np.nan, np.inf, -np.inf, 3.0, 1e-7], np.float32)
    out = run([helper.make_node("Cast", ["x"], ["y"], to=S)], {"x": x}, {"y": S})[0]
    assert_strings_equal(out, strings("0.1", "-2.5", "NaN", "INF", "-INF", "3.0", "1e-07"))
    ints = run([helper.make_node("Cast", ["x"], ["y"], to=S)], {"x": np.array([[-7, 0], [2**40, 5]])}, {"y": S})[0]
    assert_strings_equal(ints, np.array([["-7", "0"], [str(2**40), "5"]], dtype=object))
    flags = run([helper.make_node("Cast", ["x"], ["y"], to=S)], {"x": np.array([True, False])}, {"y": S})[0]
    assert_strings_equal(flags, strings("True", "False"))


def test_cast_strings_to_numbers():
    x = strings("3.14", "1e-5", "1E8", "+INF", "-inf", "NaN", "-0.5", "inf")
    out = run([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)], {"x": x}, {"y": TensorProto.FLOAT})[0]
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.array([3.14, 1e-5, 1e8, np.inf, -np.inf, np.nan, -0.5, np.inf], np.float32))
    big = run([helper.make_node("Cast", ["x"], ["y"], to=I64)], {"x": strings("9007199254740993", "-4", "7.9")},
              {"y": I64})[0]
    np.testing.assert_array_equal(big, np.array([9007199254740993, -4, 7], np.int64))
    with pytest.raises(ValueError, match="cannot cast the string 'hello' to float64"):
        run([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.DOUBLE)], {"x": strings("hello")},
            {"y": TensorProto.DOUBLE})


def test_cast_round_trip_through_strings_keeps_float32_values():
    x = np.random.default_rng(3).standard_normal(50).astype(np.float32) * 1e3
    nodes = [helper.make_node("Cast", ["x"], ["s"], to=S), helper.make_node("Cast", ["s"], ["y"], to=TensorProto.FLOAT)]
    np.testing.assert_array_equal(run(nodes, {"x": x}, {"y": TensorProto.FLOAT})[0], x)


def test_cast_like_a_string_tensor():
    nodes = [helper.make_node("CastLike", ["x", "like"], ["y"])]
    out = run(nodes, {"x": np.array([1, 2], np.int32), "like": strings("a")}, {"y": S})[0]
    assert_strings_equal(out, strings("1", "2"))


def test_string_model_end_to_end_with_compiled_stretch():
    """Strings in, a compiled numeric stretch between host ops, strings out."""
    nodes = [
        helper.make_node("StringNormalizer", ["words"], ["lower"], case_change_action="LOWER"),
        helper.make_node("Constant", [], ["suffix"], value_string="!"),
        helper.make_node("StringConcat", ["lower", "suffix"], ["shout"]),
        helper.make_node("Cast", ["numbers"], ["values"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["values", "values"], ["squares"]),
        helper.make_node("Cast", ["squares"], ["text"], to=S),
    ]
    model = tensorforge.compile(from_onnx(make_model(
        nodes, {"words": strings("Hi", "THERE"), "numbers": strings("1.5", "-2")}, {"shout": S, "text": S},
        opsets={"": 20})))
    shout, text = model(strings("Hi", "THERE"), strings("1.5", "-2"))
    assert_strings_equal(shout, strings("hi!", "there!"))
    assert_strings_equal(text, strings("2.25", "4.0"))
    shout, text = model(strings("Ab", "Cd"), strings("3", "0.5"))     # other values, same model
    assert_strings_equal(shout, strings("ab!", "cd!"))
    assert_strings_equal(text, strings("9.0", "0.25"))
    shout, _ = model(["Yo", "OK"], np.array(["1", "2"]))     # a list of str, a NumPy str array
    assert_strings_equal(shout, strings("yo!", "ok!"))
    with pytest.raises(TypeError, match="input 'words': expected strings, got dtype float32"):
        model(np.zeros(2, np.float32), strings("1", "2"))


def test_string_initializer_read_by_a_converted_op_runs_on_host():
    """A node with a converter (Cast) that reads a string initializer runs on the host."""
    m = make_model([helper.make_node("Cast", ["k"], ["y"], to=TensorProto.FLOAT),
                    helper.make_node("Add", ["y", "x"], ["z"])],
                   {"x": np.ones(2, np.float32)}, {"z": TensorProto.FLOAT}, initializers={"k": strings("1.5", "-INF")})
    model = tensorforge.compile(OnnxProgram.from_model(m))
    np.testing.assert_array_equal(model(np.ones(2, np.float32))[0], np.array([2.5, -np.inf], np.float32))


def test_string_initializer_in_a_model_file():
    """A string initializer makes the model staged (it cannot be a parameter of a compiled graph)."""
    from onnx import TensorProto, helper, numpy_helper

    import tensorforge
    from tensorforge.frontend import from_onnx
    x = helper.make_tensor_value_info("x", TensorProto.STRING, [2])
    y = helper.make_tensor_value_info("y", TensorProto.STRING, [2])
    suffix = numpy_helper.from_array(np.array(["-a", "-b"], dtype=object), "suffix")
    graph = helper.make_graph([helper.make_node("StringConcat", ["x", "suffix"], ["y"])], "g", [x], [y], [suffix])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    out = tensorforge.compile(from_onnx(model))(np.array(["p", "q"], dtype=object))[0]
    assert out.tolist() == ["p-a", "q-b"]
