"""ai.onnx.ml ops on the host (LabelEncoder, ArrayFeatureExtractor, Binarizer, TreeEnsemble):
models built with onnx.helper, converted, compiled and called, against hand-computed values and
a plain per-sample tree walk."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx_host_helpers import ML, assert_strings_equal, run, strings

S, F, I64 = TensorProto.STRING, TensorProto.FLOAT, TensorProto.INT64


def encode(x, out_type, opset, **attrs):
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain=ML, **attrs)
    return run([node], {"x": x}, {"y": out_type}, opsets={ML: opset})[0]


# -- LabelEncoder ---------------------------------------------------------------------------------

def test_label_encoder_opset1_both_directions():
    classes = ["cat", "dog", "bird"]
    out = encode(strings("dog", "fish", "bird", "cat"), I64, 1, classes_strings=classes, default_int64=-5)
    np.testing.assert_array_equal(out, [1, -5, 2, 0])
    assert out.dtype == np.int64
    back = encode(np.array([[2, 7], [0, -1]], np.int64), S, 1, classes_strings=classes, default_string="?")
    assert_strings_equal(back, np.array([["bird", "?"], ["cat", "?"]], dtype=object))
    unset = encode(np.array([5], np.int64), S, 1, classes_strings=classes)
    assert_strings_equal(unset, strings("_Unused"))


def test_label_encoder_opset2_lists_and_defaults():
    out = encode(strings("Amy", "Dori", "Sally"), I64, 2, keys_strings=["Amy", "Sally"], values_int64s=[5, 6])
    np.testing.assert_array_equal(out, [5, -1, 6])
    floats = encode(np.array([1, 3, 2], np.int64), F, 2, keys_int64s=[1, 2], values_floats=[0.5, 1.5],
                    default_float=9.0)
    np.testing.assert_array_equal(floats, np.array([0.5, 9.0, 1.5], np.float32))
    text = encode(np.array([0.5, np.nan, 2.0], np.float32), S, 2, keys_floats=[0.5, float("nan")],
                  values_strings=["half", "missing"], default_string="other")
    assert_strings_equal(text, strings("half", "missing", "other"))


def test_label_encoder_opset4_tensors_repeated_key_and_default_tensor():
    keys = numpy_helper.from_array(np.array([10, 20, 10], np.int16), "keys")
    values = numpy_helper.from_array(np.array([1.5, 2.5, 3.5], np.float64), "values")
    default = numpy_helper.from_array(np.array([-1.0], np.float64), "default")
    out = encode(np.array([[10, 20], [30, 10]], np.int16), TensorProto.DOUBLE, 4,
                 keys_tensor=keys, values_tensor=values, default_tensor=default)
    np.testing.assert_array_equal(out, [[3.5, 2.5], [-1.0, 3.5]])   # the last repeated key wins
    assert out.dtype == np.float64
    str_values = numpy_helper.from_array(np.array([b"x", b"y"], dtype=object), "v")
    out = encode(np.array([2, 1, 3], np.int64), S, 4, keys_int64s=[1, 2], values_tensor=str_values)
    assert_strings_equal(out, strings("y", "x", "_Unused"))
    with pytest.raises(ValueError, match="keys and values must have the same length, got 2 and 1"):
        encode(np.array([1], np.int64), I64, 4, keys_int64s=[1, 2], values_int64s=[3])


# -- ArrayFeatureExtractor and Binarizer ----------------------------------------------------------

def test_array_feature_extractor():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    idx = np.array([3, 0, 3], np.int64)
    node = helper.make_node("ArrayFeatureExtractor", ["x", "i"], ["y"], domain=ML)
    out = run([node], {"x": x, "i": idx}, {"y": F}, opsets={ML: 1})[0]
    np.testing.assert_array_equal(out, x[..., [3, 0, 3]])
    one_d = run([node], {"x": strings("a", "b", "c"), "i": np.array([2, 1], np.int64)}, {"y": S}, opsets={ML: 1})[0]
    assert_strings_equal(one_d, np.array([["c", "b"]], dtype=object))
    with pytest.raises(ValueError, match="index 4 is out of range for the last axis of X, of size 4"):
        run([node], {"x": x, "i": np.array([4], np.int64)}, {"y": F}, opsets={ML: 1})


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32"])
def test_binarizer(dtype):
    x = (np.random.default_rng(1).standard_normal((3, 5)) * 3).astype(dtype)
    node = helper.make_node("Binarizer", ["x"], ["y"], domain=ML, threshold=0.5)
    out = run([node], {"x": x}, {"y": helper.np_dtype_to_tensor_dtype(np.dtype(dtype))}, opsets={ML: 1})[0]
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, np.where(x > 0.5, 1, 0).astype(dtype))


# -- TreeEnsemble ---------------------------------------------------------------------------------

def _walk(tree: dict, row: np.ndarray, node: int) -> int:
    """The leaf a sample reaches, one node at a time (the plain reading of the attributes)."""
    while True:
        v, split, mode = row[tree["feat"][node]], tree["split"][node], tree["mode"][node]
        if mode == 6:
            taken = v in tree["members"][node]
        else:
            taken = [v <= split, v < split, v >= split, v > split, v == split, v != split][mode]
        if np.isnan(v) and tree["miss"][node]:
            taken = True
        nxt, leaf = (tree["t"][node], tree["tl"][node]) if taken else (tree["f"][node], tree["fl"][node])
        if leaf:
            return nxt
        node = nxt


# Two trees over 3 features and 2 targets.  Tree 0 (root 0): node 0 x0 <= 0.5 ? node 1 : leaf 2;
# node 1 x1 in {1, 3} ? leaf 0 : leaf 1.  Tree 1 (root 2): node 2 x2 > -1 ? node 3 : leaf 3 (NaN
# goes true); node 3 x0 != 2 ? leaf 4 : leaf 3.
TREES = dict(feat=[0, 1, 2, 0], split=[0.5, 0.0, -1.0, 2.0], mode=[0, 6, 3, 5], t=[1, 0, 3, 4], tl=[0, 1, 0, 1],
             f=[2, 1, 3, 3], fl=[1, 1, 1, 1], miss=[0, 0, 1, 0], members={1: {1.0, 3.0}})
LEAF_TARGETS, LEAF_WEIGHTS = [0, 1, 0, 1, 0], [1.0, 2.0, 3.0, 4.0, 5.0]


def tree_node(n_targets=2, **attrs):
    t = TREES
    f32 = lambda name, v: numpy_helper.from_array(np.asarray(v, np.float32), name)  # noqa: E731
    return helper.make_node(
        "TreeEnsemble", ["x"], ["y"], domain=ML, n_targets=n_targets, tree_roots=[0, 2],
        nodes_featureids=t["feat"], nodes_splits=f32("s", t["split"]),
        nodes_modes=numpy_helper.from_array(np.asarray(t["mode"], np.uint8), "m"),
        nodes_truenodeids=t["t"], nodes_trueleafs=t["tl"], nodes_falsenodeids=t["f"], nodes_falseleafs=t["fl"],
        nodes_missing_value_tracks_true=t["miss"], membership_values=f32("mv", [1.0, 3.0, np.nan]),
        leaf_targetids=LEAF_TARGETS, leaf_weights=f32("w", LEAF_WEIGHTS), **attrs)


def expected_scores(x: np.ndarray, aggregate: int) -> np.ndarray:
    init = {2: np.finfo(np.float32).max, 3: np.finfo(np.float32).min}.get(aggregate, 0.0)
    out = np.full((len(x), 2), init, dtype=np.float64)
    for r, row in enumerate(x.astype(np.float64)):
        for root in (0, 2):
            leaf = _walk(TREES, row, root)
            tid, w = LEAF_TARGETS[leaf], LEAF_WEIGHTS[leaf]
            out[r, tid] = {0: out[r, tid] + w / 2, 1: out[r, tid] + w, 2: min(out[r, tid], w),
                           3: max(out[r, tid], w)}[aggregate]
    return out


def tree_inputs() -> np.ndarray:
    rng = np.random.default_rng(7)
    x = rng.choice([-2.0, 0.0, 0.5, 1.0, 2.0, 3.0], size=(40, 3)).astype(np.float32)
    x[::7, 2] = np.nan
    return x


@pytest.mark.parametrize("aggregate", [0, 1, 2, 3])
def test_tree_ensemble_aggregates(aggregate):
    x = tree_inputs()
    out = run([tree_node(aggregate_function=aggregate)], {"x": x}, {"y": F}, opsets={ML: 5})[0]
    assert out.dtype == np.float32 and out.shape == (40, 2)
    np.testing.assert_allclose(out, expected_scores(x, aggregate).astype(np.float32), rtol=1e-6)


def test_tree_ensemble_post_transforms():
    x = tree_inputs()
    s = expected_scores(x, 1)
    softmax = np.exp(s - s.max(1, keepdims=True))
    softmax /= softmax.sum(1, keepdims=True)
    cases = {1: softmax, 2: 1 / (1 + np.exp(-s))}
    for kind, want in cases.items():
        out = run([tree_node(post_transform=kind)], {"x": x}, {"y": F}, opsets={ML: 5})[0]
        np.testing.assert_allclose(out, want, rtol=1e-5)
    # SOFTMAX_ZERO: the softmax of each row's nonzero scores; zero scores (a target no leaf
    # reached: target 2 always, target 1 for some rows) stay 0
    zero = run([tree_node(n_targets=3, post_transform=3)], {"x": x}, {"y": F}, opsets={ML: 5})[0]
    want = np.zeros((len(x), 3))
    for r, row in enumerate(s):
        nz = [t for t in range(2) if row[t] != 0]
        e = {t: np.exp(row[t] - max(row[nz])) for t in nz}
        for t in nz:
            want[r, t] = e[t] / sum(e.values())
    assert (s[:, 1] == 0).any() and (s[:, 1] != 0).any()
    np.testing.assert_allclose(zero, want, rtol=1e-5)


def test_tree_ensemble_probit():
    """PROBIT maps a score p to sqrt(2) * erfinv(2p - 1), the standard normal quantile."""
    from statistics import NormalDist
    node = helper.make_node(
        "TreeEnsemble", ["x"], ["y"], domain=ML, n_targets=1, tree_roots=[0], post_transform=4,
        nodes_featureids=[0], nodes_splits=numpy_helper.from_array(np.array([0.0], np.float64), "s"),
        nodes_modes=numpy_helper.from_array(np.array([0], np.uint8), "m"), nodes_truenodeids=[0],
        nodes_trueleafs=[1], nodes_falsenodeids=[1], nodes_falseleafs=[1], leaf_targetids=[0, 0],
        leaf_weights=numpy_helper.from_array(np.array([0.1, 0.975], np.float64), "w"))
    out = run([node], {"x": np.array([[-1.0], [1.0]])}, {"y": TensorProto.DOUBLE}, opsets={ML: 5})[0]
    np.testing.assert_allclose(out[:, 0], [NormalDist().inv_cdf(0.1), NormalDist().inv_cdf(0.975)], rtol=1e-9)


def test_tree_ensemble_errors():
    with pytest.raises(ValueError, match="node 0 reads feature 0, but X has 0 features"):
        run([tree_node()], {"x": np.zeros((2, 0), np.float32)}, {"y": F}, opsets={ML: 5})
    with pytest.raises(ValueError, match=r"leaf_targetids must lie in \[0, 1\)"):
        run([tree_node(n_targets=1)], {"x": tree_inputs()}, {"y": F}, opsets={ML: 5})
    with pytest.raises(ValueError, match=r"X must be \[N, F\], got shape \[3\]"):
        run([tree_node()], {"x": np.zeros(3, np.float32)}, {"y": F}, opsets={ML: 5})
