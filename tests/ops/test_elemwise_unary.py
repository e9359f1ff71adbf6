"""Unary elementwise ops: TE compute compiled to C against the NumPy reference, over every dtype
each op takes, with special values (NaN, inf, signed zero, integer extremes), plus clear errors."""
from __future__ import annotations

import numpy as np
import pytest

from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.ir import GraphError
from tensorforge.ops import OpError, TensorType, get
from tensorforge.ops.testing import check_op

FLOATS = ("float16", "float32", "float64")
INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
TOL = {"float16": 2e-3, "float32": 1e-5, "float64": 1e-9}

# op -> (low, high) of a safe random domain
DOMAINS = {
    "exp": (-5, 5), "log": (0.1, 10), "sqrt": (0, 10), "reciprocal": (0.5, 4), "floor": (-9, 9),
    "ceil": (-9, 9), "round": (-9, 9), "sin": (-3, 3), "cos": (-3, 3), "tan": (-1.2, 1.2),
    "asin": (-0.99, 0.99), "acos": (-0.99, 0.99), "atan": (-9, 9), "sinh": (-4, 4), "cosh": (-4, 4),
    "asinh": (-9, 9), "acosh": (1.01, 9), "atanh": (-0.95, 0.95), "erf": (-3, 3), "abs": (-9, 9),
    "neg": (-9, 9), "sign": (-9, 9), "isnan": (-9, 9), "isinf": (-9, 9),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(DOMAINS))
def test_float_unary(name, dtype):
    lo, hi = DOMAINS[name]
    x = np.random.default_rng(1).uniform(lo, hi, (3, 5)).astype(dtype)
    check_op(name, [x], rtol=TOL[dtype], atol=TOL[dtype], interpreter=dtype == "float32")


@pytest.mark.parametrize("dtype", FLOATS)
def test_special_values(dtype):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, 1.5, 2.5, -2.5, -0.5], dtype)
    for name in ("abs", "neg", "sign", "floor", "ceil", "round", "isnan", "isinf", "exp"):
        check_op(name, [x])


def test_round_is_half_to_even():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 3.5000001], "float32")
    (got,) = check_op("round", [x])
    np.testing.assert_array_equal(got, [0, 2, 2, -0.0, -2, 4])


@pytest.mark.parametrize("pos,neg", [(1, 1), (1, 0), (0, 1), (0, 0)])
def test_isinf_directions(pos, neg):
    x = np.array([np.inf, -np.inf, np.nan, 1.0, -3.0], "float32")
    (got,) = check_op("isinf", [x], {"detect_positive": pos, "detect_negative": neg})
    np.testing.assert_array_equal(got, [bool(pos), bool(neg), False, False, False])


@pytest.mark.parametrize("dtype", INTS)
def test_integer_abs_neg_sign(dtype):
    info = np.iinfo(dtype)
    x = np.array([info.min, info.min + 1, -1 if info.min else 2, 0, 1, info.max], dtype)
    for name in ("abs", "neg", "sign"):
        check_op(name, [x])


def test_scalar_and_empty_tensors():
    check_op("exp", [np.array(0.5, "float32")])
    check_op("neg", [np.zeros((2, 0), "int32")])


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sin", "erf", "isnan", "isinf", "reciprocal", "floor"])
def test_float_only_ops_reject_integers(name):
    with pytest.raises(OpError, match=f"{name}: input has dtype int32"):
        get(name).infer_types([TensorType((2,), "int32")], {})


def test_bad_attributes_are_reported():
    with pytest.raises(OpError, match="unknown attribute"):
        get("exp").infer_types([TensorType((2,), "float32")], {"alpha": 1.0})
    with pytest.raises(OpError, match="detect_positive must be 0 or 1"):
        get("isinf").infer_types([TensorType((2,), "float32")], {"detect_positive": 3})
    with pytest.raises(OpError, match="takes 1 input"):
        get("abs").infer_types([TensorType((2,), "float32")] * 2, {})


def test_builder_folds_constant_inputs_and_names_the_node():
    b = GraphBuilder()
    c = b.const(np.array([0.25, 4.0], "float32"))
    (v,) = b.add("sqrt", [c])
    np.testing.assert_allclose(b.params[v], [0.5, 2.0])
    x = b.input("x", (2,), "int64")
    with pytest.raises(GraphError, match=r"node bad \(exp\): exp: input has dtype int64"):
        b.add("exp", [x], name="bad")


def _erf64(x: np.ndarray) -> np.ndarray:
    import math
    return np.array([math.erf(v) for v in x])


@pytest.mark.parametrize("op, reference, grid", [
    # erf: the grid reaches past 3.92, from where it rounds to 1
    ("erf", _erf64, [np.linspace(-5, 5, 20001), np.geomspace(1e-30, 3.9, 2000), [3.92, 3.9199998, 40.0]]),
    # tanh: tiny values, the approach to 1 and past 9, from where it is 1
    ("tanh", np.tanh, [np.linspace(-12, 12, 40001), np.geomspace(1e-30, 9.5, 4000), [8.67, 8.999999, 9.0, 90.0]]),
])
def test_float32_odd_functions_are_inline_and_within_3_ulp(op, reference, grid):
    """float32 erf and tanh are the C backend's inline rational forms (vectorized as arithmetic,
    not a library call): over a dense grid of both signs within relative 3.6e-7 (3 float32 ulp)
    of the float64 reference; signed zeros, infinities and NaN as the functions have them."""
    import tensorforge
    from tensorforge.graph.builder import GraphBuilder
    half = np.concatenate(grid)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan]
    x = np.concatenate([half, -half, special]).astype("float32")
    b = GraphBuilder(op)
    graph = b.finish([b.add1(op, [b.input("x", x.shape, "float32")])])
    model = tensorforge.compile(graph, target="c")
    got = model(x)[0]
    assert f"tf_{op}f" in model.source
    want = reference(x[:-len(special)].astype(np.float64))
    np.testing.assert_allclose(got[:-len(special)], want, rtol=3.6e-7, atol=0)
    np.testing.assert_array_equal(got[-len(special):], [0.0, -0.0, 1.0, -1.0, np.nan])
    assert np.signbit(got[-4]) and not np.signbit(got[-5])


def test_float32_exp_is_inline_and_within_2_ulp():
    """float32 exp (and the sigmoid built on it) is the C backend's inline form: within relative
    2.4e-7 (2 ulp) of the float64 reference where exp is a normal float, within one step of the
    smallest subnormal below, overflow to inf from log(FLT_MAX), exp(-inf) = 0, NaN stays NaN."""
    import tensorforge
    from tensorforge.graph.builder import GraphBuilder
    grid = np.concatenate([np.linspace(-110, 95, 200001), np.linspace(-1, 1, 20001), np.geomspace(1e-30, 1, 2000),
                           -np.geomspace(1e-30, 1, 2000), [88.72283, 88.722839, 88.7228394, -87.33654, -103.97, -104.0]])
    special = [np.inf, -np.inf, np.nan, 0.0, -0.0]
    x = np.concatenate([grid, special]).astype("float32")
    b = GraphBuilder("exp")
    xv = b.input("x", x.shape, "float32")
    graph = b.finish([b.add1("exp", [xv]), b.add1("sigmoid", [xv])])
    model = tensorforge.compile(graph, target="c")
    got, sig = model(x)
    assert "tf_expf" in model.source
    x64 = x[:-len(special)].astype(np.float64)
    with np.errstate(over="ignore"):
        want = np.exp(x64)
    finite = want < float(np.finfo(np.float32).max)
    normal = finite & (want >= float(np.finfo(np.float32).tiny))
    np.testing.assert_allclose(got[:-len(special)][normal], want[normal], rtol=2.4e-7, atol=0)
    np.testing.assert_allclose(got[:-len(special)][finite & ~normal], want[finite & ~normal], rtol=0, atol=1.5e-45)
    assert np.all(np.isposinf(got[:-len(special)][~finite]))
    np.testing.assert_array_equal(got[-len(special):], [np.inf, 0.0, np.nan, 1.0, 1.0])
    with np.errstate(over="ignore"):
        # 1 / (1 + exp(-x)): exp(-x) overflows below x = -88.7, where sigmoid is below FLT_MIN
        np.testing.assert_allclose(sig[:-len(special)], 1 / (1 + np.exp(-x64)), rtol=5e-7, atol=1.2e-38)
    np.testing.assert_array_equal(sig[-len(special):], [1.0, 0.0, np.nan, 0.5, 0.5])


def test_float32_exp_on_512_bit_vectors_is_the_inline_exp_bit_for_bit():
    """On AVX-512 a vectorized loop's exp (and sigmoid) calls a 16-lane helper that scales with
    vscalefps; its values are the inline scalar exp's, bit for bit, that an AVX2 build computes
    (the same reduction and polynomial), special values included."""
    import tensorforge
    from tensorforge.graph.builder import GraphBuilder
    from tensorforge.target import Target
    x = np.concatenate([np.linspace(-110, 95, 100000), [88.72283, 88.7228394, -87.33654, -103.97, -104.0, -105.0],
                        [np.inf, -np.inf, 0.0, -0.0]]).astype("float32")
    x = np.concatenate([x, np.zeros(-len(x) % 16, "float32")]).reshape(-1, 16)
    b = GraphBuilder("exp")
    xv = b.input("x", x.shape, "float32")
    graph = b.finish([b.add1("exp", [xv]), b.add1("sigmoid", [xv])])
    wide = tensorforge.compile(graph, target="c -mcpu=x86-64-v4")
    assert "_mm512_scalef_ps" in wide.source and "tf_expf_x16(" in wide.source
    if Target.parse("c -mcpu=native").simd_lanes("float32") < 16:
        pytest.skip("this machine has no AVX-512")
    narrow = tensorforge.compile(graph, target="c -mcpu=x86-64-v3")
    assert "tf_expf_x16" not in narrow.source
    for got, want in zip(wide(x), narrow(x)):
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("op", ["tanh", "erf"])
def test_float32_tanh_and_erf_on_512_bit_vectors_are_the_inline_ones_bit_for_bit(op):
    """On AVX-512 a vectorized loop's tanh and erf call a 16-lane helper whose clamps are one
    vminps each; its values are the inline scalar rational's, bit for bit, that an AVX2 build
    computes: around the magnitude where the value becomes 1, at subnormals, infinities, signed
    zeros and NaNs (the payload and sign kept)."""
    import tensorforge
    from tensorforge.graph.builder import GraphBuilder
    from tensorforge.target import Target
    x = np.concatenate([np.linspace(-12, 12, 100000), [8.9999, 9.0, 9.5, 3.91, 3.92, 3.93, 1e-30, -1e-30, 1e-45],
                        [np.inf, -np.inf, 0.0, -0.0, np.nan, -np.nan]]).astype("float32")
    x = np.concatenate([x, np.zeros(-len(x) % 16 + 16, "float32")]).reshape(-1, 16)
    x[-1, -1] = np.array([0xFFC01234], np.uint32).view(np.float32)[0]
    b = GraphBuilder(op)
    xv = b.input("x", x.shape, "float32")
    graph = b.finish([b.add1(op, [xv])])
    wide = tensorforge.compile(graph, target="c -mcpu=x86-64-v4")
    assert f"tf_{op}f_x16(" in wide.source and "_mm512_min_ps" in wide.source
    if Target.parse("c -mcpu=native").simd_lanes("float32") < 16:
        pytest.skip("this machine has no AVX-512")
    narrow = tensorforge.compile(graph, target="c -mcpu=x86-64-v3")
    assert f"tf_{op}f_x16" not in narrow.source
    np.testing.assert_array_equal(wide(x)[0].view(np.uint32), narrow(x)[0].view(np.uint32))
