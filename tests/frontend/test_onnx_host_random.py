"""Random ops on the host: shapes and dtypes, the distributions (checked on many samples with
bounds that fail a wrong distribution; seeded, so the checks are deterministic), and seeds (a
seeded node repeats its values, an unseeded one does not)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx_host_helpers import make_model, run

import tensorforge
from tensorforge.frontend import from_onnx

F, D, I32, I64 = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT32, TensorProto.INT64


def compiled(nodes, inputs, outputs, opset=22):
    return tensorforge.compile(from_onnx(make_model(nodes, inputs, outputs, opsets={"": opset})))


def test_random_uniform_range_moments_and_dtype():
    node = helper.make_node("RandomUniform", [], ["y"], shape=[200, 500], low=-2.0, high=4.0, dtype=D, seed=11.0)
    y = run([node], {}, {"y": D}, opsets={"": 22})[0]
    assert y.shape == (200, 500) and y.dtype == np.float64
    assert y.min() >= -2.0 and y.max() < 4.0
    assert abs(y.mean() - 1.0) < 0.03 and abs(y.var() - 3.0) < 0.05       # (b - a)^2 / 12 = 3
    default = run([helper.make_node("RandomUniform", [], ["y"], shape=[3])], {}, {"y": F}, opsets={"": 22})[0]
    assert default.dtype == np.float32 and 0.0 <= default.min() and default.max() < 1.0


def test_random_normal_moments():
    node = helper.make_node("RandomNormal", [], ["y"], shape=[100000], mean=3.0, scale=0.5, seed=12.0)
    y = run([node], {}, {"y": F}, opsets={"": 22})[0]
    assert y.dtype == np.float32
    assert abs(y.mean() - 3.0) < 0.01 and abs(y.std() - 0.5) < 0.01


def test_like_forms_take_shape_and_dtype_from_the_input():
    x = np.zeros((4, 5, 6), np.float16)
    u = run([helper.make_node("RandomUniformLike", ["x"], ["y"], low=5.0, high=6.0)], {"x": x},
            {"y": TensorProto.FLOAT16}, opsets={"": 22})[0]
    assert u.shape == x.shape and u.dtype == np.float16 and u.min() >= 5.0 and u.max() <= 6.0
    n = run([helper.make_node("RandomNormalLike", ["x"], ["y"], dtype=D)], {"x": x}, {"y": D}, opsets={"": 22})[0]
    assert n.shape == x.shape and n.dtype == np.float64 and n.std() > 0.5


def test_seeded_node_repeats_and_unseeded_node_does_not():
    seeded = compiled([helper.make_node("RandomNormal", [], ["y"], shape=[64], seed=3.0)], {}, {"y": F})
    again = compiled([helper.make_node("RandomNormal", [], ["y"], shape=[64], seed=3.0)], {}, {"y": F})
    other = compiled([helper.make_node("RandomNormal", [], ["y"], shape=[64], seed=4.0)], {}, {"y": F})
    first = seeded()[0]
    np.testing.assert_array_equal(seeded()[0], first)
    np.testing.assert_array_equal(again()[0], first)
    assert not np.array_equal(other()[0], first)
    free = compiled([helper.make_node("RandomNormal", [], ["y"], shape=[64])], {}, {"y": F})
    assert not np.array_equal(free()[0], free()[0])


def test_bernoulli_frequencies_and_dtype():
    p = np.repeat(np.array([[0.0, 0.2, 0.7, 1.0]], np.float64), 20000, axis=0)
    y = run([helper.make_node("Bernoulli", ["p"], ["y"], seed=13.0)], {"p": p}, {"y": D}, opsets={"": 22})[0]
    assert y.dtype == np.float64 and set(np.unique(y)) <= {0.0, 1.0}
    np.testing.assert_allclose(y.mean(axis=0), [0.0, 0.2, 0.7, 1.0], atol=0.015)
    assert y[:, 0].max() == 0.0 and y[:, 3].min() == 1.0
    flags = run([helper.make_node("Bernoulli", ["p"], ["y"], dtype=TensorProto.BOOL, seed=1.0)],
                {"p": np.full(10, 0.5, np.float32)}, {"y": TensorProto.BOOL}, opsets={"": 22})[0]
    assert flags.dtype == np.bool_
    with pytest.raises(ValueError, match=r"Bernoulli probabilities must lie in \[0, 1\]"):
        run([helper.make_node("Bernoulli", ["p"], ["y"])], {"p": np.array([1.5], np.float32)}, {"y": F},
            opsets={"": 22})


def test_bernoulli_expanded_form_compiles_around_the_host_op():
    """Bernoulli's function body: RandomUniformLike on the host, Greater and Cast compiled."""
    nodes = [helper.make_node("RandomUniformLike", ["p"], ["u"], dtype=D, seed=14.0),
             helper.make_node("Greater", ["p", "u"], ["hit"]),
             helper.make_node("Cast", ["hit"], ["y"], to=D)]
    p = np.full((5000,), 0.3)
    y = run(nodes, {"p": p}, {"y": D}, opsets={"": 22})[0]
    assert y.dtype == np.float64 and abs(y.mean() - 0.3) < 0.03


@pytest.mark.parametrize("dtype,np_dtype", [(None, np.int32), (I64, np.int64)])
def test_multinomial_frequencies(dtype, np_dtype):
    logits = np.log(np.array([[0.1, 0.6, 0.3], [0.5, 0.0001, 0.4999]], np.float32))
    attrs = {"sample_size": 20000, "seed": 15.0, **({"dtype": dtype} if dtype else {})}
    y = run([helper.make_node("Multinomial", ["x"], ["y"], **attrs)], {"x": logits},
            {"y": dtype or I32}, opsets={"": 22})[0]
    assert y.shape == (2, 20000) and y.dtype == np_dtype
    for row, probs in zip(y, np.exp(logits)):
        np.testing.assert_allclose(np.bincount(row, minlength=3) / row.size, probs / probs.sum(), atol=0.015)


def test_training_dropout_keeps_about_one_minus_ratio_scaled():
    from onnx import TensorProto, helper, numpy_helper

    import tensorforge
    from tensorforge.frontend import from_onnx
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [200, 50])
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("mask", TensorProto.BOOL, None)]
    inits = [numpy_helper.from_array(np.array(0.25, np.float32), "r"), numpy_helper.from_array(np.array(True), "t")]
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y", "mask"], seed=3)
    model = helper.make_model(helper.make_graph([node], "g", [x], outs, inits),
                              opset_imports=[helper.make_opsetid("", 13)])
    compiled = tensorforge.compile(from_onnx(model))
    data = np.random.default_rng(0).uniform(1, 2, (200, 50)).astype(np.float32)
    y, mask = compiled(data)
    assert mask.dtype == np.bool_ and 0.70 < mask.mean() < 0.80
    np.testing.assert_allclose(y, np.where(mask, data / 0.75, 0), rtol=1e-6)
    again = compiled(data)
    np.testing.assert_array_equal(again[1], mask)          # a seed repeats the mask
