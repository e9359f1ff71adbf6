"""Before/expected tests for every graph pass in graph/pipeline.py: build a small input graph by
hand, run only that pass, build the graph it should produce by hand, and compare their
structure (op sequence, attributes, wiring, constants) with `assert_graph_equal`.  Each pass
also has a case it must leave alone.  The expected constants are computed here with plain NumPy
(reshapes, transposes, the batch-norm algebra), not with the pass's own helpers."""
from __future__ import annotations

import numpy as np
import pytest
from graph_compare import assert_graph_equal, graph_difference

from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.ir import Graph, Node, Value
from tensorforge.graph.passes.alter_layout import alter_layout
from tensorforge.graph.passes.alter_layout_column_conv import alter_layout_column_conv
from tensorforge.graph.passes.alter_layout_conv_transpose import alter_layout_conv_transpose
from tensorforge.graph.passes.alter_layout_half_blocks import alter_layout_half_blocks
from tensorforge.graph.passes.alter_layout_im2col import alter_layout_im2col
from tensorforge.graph.passes.alter_layout_int8 import alter_layout_int8
from tensorforge.graph.passes.alter_layout_matmul import alter_layout_matmul
from tensorforge.graph.passes.alter_layout_ops import alter_layout_ops
from tensorforge.graph.passes.alter_layout_propagate import alter_layout_propagate
from tensorforge.graph.passes.alter_layout_rnn import alter_layout_rnn
from tensorforge.graph.passes.alter_layout_winograd import alter_layout_winograd
from tensorforge.graph.passes.alter_layout_winograd_nchw import alter_layout_winograd_nchw
from tensorforge.graph.passes.conv3d_as_conv2d import conv3d_as_conv2d
from tensorforge.graph.passes.conv_as_tap_planes import conv_as_tap_planes
from tensorforge.graph.passes.conv_transpose_as_conv import conv_transpose_as_conv
from tensorforge.graph.passes.einsum_as_matmul import einsum_as_matmul
from tensorforge.graph.passes.eliminate_dead_code import eliminate_dead_code
from tensorforge.graph.passes.fold_batch_norm import fold_batch_norm
from tensorforge.graph.passes.fold_constants import fold_constants
from tensorforge.graph.passes.fold_qdq import fold_qdq
from tensorforge.graph.passes.fold_qdq_gather import fold_qdq_gather
from tensorforge.graph.passes.fold_qdq_tables import fold_qdq_tables
from tensorforge.graph.passes.share_equal_params import share_equal_params
from tensorforge.graph.passes.simplify_graph import simplify_graph
from tensorforge.graph.passes.trim_conv_taps import trim_conv_taps
from tensorforge.graph.passes.unique_names import unique_names
from tensorforge.graph.pipeline import PASSES
from tensorforge.graph.reference import run_reference
from tensorforge.target import Target

RNG = np.random.default_rng(0)
CONV = {"strides": (1, 1), "padding": (1, 1, 1, 1), "dilations": (1, 1), "groups": 1}
# layout passes ask the target for its vector width: a fixed one keeps these tests the same on
# every host (16 float32 lanes)
AVX512 = Target.parse("c -mcpu=x86-64-v4")

TESTED = {"eliminate_dead_code", "fold_qdq", "fold_qdq_gather", "fold_qdq_tables", "fold_constants", "simplify_graph", "fold_batch_norm", "alter_layout",
          "alter_layout_im2col", "alter_layout_column_conv",
          "alter_layout_propagate", "alter_layout_winograd", "alter_layout_conv_transpose",
          "alter_layout_matmul", "alter_layout_rnn", "alter_layout_int8", "alter_layout_ops",
          "alter_layout_winograd_nchw", "alter_layout_half_blocks", "conv_transpose_as_conv", "conv3d_as_conv2d", "dilated_conv_as_phases",
          "trim_conv_taps", "conv_as_tap_planes",
          "einsum_as_matmul", "share_equal_params", "unique_names"}


def builder(name="g") -> GraphBuilder:
    b = GraphBuilder(name)
    b.fold_constants = False         # keep constant subgraphs: some passes are about them
    return b


def rand(*shape) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def assert_rewrites(rewrite, before: Graph, expected: Graph) -> None:
    """`rewrite(before)` on AVX-512 is the graph `expected`, and computes what `before` does on a
    random value of its one input."""
    after = rewrite(before, AVX512)
    assert_graph_equal(after, expected)
    (x,) = before.inputs
    xs = rand(*x.shape)
    np.testing.assert_allclose(run_reference(after, xs)[0], run_reference(before, xs)[0], rtol=1e-5, atol=1e-5)


def pack_oihw(w: np.ndarray, block: int) -> np.ndarray:
    """OIHW -> (O / block, I, KH, KW, block), written out element by element."""
    o, i, kh, kw = w.shape
    out = np.empty((o // block, i, kh, kw, block), w.dtype)
    for f in range(o):
        out[f // block, :, :, :, f % block] = w[f]
    return out


def test_every_pipeline_pass_has_a_before_expected_test():
    assert {name for name, _, _ in PASSES} == TESTED


def test_the_comparison_sees_a_changed_attribute_wire_and_constant():
    def graph(alpha=0.1, const=1.0, swap=False):
        b = builder()
        x = b.input("x", (2, 3), "float32")
        c = b.const(np.full((2, 3), const, "float32"))
        r = b.add1("leaky_relu", [x], {"alpha": alpha})
        return b.finish([b.add1("add", [c, r] if swap else [r, c])])
    assert graph_difference(graph(), graph()) is None
    assert "attributes" in graph_difference(graph(alpha=0.2), graph())
    assert "constant values differ" in graph_difference(graph(const=2.0), graph())
    assert "reads a constant, expected output 0 of node 0" in graph_difference(graph(swap=True), graph())


# -- eliminate_dead_code --------------------------------------------------------------------------

def test_eliminate_dead_code():
    x = Value("x", (4,), "float32")
    used, unused = Value("w", (4,), "float32"), Value("u", (4,), "float32")
    y, dead, dead2 = (Value(n, (4,), "float32") for n in ("y", "dead", "dead2"))
    before = Graph((x,), (y,), (Node("exp", (x,), (dead,)), Node("add", (x, used), (y,)),
                                Node("mul", (dead, unused), (dead2,))),
                   {used: np.ones(4, "float32"), unused: np.zeros(4, "float32")})
    want = Graph((x,), (y,), (Node("add", (x, used), (y,)),), {used: np.ones(4, "float32")})
    got = eliminate_dead_code(before)
    assert_graph_equal(got, want)
    assert set(got.params) == {used}                          # the unread constant is gone too


# -- fold_constants -------------------------------------------------------------------------------

def test_fold_constants_evaluates_constant_subgraphs():
    a = rand(3, 4)
    b = builder()
    x = b.input("x", (3, 4), "float32")
    c = b.const(a, "a")
    folded = b.add1("exp", [b.add1("relu", [c])])
    before = b.finish([b.add1("add", [x, folded])])

    e = builder()
    x = e.input("x", (3, 4), "float32")
    want = e.finish([e.add1("add", [x, e.const(np.exp(np.maximum(a, 0)))])])
    assert_graph_equal(fold_constants(before), want, rtol=1e-6)


def test_fold_constants_leaves_runtime_values_alone():
    b = builder()
    x = b.input("x", (3, 4), "float32")
    g = b.finish([b.add1("exp", [b.add1("relu", [x])])])
    assert fold_constants(g) is g


# -- simplify_graph -------------------------------------------------------------------------------

def test_simplify_graph_drops_identities_and_merges_reshapes():
    b = builder()
    x = b.input("x", (2, 3, 4), "float32")
    i = b.add1("identity", [b.add1("identity", [x])])
    r1 = b.add1("reshape", [i], {"shape": (6, -1)})            # (6, 4)
    r2 = b.add1("reshape", [r1], {"shape": (0, 2, -1)})        # (6, 2, 2): 0 keeps r1's first dimension
    before = b.finish([b.add1("relu", [r2])])
    assert [n.op for n in before.nodes] == ["identity", "identity", "reshape", "reshape", "relu"]

    e = builder()
    x = e.input("x", (2, 3, 4), "float32")
    e.add1("reshape", [x], {"shape": (6, -1)})     # left for dead-code elimination: simplify only rewires
    r2 = e.add1("reshape", [x], {"shape": (6, 2, 2), "allowzero": 1})
    want = e.finish([e.add1("relu", [r2])])
    assert_graph_equal(simplify_graph(before), want)


def test_simplify_graph_merges_a_reduction_of_a_reduction():
    """x.mean(3).mean(2) is x.mean((2, 3)); with keepdims the axes are the input's own."""
    b = builder()
    x = b.input("x", (2, 5, 7, 3), "float32")
    m1 = b.add1("reduce_mean", [x], {"axes": (3,), "keepdims": 0})
    m2 = b.add1("reduce_mean", [m1], {"axes": (-1,), "keepdims": 0})
    k1 = b.add1("reduce_max", [x], {"axes": (1,), "keepdims": 1})
    k2 = b.add1("reduce_max", [k1], {"axes": (3,), "keepdims": 1})
    before = b.finish([m2, k2])

    e = builder()
    x = e.input("x", (2, 5, 7, 3), "float32")
    e.add1("reduce_mean", [x], {"axes": (3,), "keepdims": 0})      # left for dead-code elimination
    m2 = e.add1("reduce_mean", [x], {"axes": (2, 3), "keepdims": 0})
    e.add1("reduce_max", [x], {"axes": (1,), "keepdims": 1})
    k2 = e.add1("reduce_max", [x], {"axes": (1, 3), "keepdims": 1})
    want = e.finish([m2, k2])
    got = simplify_graph(before)
    assert_graph_equal(got, want)
    xs = rand(2, 5, 7, 3)
    for a, w in zip(run_reference(got, xs), run_reference(before, xs)):
        np.testing.assert_allclose(a, w, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", ["other reader", "another op", "keepdims differ", "integers"])
def test_simplify_graph_keeps_reductions_it_cannot_merge(case):
    b = builder()
    x = b.input("x", (2, 5, 7), "int32" if case == "integers" else "float32")
    m1 = b.add1("reduce_mean", [x], {"axes": (2,), "keepdims": 0})
    m2 = b.add1("reduce_sum" if case == "another op" else "reduce_mean", [m1],
                {"axes": (1,), "keepdims": 1 if case == "keepdims differ" else 0})
    g = b.finish([m2, m1] if case == "other reader" else [m2])
    assert simplify_graph(g) is g


def test_simplify_graph_keeps_an_identity_that_is_a_graph_output():
    b = builder()
    x = b.input("x", (2, 3), "float32")
    g = b.finish([b.add1("identity", [x])])
    assert simplify_graph(g) is g


def test_simplify_graph_squares_by_a_product():
    """pow(x, 2) with a constant exponent becomes mul(x, x); another exponent, an integer base or
    an exponent that broadcasts x to a larger shape keeps the pow."""
    b = builder()
    x = b.input("x", (2, 3), "float32")
    before = b.finish([b.add1("pow", [x, b.const(np.array(2.0, "float32"), "two")])])
    e = builder()
    x = e.input("x", (2, 3), "float32")
    want = e.finish([e.add1("mul", [x, x])])
    assert_graph_equal(eliminate_dead_code(simplify_graph(before)), want)
    # a cube is (x * x) * x, bit for bit what ONNX Runtime's Pow computes for exponent 3
    b = builder()
    x = b.input("x", (2, 3), "float32")
    before = b.finish([b.add1("pow", [x, b.const(np.array(3.0, "float32"), "three")])])
    e = builder()
    x = e.input("x", (2, 3), "float32")
    want = e.finish([e.add1("mul", [e.add1("mul", [x, x]), x])])
    assert_graph_equal(eliminate_dead_code(simplify_graph(before)), want)
    xv = RNG.standard_normal((2, 3)).astype("float32") * 10
    np.testing.assert_array_equal(run_reference(simplify_graph(before), xv)[0], (xv * xv) * xv)
    for shape, exponent, dtype in (((2, 3), 4.0, "float32"), ((2, 3), 2, "int32"), ((3,), 2.0, "float32")):
        b = builder()
        x = b.input("x", shape, dtype)
        c = b.const(np.full((2, 1) if shape == (3,) else (), exponent, dtype if dtype == "int32" else "float32"))
        g = b.finish([b.add1("pow", [x, c])])
        assert simplify_graph(g) is g


def test_simplify_graph_folds_a_zero_spatial_pad_into_the_convs_that_read_it():
    """TensorFlow-style "same" padding exports as Pad before a conv: the widths join the conv's
    own padding (begins, then ends); a pad of nothing is dropped."""
    w1, w2 = rand(8, 4, 3, 3), rand(4, 4, 1, 1)
    b = builder()
    x = b.input("x", (1, 4, 9, 9), "float32")
    p = b.add1("pad", [x], {"pads": (0, 0, 0, 1, 0, 0, 1, 1)})
    y = b.add1("conv2d", [p, b.const(w1, "w1")], dict(CONV, padding=(1, 0, 1, 0), strides=(2, 2)))
    z = b.add1("conv2d", [b.add1("pad", [x], {"pads": (0,) * 8}), b.const(w2, "w2")], dict(CONV, padding=(0, 0, 0, 0)))
    before = b.finish([y, z])
    e = builder()
    x = e.input("x", (1, 4, 9, 9), "float32")
    y = e.add1("conv2d", [x, e.const(w1, "w1")], dict(CONV, padding=(1, 1, 2, 1), strides=(2, 2)))
    z = e.add1("conv2d", [x, e.const(w2, "w2")], dict(CONV, padding=(0, 0, 0, 0)))
    want = e.finish([y, z])
    got = eliminate_dead_code(simplify_graph(before))
    assert_graph_equal(got, want)
    xv = rand(1, 4, 9, 9)
    for a, r in zip(run_reference(got, xv), run_reference(before, xv)):
        np.testing.assert_allclose(a, r, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["channels", "value", "edge", "other reader", "output"])
def test_simplify_graph_keeps_pads_a_conv_cannot_take(case):
    b = builder()
    x = b.input("x", (1, 4, 9, 9), "float32")
    attrs = {"pads": (0, 0, 1, 1, 0, 0, 1, 1)}
    if case == "channels":
        attrs["pads"] = (0, 1, 1, 1, 0, 0, 1, 1)
    elif case == "value":
        attrs["value"] = 1.0
    elif case == "edge":
        attrs["mode"] = "edge"
    p = b.add1("pad", [x], attrs)
    w = b.const(rand(8, 5 if case == "channels" else 4, 3, 3), "w")
    y = b.add1("conv2d", [p, w], dict(CONV, padding=(0, 0, 0, 0)))
    outs = [y, b.add1("relu", [p])] if case == "other reader" else [y, p] if case == "output" else [y]
    g = b.finish(outs)
    assert simplify_graph(g) is g


# -- einsum_as_matmul -----------------------------------------------------------------------------

def test_einsum_as_matmul_transposes_reshapes_and_multiplies():
    """"bhqd,bhkd->bhqk": X is already (batch, rows, contracted); Y is brought to (batch,
    contracted, cols); batch h and b merge into one axis and split again after the product."""
    b = builder()
    x = b.input("x", (2, 3, 5, 4), "float32")
    y = b.input("y", (2, 3, 6, 4), "float32")
    before = b.finish([b.add1("einsum", [x, y], {"equation": "bhqd,bhkd->bhqk"})])
    e = builder()
    x = e.input("x", (2, 3, 5, 4), "float32")
    y = e.input("y", (2, 3, 6, 4), "float32")
    a = e.add1("reshape", [x], {"shape": (6, 5, 4)})
    yt = e.add1("transpose", [y], {"perm": (0, 1, 3, 2)})
    bm = e.add1("reshape", [yt], {"shape": (6, 4, 6)})
    prod = e.add1("matmul", [a, bm])
    want = e.finish([e.add1("reshape", [prod], {"shape": (2, 3, 5, 6)})])
    got = einsum_as_matmul(before, AVX512)
    assert_graph_equal(got, want)
    xs, ys = rand(2, 3, 5, 4), rand(2, 3, 6, 4)
    np.testing.assert_allclose(run_reference(got, xs, ys)[0], run_reference(before, xs, ys)[0], rtol=1e-5, atol=1e-5)


# -- fold_batch_norm ------------------------------------------------------------------------------

def _bn_stats(c):
    return rand(c), rand(c), rand(c), np.abs(rand(c)) + 0.5      # gamma, beta, mean, var


def test_fold_qdq_dense_with_bias():
    wq = RNG.integers(-127, 128, (5, 3)).astype("int8")
    sw = np.array([0.01, 0.02, 0.03, 0.04, 0.05], "float32")
    bias = np.array([0.1, -0.2, 0.0, 0.05, 0.3], "float32")
    sx, sy = np.array(0.1, "float32"), np.array(0.25, "float32")
    zx, zy = np.array(128, "uint8"), np.array(3, "uint8")
    q8 = {"dtype": "uint8"}
    b = builder()
    x = b.input("x", (2, 3), "float32")
    xq = b.add1("quantize_linear", [x, b.const(sx), b.const(zx)], q8)
    xd = b.add1("dequantize_linear", [xq, b.const(sx), b.const(zx)])
    wd = b.add1("dequantize_linear", [b.const(wq), b.const(sw), b.const(np.zeros(5, "int8"))], {"axis": 0})
    y = b.add1("add", [b.add1("dense", [xd, wd]), b.const(bias)])
    before = b.finish([b.add1("quantize_linear", [y, b.const(sy), b.const(zy)], q8)])

    e = builder()
    x = e.input("x", (2, 3), "float32")
    xq = e.add1("quantize_linear", [x, e.const(sx), e.const(zx)], q8)
    acc = e.add1("matmul_integer", [xq, e.const(np.ascontiguousarray(wq.T)), e.const(zx), e.const(np.zeros(5, "int8"))])
    acc = e.add1("add", [acc, e.const(np.rint(bias / (sx * sw)).astype("int32"))])
    mult = (sx * sw / sy).astype("float32")
    want = e.finish([e.add1("requantize", [acc, e.const(mult), e.const(zy)],
                            {"axis": -1, "block_size": 0, "dtype": "uint8"})])
    got = fold_qdq(before)
    assert_graph_equal(got, want)
    xin = rand(2, 3)
    diff = run_reference(got, xin)[0].astype(int) - run_reference(before, xin)[0].astype(int)
    assert np.abs(diff).max() <= 1          # the float path rounds the same sum once more


def test_fold_qdq_gather_takes_the_8_bit_rows():
    table = np.arange(40, dtype="uint8").reshape(10, 4)
    s, z = np.array(0.1, "float32"), np.array(3, "uint8")
    b = builder()
    ids = b.input("ids", (2, 3), "int64")
    w = b.add1("dequantize_linear", [b.const(table), b.const(s), b.const(z)])
    before = b.finish([b.add1("gather", [w, ids], {"axis": 0})])
    e = builder()
    ids = e.input("ids", (2, 3), "int64")
    rows = e.add1("gather", [e.const(table), ids], {"axis": 0})
    want = e.finish([e.add1("dequantize_linear", [rows, e.const(s), e.const(z)])])
    got = fold_qdq_gather(before)
    assert_graph_equal(got, want)
    idx = np.array([[0, 9, 4], [4, 1, 2]], "int64")
    np.testing.assert_array_equal(run_reference(got, idx)[0], run_reference(before, idx)[0])


def test_fold_qdq_tables_scaling_between_quantizations():
    s, s2 = np.array(0.05, "float32"), np.array(0.04, "float32")
    z, z2 = np.array(100, "uint8"), np.array(7, "uint8")
    half = np.array(0.5, "float32")
    q8 = {"dtype": "uint8"}
    b = builder()
    x = b.input("x", (2, 4), "uint8")
    scaled = b.add1("mul", [b.add1("dequantize_linear", [x, b.const(s), b.const(z)]), b.const(half)])
    before = b.finish([b.add1("quantize_linear", [scaled, b.const(s2), b.const(z2)], q8)])
    e = builder()
    x = e.input("x", (2, 4), "uint8")
    i = np.arange(256, dtype="float32")
    table = np.clip(np.rint((i - 100) * s * half / s2) + 7, 0, 255).astype("uint8")
    want = e.finish([e.add1("gather", [e.const(table), x], {"axis": 0})])
    got = fold_qdq_tables(before)
    assert_graph_equal(got, want)
    xin = np.arange(8, dtype="uint8").reshape(2, 4) * 31
    np.testing.assert_array_equal(run_reference(got, xin)[0], run_reference(before, xin)[0])

    b = builder()                                   # a per-element constant: left alone
    x = b.input("x", (2, 4), "uint8")
    shifted = b.add1("add", [b.add1("dequantize_linear", [x, b.const(s), b.const(z)]), b.const(rand(4))])
    alone = b.finish([b.add1("quantize_linear", [shifted, b.const(s2), b.const(z2)], q8)])
    assert fold_qdq_tables(alone) is alone


def test_alter_layout_int8_packs_the_weight_and_folds_the_zero_point():
    from tensorforge.ops import x86_intrin as X
    from tensorforge.ops.schedules.cpu_matmul_int8 import k_align, pack_b_vnni
    unit = X.int8_unit()
    if unit is None:
        pytest.skip("this CPU has no int8 dot-product unit")
    lanes = X.LANES[unit]
    w = RNG.integers(-128, 128, (6, 5)).astype("int8")
    b = builder()
    x = b.input("x", (3, 6), "uint8")
    before = b.finish([b.add1("matmul_integer", [x, b.const(w), b.const(np.array(9, "uint8")),
                                                 b.const(np.zeros(5, "int8"))])])
    e = builder()
    x = e.input("x", (3, 6), "uint8")
    corr = (9 * w.astype(np.int64).sum(axis=0)).astype("int32")
    packed = pack_b_vnni(w, lanes, k_align(unit))
    assert packed.shape[1] * 4 == (8 if unit != "amx" else 64)        # k = 6 padded to the unit's groups
    want = e.finish([e.add1("matmul_integer_vnni", [x, e.const(packed), e.const(corr)], {"units": 5})])
    assert_graph_equal(alter_layout_int8(before, Target.parse("c")), want)
    assert alter_layout_int8(before, AVX512) is before          # an explicit -mcpu: the host's units may differ
    xin = RNG.integers(0, 256, (3, 6)).astype("uint8")
    np.testing.assert_array_equal(run_reference(want, xin)[0], run_reference(before, xin)[0])


def test_fold_batch_norm_into_conv_and_bias():
    w, bias = rand(4, 3, 3, 3), rand(4, 1, 1)
    gamma, beta, mean, var = _bn_stats(4)
    eps = 1e-3
    b = builder()
    x = b.input("x", (1, 3, 6, 6), "float32")
    y = b.add1("conv2d", [x, b.const(w, "w")], CONV)
    y = b.add1("add", [y, b.const(bias, "bias")])
    y = b.add1("batch_norm", [y, *(b.const(a) for a in (gamma, beta, mean, var))], {"epsilon": eps})
    before = b.finish([b.add1("relu", [y])])

    s = gamma.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)
    e = builder()
    x = e.input("x", (1, 3, 6, 6), "float32")
    y = e.add1("conv2d", [x, e.const((w * s[:, None, None, None]).astype("float32"))], CONV)
    shift = (beta - mean * s + bias.reshape(-1) * s).astype("float32").reshape(4, 1, 1)
    y = e.add1("add", [y, e.const(shift)])
    want = e.finish([e.add1("relu", [y])])
    got = fold_batch_norm(before)
    assert_graph_equal(got, want, rtol=1e-5, atol=1e-6)
    xin = rand(1, 3, 6, 6)
    np.testing.assert_allclose(run_reference(got, xin)[0], run_reference(before, xin)[0], rtol=1e-4, atol=1e-5)


def test_fold_batch_norm_into_dense():
    w = rand(5, 3)
    gamma, beta, mean, var = _bn_stats(5)
    b = builder()
    x = b.input("x", (2, 3), "float32")
    y = b.add1("dense", [x, b.const(w)])
    before = b.finish([b.add1("batch_norm", [y, *(b.const(a) for a in (gamma, beta, mean, var))])])

    s = gamma.astype(np.float64) / np.sqrt(var.astype(np.float64) + 1e-5)
    e = builder()
    x = e.input("x", (2, 3), "float32")
    y = e.add1("dense", [x, e.const((w * s[:, None]).astype("float32"))])
    want = e.finish([e.add1("add", [y, e.const((beta - mean * s).astype("float32"))])])
    assert_graph_equal(fold_batch_norm(before), want, rtol=1e-5, atol=1e-6)


def test_fold_batch_norm_leaves_a_shared_conv_output_alone():
    """The conv's output is also a graph output: its weights stay; the batch norm alone becomes
    a scale and a shift."""
    b = builder()
    x = b.input("x", (1, 3, 6, 6), "float32")
    w = b.const(rand(4, 3, 3, 3))
    y = b.add1("conv2d", [x, w], CONV)
    n = b.add1("batch_norm", [y, *(b.const(a) for a in _bn_stats(4))])
    g = b.finish([n, y])
    got = fold_batch_norm(g)
    assert [n.op for n in got.nodes] == ["conv2d", "mul", "add"] and got.nodes[0].inputs[1] is w
    xs = rand(1, 3, 6, 6)
    for a, e in zip(run_reference(got, xs), run_reference(g, xs)):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5)


def test_fold_batch_norm_makes_a_standalone_one_a_scale_and_a_shift():
    """A batch norm with constant statistics after no weighted layer (here an add) becomes
    mul(x, gamma / sqrt(var + eps)) then add(beta - mean * scale), per channel."""
    gamma, beta, mean, var = _bn_stats(4)
    b = builder()
    x = b.input("x", (2, 4, 3, 3), "float32")
    s = b.add1("add", [x, x])
    before = b.finish([b.add1("batch_norm", [s, *(b.const(a) for a in (gamma, beta, mean, var))], {"epsilon": 1e-3})])
    scale = gamma.astype(np.float64) / np.sqrt(var.astype(np.float64) + 1e-3)
    e = builder()
    x = e.input("x", (2, 4, 3, 3), "float32")
    s = e.add1("add", [x, x])
    m = e.add1("mul", [s, e.const(scale.astype("float32").reshape(-1, 1, 1))])
    want = e.finish([e.add1("add", [m, e.const((beta - mean * scale).astype("float32").reshape(-1, 1, 1))])])
    assert_graph_equal(fold_batch_norm(before), want, rtol=1e-6)


# -- alter_layout ---------------------------------------------------------------------------------

def test_alter_layout_transposes_dense_weights_and_packs_convs():
    wd, wc = rand(6, 8), rand(32, 3, 3, 3)
    b = builder()
    x = b.input("x", (2, 8), "float32")
    img = b.input("img", (1, 3, 8, 8), "float32")
    y = b.add1("dense", [x, b.const(wd)])
    z = b.add1("relu", [b.add1("conv2d", [img, b.const(wc)], CONV)])
    before = b.finish([y, z])

    e = builder()
    x = e.input("x", (2, 8), "float32")
    img = e.input("img", (1, 3, 8, 8), "float32")
    y = e.add1("matmul", [x, e.const(np.ascontiguousarray(wd.T))])
    blocked = e.add1("conv2d_nchwc", [img, e.const(pack_oihw(wc, 32))],
                     {k: CONV[k] for k in ("strides", "padding", "dilations")})
    z = e.add1("relu", [e.add1("nchwc_to_nchw", [blocked])])
    assert_graph_equal(alter_layout(before, AVX512), e.finish([y, z]))


def test_alter_layout_blocks_a_conv_with_a_run_time_weight_packed_by_nodes():
    # a dynamic filter: OIHW -> OIHW[32]o by a reshape and a transpose per call, then the blocked
    # conv (the generic template took 2.9x ONNX Runtime's time)
    b = builder()
    x, w = b.input("x", (1, 8, 6, 6), "float32"), b.input("w", (64, 8, 3, 3), "float32")
    before = b.finish([b.add1("conv2d", [x, w], CONV)])
    e = builder()
    x, w = e.input("x", (1, 8, 6, 6), "float32"), e.input("w", (64, 8, 3, 3), "float32")
    split = e.add1("reshape", [w], {"shape": (2, 32, 8, 3, 3)})
    packed = e.add1("transpose", [split], {"perm": (0, 2, 3, 4, 1)})
    y = e.add1("conv2d_nchwc", [x, packed], {k: CONV[k] for k in ("strides", "padding", "dilations")})
    got = alter_layout(before, AVX512)
    assert_graph_equal(got, e.finish([e.add1("nchwc_to_nchw", [y])]))
    ins = [rand(1, 8, 6, 6), rand(64, 8, 3, 3)]
    np.testing.assert_allclose(run_reference(got, *ins)[0], run_reference(before, *ins)[0], rtol=1e-4, atol=1e-4)
    # grouped and 1-D convs too; filters that leave part of a block stay on the generic template
    for op, shape_x, shape_w, attrs in [
            ("conv2d", (2, 8, 7, 5), (32, 4, 3, 1), {**CONV, "groups": 2, "strides": (2, 1)}),
            ("conv1d", (1, 6, 20), (16, 6, 5), {"strides": (2,), "padding": (2, 1), "dilations": (1,), "groups": 1})]:
        b = builder()
        x, w = b.input("x", shape_x, "float32"), b.input("w", shape_w, "float32")
        before = b.finish([b.add1(op, [x, w], attrs)])
        got = alter_layout(before, AVX512)
        assert any(n.op == "conv2d_nchwc" for n in got.nodes)
        ins = [rand(*shape_x), rand(*shape_w)]
        np.testing.assert_allclose(run_reference(got, *ins)[0], run_reference(before, *ins)[0], rtol=1e-4, atol=1e-4)
    b = builder()
    x, w = b.input("x", (1, 8, 6, 6), "float32"), b.input("w", (20, 8, 3, 3), "float32")
    odd = b.finish([b.add1("conv2d", [x, w], CONV)])
    assert alter_layout(odd, AVX512) is odd


def test_alter_layout_leaves_narrow_convs_alone():
    b = builder()
    img = b.input("img", (1, 4, 8, 8), "float32")
    pointwise = dict(CONV, padding=(0, 0, 0, 0))
    y = b.add1("conv2d", [img, b.const(rand(6, 4, 1, 1))], pointwise)       # 6 channels, no overlap: im2col's
    d = b.add1("conv2d", [img, b.const(rand(4, 1, 3, 3))], dict(CONV, groups=4))    # depthwise
    g = b.finish([y, d])
    assert alter_layout(g, AVX512) is g


def test_alter_layout_blocks_a_grouped_conv_per_group():
    """16 output channels in 2 groups: blocks of 8 (half a vector), each inside one group."""
    wc = rand(16, 2, 3, 3)
    b = builder()
    img = b.input("img", (1, 4, 8, 8), "float32")
    g = b.finish([b.add1("conv2d", [img, b.const(wc)], dict(CONV, groups=2))])
    e = builder()
    img = e.input("img", (1, 4, 8, 8), "float32")
    attrs = {k: CONV[k] for k in ("strides", "padding", "dilations")}
    blocked = e.add1("conv2d_nchwc", [img, e.const(pack_oihw(wc, 8))], dict(attrs, groups=2))
    assert_graph_equal(alter_layout(g, AVX512), e.finish([e.add1("nchwc_to_nchw", [blocked])]))


@pytest.mark.parametrize("target,per_group,read_by_conv,block", [
    ("c -mcpu=x86-64-v3", 12, False, 16),   # AVX2: padded to a whole vector, not blocks of 4 (SSE width)
    ("c -mcpu=x86-64-v3", 4, False, 4),     # at most half a vector of filters: half a vector
    ("c -mcpu=x86-64-v4", 24, True, 8),     # AVX-512: half a vector is 8 lanes, as wide as AVX2's whole,
    ("c -mcpu=x86-64-v4", 24, False, 32),   # padded to whole vectors where no blocked conv reads them
    ("c -mcpu=x86-64-v4", 8, False, 8),     # no more than half a vector: never padded further
])
def test_alter_layout_blocks_of_filters_per_group(target, per_group, read_by_conv, block):
    # (16 channels per group: windows of 144 values per group, too many for the product per
    # group that alter_layout_im2col runs between NCHW values)
    b = builder()
    img = b.input("img", (1, 32, 8, 8), "float32")
    y = b.add1("conv2d", [img, b.const(rand(2 * per_group, 16, 3, 3))], dict(CONV, groups=2))
    if read_by_conv:
        y = b.add1("conv2d", [b.add1("relu", [y]), b.const(rand(16, 2 * per_group, 3, 3))], CONV)
    g = b.finish([y])
    out = alter_layout(g, Target.parse(target))
    conv = [n for n in out.nodes if n.op == "conv2d_nchwc"][0]
    assert conv.outputs[0].shape[-1] == block
    padded = conv.outputs[0].shape[1] * block // 2
    assert padded == -(-per_group // block) * block
    x = RNG.standard_normal((1, 32, 8, 8)).astype("float32")
    np.testing.assert_allclose(run_reference(out, x)[0], run_reference(g, x)[0], rtol=1e-4, atol=1e-4)


def test_alter_layout_im2col_runs_a_grouped_conv_with_small_windows_as_a_product_per_group():
    """2 groups of 3 -> 50 channels, 1x3 windows between NCHW values: the window matrix seen as
    (N, G, 9, positions), W as (G, 50, 9), the bias moved before the reshape to NCHW."""
    from tensorforge.graph.passes.alter_layout_im2col import alter_layout_im2col
    w, bias = rand(100, 3, 1, 3), rand(100, 1, 1)
    conv = {"strides": (1, 1), "padding": (0, 1, 0, 1), "dilations": (1, 1), "groups": 2}
    b = builder()
    img = b.input("img", (1, 6, 10, 7), "float32")
    before = b.finish([b.add1("add", [b.add1("conv2d", [img, b.const(w)], conv), b.const(bias)])])

    e = builder()
    img = e.input("img", (1, 6, 10, 7), "float32")
    cols = e.add1("im2col", [img], {"kernel": (1, 3), "strides": (1, 1), "padding": (0, 1, 0, 1),
                                    "dilations": (1, 1), "pad_value": 0, "per_image": True})
    groups = e.add1("reshape", [cols], {"shape": (1, 2, 9, 70)})
    product = e.add1("matmul", [e.const(w.reshape(2, 50, 9)), groups])
    flat = e.add1("add", [product, e.const(bias.reshape(1, 2, 50, 1))])
    want = e.finish([e.add1("reshape", [flat], {"shape": (1, 100, 10, 7)})])
    got = alter_layout_im2col(alter_layout(before, AVX512), AVX512)
    assert_graph_equal(got, want)
    x = rand(1, 6, 10, 7)
    np.testing.assert_allclose(run_reference(got, x)[0], run_reference(before, x)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("filters,groups,width,stays", [(1, 1, 40, True), (3, 1, 40, True), (4, 1, 40, False),
                                                       (1, 1, 14, False), (2, 2, 40, True), (8, 2, 40, False)])
def test_a_conv_of_few_filters_over_long_rows_stays_nchw(filters, groups, width, stays):
    """At most ROW_FILTERS filters per group over output rows of two vectors or more: neither
    blocked on padded filters nor im2col's GEMM; the generic template vectorizes the rows."""
    from tensorforge.graph.passes.alter_layout_im2col import alter_layout_im2col
    b = builder()
    img = b.input("img", (1, 16, 24, width), "float32")
    g = b.finish([b.add1("conv2d", [img, b.const(rand(filters, 16 // groups, 3, 3))], dict(CONV, groups=groups))])
    out = alter_layout_im2col(alter_layout(g, AVX512), AVX512)
    assert ([n.op for n in out.nodes] == ["conv2d"]) == stays


def test_whole_vectors_where_a_conv_reads_the_output_blocked_or_not():
    """On AVX-512, 24 filters per group run on 16-lane vectors padded to 32 (the padding sliced
    off on the way to NCHW) unless a blocked conv reads the output; the values are the same."""
    from tensorforge.graph.passes.alter_layout import _whole_vectors
    avx512, avx2 = Target.parse("c -mcpu=x86-64-v4"), Target.parse("c -mcpu=x86-64-v3")
    assert [_whole_vectors(c, avx512) for c in (8, 16, 24, 40, 48, 56, 100)] == [8, 16, 32, 48, 48, 64, 112]
    assert [_whole_vectors(c, avx2) for c in (4, 8, 16, 24)] == [4, 8, 16, 24]


# -- unique_names ---------------------------------------------------------------------------------

def test_unique_names_merges_equal_constants_and_renames_the_rest():
    w = rand(4, 4)
    x = Value("x", (2, 4), "float32")
    packed_a, packed_b = Value("w_p", (4, 4), "float32"), Value("w_p", (4, 4), "float32")    # equal
    other = Value("w_p", (4, 4), "float32")                                                  # differs
    row_a, row_b = Value("x_row", (2, 4), "float32"), Value("x_row", (2, 4), "float32")
    y = Value("y", (2, 4), "float32")
    clash = Value("y", (2, 4), "float32")              # an intermediate named like the output
    ya, yb, yc = (Value(f"y{i}", (2, 4), "float32") for i in "abc")
    nodes = [Node("relu", (x,), (row_a,)), Node("matmul", (row_a, packed_a), (ya,)),
             Node("relu", (x,), (row_b,)), Node("matmul", (row_b, packed_b), (yb,)),
             Node("matmul", (x, other), (yc,)), Node("add", (ya, yb), (clash,)), Node("add", (clash, yc), (y,))]
    before = Graph((x,), (y,), tuple(nodes), {packed_a: w, packed_b: w.copy(), other: w + 1}, "g")
    after = unique_names(before)

    other2, row_b2, clash2 = (Value(n, (2, 4), "float32") for n in ("w_p_2", "x_row_2", "y_2"))
    want = [Node("relu", (x,), (row_a,)), Node("matmul", (row_a, packed_a), (ya,)),
            Node("relu", (x,), (row_b2,)), Node("matmul", (row_b2, packed_a), (yb,)),
            Node("matmul", (x, other2), (yc,)), Node("add", (ya, yb), (clash2,)), Node("add", (clash2, yc), (y,))]
    assert_graph_equal(after, Graph((x,), (y,), tuple(want), {packed_a: w, other2: w + 1}, "g"))
    xs = rand(2, 4)
    np.testing.assert_allclose(run_reference(after, xs)[0], run_reference(before, xs)[0], rtol=1e-6)
    assert unique_names(after) is after


# -- share_equal_params ---------------------------------------------------------------------------

def test_share_equal_params_merges_constants_with_equal_bytes():
    """Equal weights under other names become one; a weight that differs in one element or in the
    sign of a zero, a constant under MIN_BYTES and a constant output stay apart."""
    w = rand(128, 128)
    w[0, 0] = 0.0
    one_off, neg_zero = w.copy(), w.copy()
    one_off[100, 50] += 1.0
    neg_zero[0, 0] = -0.0
    small = rand(4, 4)
    x, s = Value("x", (2, 128), "float32"), Value("s", (2, 4), "float32")
    ws = [Value(f"w{k}", (128, 128), "float32") for k in range(4)]
    smalls = [Value(f"small{k}", (4, 4), "float32") for k in range(2)]
    out_w, y = Value("out_w", (128, 128), "float32"), Value("y", (2, 128), "float32")
    ys = [Value(f"y{k}", (2, 128), "float32") for k in range(4)]
    zs = [Value(f"z{k}", (2, 4), "float32") for k in range(2)]
    sums = [Value(f"sum{k}", (2, 128), "float32") for k in range(2)]
    def graph(reads, params):
        nodes = [Node("matmul", (x, r), (o,)) for r, o in zip(reads, ys)]
        nodes += [Node("matmul", (s, r), (o,)) for r, o in zip(reads[4:], zs)]
        nodes += [Node("add", (ys[0], ys[1]), (sums[0],)), Node("add", (ys[2], ys[3]), (sums[1],)),
                  Node("add", (sums[0], sums[1]), (y,))]
        return Graph((x, s), (y, zs[0], zs[1], out_w), tuple(nodes), params, "g")
    arrays = [w, w.copy(), one_off, neg_zero]
    before = graph(ws + smalls, {**dict(zip(ws, arrays)), smalls[0]: small, smalls[1]: small.copy(), out_w: w.copy()})
    after = share_equal_params(before)
    want = graph([ws[0], ws[0], ws[2], ws[3]] + smalls,
                 {ws[0]: w, ws[2]: one_off, ws[3]: neg_zero, smalls[0]: small, smalls[1]: small, out_w: w})
    assert_graph_equal(after, want)          # (compares constants by value, not by identity:)
    reads = [n.inputs[1] for n in after.nodes if n.op == "matmul"]
    assert reads[0] is reads[1] and len({id(r) for r in reads}) == 5 and len(after.params) == 6
    assert share_equal_params(after) is after


# -- trim_conv_taps -------------------------------------------------------------------------------

def test_trim_conv_taps_cuts_the_taps_that_only_read_padding():
    w = rand(6, 4, 5, 5)
    b = builder()
    x = b.input("x", (1, 4, 12, 1), "float32")          # width 1: only the centre column meets data
    y = b.add1("conv2d", [x, b.const(w)], {"strides": (1, 1), "padding": (2, 2, 2, 2), "dilations": (1, 1),
                                          "groups": 1})
    before = b.finish([y])

    e = builder()
    x = e.input("x", (1, 4, 12, 1), "float32")
    y = e.add1("conv2d", [x, e.const(np.ascontiguousarray(w[:, :, :, 2:3]))],
               {"strides": (1, 1), "padding": (2, 0, 2, 0), "dilations": (1, 1), "groups": 1})
    assert_rewrites(trim_conv_taps, before, e.finish([y]))


def test_trim_conv_taps_leaves_convs_whose_every_tap_meets_data_alone():
    b = builder()
    x = b.input("x", (1, 4, 8, 8), "float32")
    one = b.input("one", (1, 4, 1, 1), "float32")
    two = b.input("two", (1, 4, 2, 2), "float32")
    y = b.add1("conv2d", [x, b.const(rand(8, 4, 3, 3))], CONV)                      # 8x8, pad 1
    # only the second tap (at 3 - 2 = 1) meets data: trimmed, the front padding would be -1
    z = b.add1("conv2d", [two, b.const(rand(8, 4, 2, 2))], dict(CONV, padding=(2, 2, 0, 0), dilations=(3, 3)))
    wt = b.input("w", (8, 4, 3, 3), "float32")
    v = b.add1("conv2d", [one, wt], CONV)                                            # weight at run time
    g = b.finish([y, z, v])
    assert trim_conv_taps(g, AVX512) is g


# -- alter_layout_column_conv ---------------------------------------------------------------------

def test_alter_layout_column_conv_lays_a_column_conv_along_a_row():
    w = rand(16, 4, 5, 1)
    b = builder()
    x = b.input("x", (2, 4, 20, 1), "float32")
    y = b.add1("conv2d", [x, b.const(w)], {"strides": (2, 1), "padding": (1, 0, 2, 0), "dilations": (1, 1),
                                          "groups": 1})
    before = b.finish([y])

    e = builder()
    x = e.input("x", (2, 4, 20, 1), "float32")
    row = e.add1("reshape", [x], {"shape": (2, 4, 1, 20)})
    conv = e.add1("conv2d", [row, e.const(w.reshape(16, 4, 1, 5))],
                  {"strides": (1, 2), "padding": (0, 1, 0, 2), "dilations": (1, 1), "groups": 1})
    y = e.add1("reshape", [conv], {"shape": (2, 16, 10, 1)})
    assert_rewrites(alter_layout_column_conv, before, e.finish([y]))


def test_alter_layout_column_conv_leaves_wide_and_1x1_convs_alone():
    b = builder()
    x = b.input("x", (1, 4, 8, 8), "float32")
    col = b.input("c", (1, 4, 8, 1), "float32")
    y = b.add1("conv2d", [x, b.const(rand(16, 4, 3, 1))], CONV)                # width 8
    z = b.add1("conv2d", [col, b.const(rand(16, 4, 1, 1))], dict(CONV, padding=(0, 0, 0, 0)))  # 1x1
    g = b.finish([y, z])
    assert alter_layout_column_conv(g, AVX512) is g


# -- conv_as_tap_planes ---------------------------------------------------------------------------

def test_conv_as_tap_planes_makes_a_product_per_tap_and_sums_the_planes():
    w = rand(2, 8, 3, 2)                       # 2 filters of 8 channels, 3x2 taps
    b = builder()
    x = b.input("x", (1, 8, 20, 24), "float32")
    y = b.add1("conv2d", [x, b.const(w)], {"strides": (1, 1), "padding": (1, 0, 1, 1), "dilations": (2, 1),
                                          "groups": 1})
    before = b.finish([y])

    e = builder()
    x = e.input("x", (1, 8, 20, 24), "float32")
    # plane m * 6 + ky * 2 + kx holds filter m's tap (ky, kx) over every input position
    per_tap = np.stack([w[m, :, ky, kx] for m in range(2) for ky in range(3) for kx in range(2)])
    planes = e.add1("conv2d", [x, e.const(per_tap.reshape(12, 8, 1, 1))], {"groups": 1})
    y = e.add1("tap_sum", [planes], {"kernel": (3, 2), "padding": (1, 0, 1, 1), "dilations": (2, 1)})
    assert_rewrites(conv_as_tap_planes, before, e.finish([y]))


def test_conv_as_tap_planes_leaves_many_filters_strides_and_one_tap_alone():
    b = builder()
    x = b.input("x", (1, 8, 10, 12), "float32")
    y = b.add1("conv2d", [x, b.const(rand(8, 8, 3, 3))], CONV)                       # 8 filters: a block
    z = b.add1("conv2d", [x, b.const(rand(2, 8, 3, 3))], dict(CONV, strides=(2, 2)))  # strided
    v = b.add1("conv2d", [x, b.const(rand(2, 8, 1, 1))], dict(CONV, padding=(0, 0, 0, 0)))  # one tap
    g = b.finish([y, z, v])
    assert conv_as_tap_planes(g, AVX512) is g


# -- conv_transpose_as_conv ----------------------------------------------------------------------

def test_conv_transpose_as_conv_flips_the_kernel_and_swaps_its_channels():
    w = rand(6, 2, 3, 2)                       # (C, M/g, KH, KW), 2 groups of 3 -> 2 channels
    b = builder()
    x = b.input("x", (1, 6, 7, 5), "float32")
    y = b.add1("conv_transpose2d", [x, b.const(w)], {"strides": (1, 1), "padding": (1, 0, 2, 1),
                                                      "output_padding": (0, 0), "dilations": (2, 1),
                                                      "groups": 2})
    before = b.finish([y])

    flipped = np.empty((4, 3, 3, 2), "float32")   # (M, C/g, KH, KW), written out tap by tap
    for g in range(2):
        for o in range(2):
            for c in range(3):
                for i in range(3):
                    for j in range(2):
                        flipped[2 * g + o, c, i, j] = w[3 * g + c, o, 2 - i, 1 - j]
    e = builder()
    x = e.input("x", (1, 6, 7, 5), "float32")
    y = e.add1("conv2d", [x, e.const(flipped)], {"strides": (1, 1), "dilations": (2, 1), "groups": 2,
                                                  "padding": (3, 1, 2, 0)})     # d (K - 1) - p
    assert_rewrites(conv_transpose_as_conv, before, e.finish([y]))


def test_conv_transpose_as_conv_leaves_strided_and_spreading_layers_alone():
    b = builder()
    x = b.input("x", (1, 4, 8, 8), "float32")
    one = b.input("one", (1, 4, 1, 1), "float32")
    attrs = {"strides": (2, 2), "padding": (1, 1, 1, 1), "output_padding": (0, 0), "dilations": (1, 1),
             "groups": 1}
    y = b.add1("conv_transpose2d", [x, b.const(rand(4, 8, 4, 4))], attrs)                   # stride 2
    z = b.add1("conv_transpose2d", [one, b.const(rand(4, 8, 4, 4))],
               dict(attrs, strides=(1, 1), padding=(0, 0, 0, 0)))                          # 1x1 -> 4x4
    g = b.finish([y, z])
    assert conv_transpose_as_conv(g, AVX512) is g


# -- conv3d_as_conv2d ---------------------------------------------------------------------------

def test_conv3d_as_conv2d_stacks_the_depth_taps_as_channels():
    w = rand(6, 4, 3, 3, 3)                    # (M, C, KD, KH, KW)
    b = builder()
    x = b.input("x", (2, 4, 5, 8, 8), "float32")
    y = b.add1("conv3d", [x, b.const(w)], {"strides": (2, 1, 1), "padding": (1, 1, 1, 1, 0, 1),
                                            "dilations": (1, 1, 1), "groups": 1})
    before = b.finish([y])                     # depth: (5 + 1 + 1 - 3) / 2 + 1 = 3 frames

    e = builder()
    x = e.input("x", (2, 4, 5, 8, 8), "float32")
    padded = e.add1("pad", [x], {"pads": (0, 0, 1, 0, 0, 0, 0, 1, 0, 0)})
    taps = [e.add1("slice", [padded], {"starts": (t,), "ends": (t + 5,), "axes": (2,), "steps": (2,)})
            for t in range(3)]
    stacked = e.add1("concat", taps, {"axis": 2})                           # (N, C, KD * Do, H, W)
    split = e.add1("reshape", [stacked], {"shape": (2, 4, 3, 3, 8, 8)})
    moved = e.add1("transpose", [split], {"perm": (0, 3, 1, 2, 4, 5)})
    frames = e.add1("reshape", [moved], {"shape": (6, 12, 8, 8)})          # (N Do, C KD, H, W)
    y2 = e.add1("conv2d", [frames, e.const(w.reshape(6, 12, 3, 3))],
                {"strides": (1, 1), "dilations": (1, 1), "groups": 1, "padding": (1, 1, 0, 1)})
    back = e.add1("reshape", [y2], {"shape": (2, 3, 6, 7, 8)})
    y = e.add1("transpose", [back], {"perm": (0, 2, 1, 3, 4)})
    assert_rewrites(conv3d_as_conv2d, before, e.finish([y]))


# -- alter_layout_im2col --------------------------------------------------------------------------

def test_alter_layout_im2col_makes_a_narrow_conv_one_gemm():
    w = rand(8, 4, 3, 3)
    b = builder()
    img = b.input("img", (1, 4, 8, 8), "float32")
    y = b.add1("conv2d", [img, b.const(w)], CONV)              # 8 output channels: no blocked template
    before = b.finish([y])

    e = builder()
    img = e.input("img", (1, 4, 8, 8), "float32")
    cols = e.add1("im2col", [img], {"kernel": (3, 3), "strides": (1, 1), "padding": (1, 1, 1, 1),
                                    "dilations": (1, 1), "pad_value": 0, "per_image": True})
    prod = e.add1("matmul", [e.const(np.ascontiguousarray(w.reshape(8, 36))), cols])     # (1, 8, 64): NCHW
    y = e.add1("reshape", [prod], {"shape": (1, 8, 8, 8)})
    assert_rewrites(alter_layout_im2col, before, e.finish([y]))


def test_alter_layout_im2col_puts_windows_in_rows_when_channels_outnumber_positions():
    w = rand(12, 4, 3, 3)
    b = builder()
    img = b.input("img", (1, 4, 3, 3), "float32")
    y = b.add1("conv2d", [img, b.const(w)], CONV)              # 9 positions, 12 channels
    before = b.finish([y])

    e = builder()
    img = e.input("img", (1, 4, 3, 3), "float32")
    cols = e.add1("im2col", [img], {"kernel": (3, 3), "strides": (1, 1), "padding": (1, 1, 1, 1),
                                    "dilations": (1, 1), "pad_value": 0})
    prod = e.add1("matmul", [cols, e.const(np.ascontiguousarray(w.reshape(12, 36).T))])
    y = e.add1("transpose", [e.add1("reshape", [prod], {"shape": (1, 3, 3, 12)})], {"perm": (0, 3, 1, 2)})
    assert_rewrites(alter_layout_im2col, before, e.finish([y]))


def test_alter_layout_im2col_runs_the_bias_and_activation_on_the_product():
    """A per-channel bias and a relu after the conv move before the reshape back to NCHW, onto
    the (N, M, positions) product, so its template takes them in registers; an add of a
    constant that varies along the image's rows stays after it."""
    w, bias = rand(8, 4, 3, 3), rand(1, 8, 1, 1)
    b = builder()
    img = b.input("img", (2, 4, 6, 5), "float32")
    y = b.add1("relu", [b.add1("add", [b.add1("conv2d", [img, b.const(w)], CONV), b.const(bias)])])
    row_bias = b.add1("add", [y, b.const(rand(6, 1))])        # varies along the image's rows: stays
    before = b.finish([row_bias])

    e = builder()
    img = e.input("img", (2, 4, 6, 5), "float32")
    cols = e.add1("im2col", [img], {"kernel": (3, 3), "strides": (1, 1), "padding": (1, 1, 1, 1),
                                    "dilations": (1, 1), "pad_value": 0, "per_image": True})
    prod = e.add1("matmul", [e.const(np.ascontiguousarray(w.reshape(8, 36))), cols])
    flat = e.add1("relu", [e.add1("add", [prod, e.const(bias.reshape(1, 8, 1))])])
    y = e.add1("reshape", [flat], {"shape": (2, 8, 6, 5)})
    expected = e.finish([e.add1("add", [y, e.const(before.params[before.nodes[-1].inputs[1]])])])
    assert_rewrites(alter_layout_im2col, before, expected)


def test_alter_layout_im2col_makes_a_pointwise_conv_a_product_on_the_image():
    w = rand(3, 16, 1, 1)
    b = builder()
    img = b.input("img", (2, 16, 5, 6), "float32")
    y = b.add1("conv2d", [img, b.const(w)], dict(CONV, padding=(0, 0, 0, 0)))   # a 16 -> 3 head
    before = b.finish([y])

    e = builder()
    img = e.input("img", (2, 16, 5, 6), "float32")
    rows = e.add1("reshape", [img], {"shape": (2, 16, 30)})
    prod = e.add1("matmul", [e.const(np.ascontiguousarray(w.reshape(3, 16))), rows])
    y = e.add1("reshape", [prod], {"shape": (2, 3, 5, 6)})
    assert_rewrites(alter_layout_im2col, before, e.finish([y]))


def test_alter_layout_im2col_leaves_grouped_and_runtime_weight_convs_alone():
    b = builder()
    img = b.input("img", (1, 4, 8, 8), "float32")
    wt = b.input("w", (8, 4, 3, 3), "float32")
    y = b.add1("conv2d", [img, wt], CONV)                                       # weight given at run time
    z = b.add1("conv2d", [img, b.const(rand(16, 2, 3, 3))], dict(CONV, groups=2))
    g = b.finish([y, z])
    assert alter_layout_im2col(g, AVX512) is g


# -- alter_layout_propagate -----------------------------------------------------------------------

def test_alter_layout_propagate_keeps_values_blocked_between_convs():
    w1, w2, bias = pack_oihw(rand(16, 16, 3, 3), 16), pack_oihw(rand(16, 16, 3, 3), 16), rand(16, 1, 1)
    attrs = {k: CONV[k] for k in ("strides", "padding", "dilations")}
    b = builder()
    x = b.input("x", (1, 16, 6, 6), "float32")
    y = b.add1("nchwc_to_nchw", [b.add1("conv2d_nchwc", [x, b.const(w1)], attrs)])
    y = b.add1("relu", [b.add1("add", [y, b.const(bias)])])
    y = b.add1("nchwc_to_nchw", [b.add1("conv2d_nchwc", [y, b.const(w2)], attrs)])
    before = b.finish([y])

    e = builder()
    x = e.input("x", (1, 16, 6, 6), "float32")
    y = e.add1("conv2d_nchwc", [x, e.const(w1)], attrs)
    y = e.add1("relu", [e.add1("add", [y, e.const(bias.reshape(1, 1, 1, 1, 16))])])   # bias re-laid out
    y = e.add1("conv2d_nchwc", [y, e.const(w2)], dict(attrs, data_layout="NCHW16c"))
    want = e.finish([e.add1("nchwc_to_nchw", [y])])
    got = alter_layout_propagate(before, AVX512)
    assert_graph_equal(got, want)
    xin = rand(1, 16, 6, 6)
    np.testing.assert_allclose(run_reference(got, xin)[0], run_reference(before, xin)[0], rtol=1e-4, atol=1e-4)


def test_alter_layout_propagate_converts_back_for_an_op_that_needs_nchw():
    w = pack_oihw(rand(16, 16, 1, 1), 16)
    attrs = {"strides": (1, 1), "padding": (0, 0, 0, 0), "dilations": (1, 1)}
    b = builder()
    x = b.input("x", (1, 16, 4, 4), "float32")
    y = b.add1("nchwc_to_nchw", [b.add1("conv2d_nchwc", [x, b.const(w)], attrs)])
    before = b.finish([b.add1("softmax", [y], {"axes": (1,)})])
    assert_graph_equal(alter_layout_propagate(before, AVX512), before)     # the transform stays where it was


def test_alter_layout_propagate_without_blocked_values_is_a_no_op():
    b = builder()
    x = b.input("x", (1, 16, 4, 4), "float32")
    g = b.finish([b.add1("relu", [x])])
    assert alter_layout_propagate(g, AVX512) is g


# -- alter_layout_winograd ------------------------------------------------------------------------

def test_alter_layout_winograd_transforms_3x3_weights_once():
    from tensorforge.ops.nn_conv_winograd import winograd_matrices

    wp = pack_oihw(rand(16, 16, 3, 3), 16)
    attrs = {k: CONV[k] for k in ("strides", "padding", "dilations")}
    b = builder()
    x = b.input("x", (1, 16, 8, 8), "float32")
    y = b.add1("conv2d_nchwc", [x, b.const(wp)], attrs)
    before = b.finish([b.add1("nchwc_to_nchw", [y])])

    _, g, _ = winograd_matrices(4)                                # 8x8 output: 4x4 tiles
    u = np.einsum("ak,fckld,bl->abfcd", g, wp.astype(np.float64), g).astype("float32")
    e = builder()
    x = e.input("x", (1, 16, 8, 8), "float32")
    xb = e.add1("nchw_to_nchwc", [x], {"block": 16})
    y = e.add1("conv2d_winograd_nchwc", [xb, e.const(u)],
               {"tile": 4, "padding": (1, 1, 1, 1), "data_layout": "NCHW16c"})
    want = e.finish([e.add1("nchwc_to_nchw", [y])])
    got = alter_layout_winograd(before, AVX512)
    assert_graph_equal(got, want, rtol=1e-5, atol=1e-5)
    xin = rand(1, 16, 8, 8)
    np.testing.assert_allclose(run_reference(got, xin)[0], run_reference(before, xin)[0], rtol=1e-3, atol=1e-3)


def test_alter_layout_winograd_keeps_strided_and_narrow_convs_direct():
    b = builder()
    x = b.input("x", (1, 16, 8, 8), "float32")
    strided = {"strides": (2, 2), "padding": (1, 1, 1, 1), "dilations": (1, 1)}
    y = b.add1("conv2d_nchwc", [x, b.const(pack_oihw(rand(16, 16, 3, 3), 16))], strided)
    z = b.add1("conv2d_nchwc", [x, b.const(pack_oihw(rand(16, 16, 1, 1), 16))],
               {"strides": (1, 1), "padding": (0, 0, 0, 0), "dilations": (1, 1)})
    g = b.finish([y, z])
    assert alter_layout_winograd(g, AVX512) is g


# -- alter_layout_half_blocks ---------------------------------------------------------------------

POINTWISE = {"strides": (1, 1), "padding": (0, 0, 0, 0), "dilations": (1, 1)}


def test_alter_layout_half_blocks_packs_whole_vectors_for_a_pointwise_conv():
    """144 -> 24 channels on blocked data, read by a blocked conv: the weight in one block of
    two vectors (32 filters, as many as blocks of one vector would take), the output still in
    blocks of 8."""
    w = rand(24, 144, 1, 1)
    after_w = rand(16, 24, 1, 1)
    b = builder()
    x = b.input("x", (1, 9, 6, 6, 16), "float32")
    y = b.add1("conv2d_nchwc", [x, b.const(pack_oihw(w, 8))], dict(POINTWISE, data_layout="NCHW16c"))
    z = b.add1("conv2d_nchwc", [y, b.const(pack_oihw(after_w, 16))], dict(POINTWISE, data_layout="NCHW8c"))
    before = b.finish([z])

    padded = np.concatenate([w, np.zeros((8, 144, 1, 1), "float32")])
    e = builder()
    x = e.input("x", (1, 9, 6, 6, 16), "float32")
    y = e.add1("conv2d_nchwc", [x, e.const(pack_oihw(padded, 32))],
               dict(POINTWISE, data_layout="NCHW16c", out_block=8, filters=24))
    z = e.add1("conv2d_nchwc", [y, e.const(pack_oihw(after_w, 16))], dict(POINTWISE, data_layout="NCHW8c"))
    want = e.finish([z])
    got = alter_layout_half_blocks(before, AVX512)
    assert_graph_equal(got, want)
    xin = rand(1, 9, 6, 6, 16)
    np.testing.assert_allclose(run_reference(got, xin)[0], run_reference(before, xin)[0], rtol=1e-5, atol=1e-5)


def test_alter_layout_half_blocks_takes_blocks_of_one_vector_where_two_would_pad_more():
    """40 filters: blocks of 16 (48 filters), not 32 (64); 56: blocks of 32 (64 either way)."""
    from tensorforge.graph.passes.alter_layout_half_blocks import wide_block
    assert [wide_block(f, 16) for f in (24, 40, 56, 72, 88)] == [32, 16, 32, 16, 32]
    b = builder()
    x = b.input("x", (1, 2, 5, 5, 16), "float32")
    y = b.add1("conv2d_nchwc", [x, b.const(pack_oihw(rand(40, 32, 1, 1), 8))], dict(POINTWISE, data_layout="NCHW16c"))
    z = b.add1("conv2d_nchwc", [y, b.const(pack_oihw(rand(16, 40, 1, 1), 16))], dict(POINTWISE, data_layout="NCHW8c"))
    g = b.finish([z])
    got = alter_layout_half_blocks(g, AVX512)
    assert got.nodes[0].inputs[1].shape == (3, 32, 1, 1, 16) and got.nodes[0].attrs["filters"] == 40
    xin = rand(1, 2, 5, 5, 16)
    np.testing.assert_allclose(run_reference(got, xin)[0], run_reference(g, xin)[0], rtol=1e-5, atol=1e-5)


def test_alter_layout_half_blocks_leaves_other_convs_and_nchw_outputs_alone():
    """A 3x3 conv, a conv on NCHW data, whole blocks, and a pointwise conv whose output (through
    an element-wise add) goes back to NCHW keep their weights."""
    b = builder()
    x = b.input("x", (1, 1, 6, 6, 16), "float32")
    plain = b.input("plain", (1, 16, 6, 6), "float32")
    outs = [b.add1("conv2d_nchwc", [x, b.const(pack_oihw(rand(24, 16, 3, 3), 8))],
                   {"strides": (1, 1), "padding": (1, 1, 1, 1), "dilations": (1, 1), "data_layout": "NCHW16c"}),
            b.add1("conv2d_nchwc", [plain, b.const(pack_oihw(rand(24, 16, 1, 1), 8))], POINTWISE),
            b.add1("conv2d_nchwc", [x, b.const(pack_oihw(rand(32, 16, 1, 1), 16))],
                   dict(POINTWISE, data_layout="NCHW16c"))]
    y = b.add1("conv2d_nchwc", [x, b.const(pack_oihw(rand(24, 16, 1, 1), 8))], dict(POINTWISE, data_layout="NCHW16c"))
    y = b.add1("add", [y, b.const(rand(1, 3, 1, 1, 8))])
    g = b.finish(outs + [b.add1("nchwc_to_nchw", [y])])
    assert alter_layout_half_blocks(g, AVX512) is g
    assert alter_layout_half_blocks(g, Target.parse("c -mcpu=x86-64-v3")) is g


# -- alter_layout_winograd_nchw (GPUs) ------------------------------------------------------------

def test_alter_layout_winograd_nchw_transforms_3x3_weights_once_for_gpus():
    from tensorforge.ops.nn_conv_winograd import winograd_matrices

    w = rand(24, 16, 3, 3)
    b = builder()
    x = b.input("x", (1, 16, 6, 6), "float32")
    wv = b.const(w)
    y1 = b.add1("conv2d", [x, wv], CONV)
    before = b.finish([b.add1("conv2d", [x, wv], CONV), y1])       # one weight, two convs

    _, g, _ = winograd_matrices(2)                                # 6x6 output: 2x2 tiles
    u = np.einsum("ea,kcab,fb->efck", g, w.astype(np.float64), g).astype("float32")
    e = builder()
    x = e.input("x", (1, 16, 6, 6), "float32")
    uv = e.const(u)
    attrs = {"tile": 2, "padding": (1, 1, 1, 1)}
    y1 = e.add1("conv2d_winograd_nchw", [x, uv], attrs)
    want = e.finish([e.add1("conv2d_winograd_nchw", [x, uv], attrs), y1])
    got = alter_layout_winograd_nchw(before, Target.parse("opencl"))
    assert_graph_equal(got, want, rtol=1e-5, atol=1e-5)
    assert len(got.params) == 1
    xin = rand(1, 16, 6, 6)
    np.testing.assert_allclose(run_reference(got, xin)[0], run_reference(before, xin)[0], rtol=1e-3, atol=1e-3)


def test_alter_layout_winograd_nchw_leaves_cpus_grouped_convs_and_turned_off_targets_alone():
    b = builder()
    x = b.input("x", (1, 16, 8, 8), "float32")
    y = b.add1("conv2d", [x, b.const(rand(16, 16, 3, 3))], CONV)
    z = b.add1("conv2d", [x, b.const(rand(16, 8, 3, 3))], {**CONV, "groups": 2})
    g = b.finish([y, z])
    assert alter_layout_winograd_nchw(g, AVX512) is g
    assert alter_layout_winograd_nchw(g, Target.parse("cuda -arch=sm_90 -winograd=0")) is g
    got = alter_layout_winograd_nchw(g, Target.parse("cuda -arch=sm_90"))
    assert [n.op for n in got.nodes] == ["conv2d_winograd_nchw", "conv2d"]


# -- alter_layout_conv_transpose ------------------------------------------------------------------

def test_alter_layout_conv_transpose_packs_per_phase():
    w = rand(8, 16, 3, 3)                                       # (C, M, KH, KW)
    attrs = {"strides": (2, 2), "padding": (1, 1, 1, 1), "output_padding": (1, 1)}
    b = builder()
    x = b.input("x", (1, 8, 4, 4), "float32")
    before = b.finish([b.add1("conv_transpose2d", [x, b.const(w)], attrs)])
    got = alter_layout_conv_transpose(before, AVX512)

    padded = np.zeros((8, 16, 4, 4), "float32")                 # the kernel padded to the strides
    padded[:, :, :3, :3] = w
    packed = np.empty((1, 2, 2, 8, 2, 2, 16), "float32")      # (M/B, sy, sx, C, KH'/sy, KW'/sx, B)
    for qy, qx, ty, tx in np.ndindex(2, 2, 2, 2):                # each phase's taps together
        packed[0, qy, qx, :, ty, tx, :] = padded[:, :, qy + 2 * ty, qx + 2 * tx]
    (conv, back) = got.nodes
    e = builder()
    x = e.input("x", (1, 8, 4, 4), "float32")
    y = e.add1("conv_transpose2d_nchwc", [x, e.const(packed)], dict(conv.attrs))
    want = e.finish([e.add1("nchwc_to_nchw", [y])])
    assert_graph_equal(got, want)
    assert conv.attrs["strides"] == (2, 2) and back.outputs[0].shape == (1, 16, 8, 8)
    xin = rand(1, 8, 4, 4)
    np.testing.assert_allclose(run_reference(got, xin)[0], run_reference(before, xin)[0], rtol=1e-4, atol=1e-4)


def test_alter_layout_conv_transpose_packs_a_run_time_weight_by_nodes():
    # a dynamic filter: the kernel padded to whole phases, split and transposed as
    # pack_transpose_weight packs a constant, per call
    attrs = {"strides": (2, 2), "padding": (1, 1, 1, 1), "output_padding": (1, 1)}
    b = builder()
    x, w = b.input("x", (1, 8, 4, 4), "float32"), b.input("w", (8, 16, 3, 3), "float32")
    before = b.finish([b.add1("conv_transpose2d", [x, w], attrs)])
    got = alter_layout_conv_transpose(before, AVX512)
    conv = next(n for n in got.nodes if n.op == "conv_transpose2d_nchwc")
    e = builder()
    x, w = e.input("x", (1, 8, 4, 4), "float32"), e.input("w", (8, 16, 3, 3), "float32")
    phases = e.add1("pad", [w], {"pads": (0, 0, 0, 0, 0, 0, 1, 1)})
    split = e.add1("reshape", [phases], {"shape": (8, 1, 16, 2, 2, 2, 2)})
    packed = e.add1("transpose", [split], {"perm": (1, 4, 6, 0, 3, 5, 2)})
    y = e.add1("conv_transpose2d_nchwc", [x, packed], dict(conv.attrs))
    assert_graph_equal(got, e.finish([e.add1("nchwc_to_nchw", [y])]))
    for shape_x, shape_w, case in [((1, 8, 4, 4), (8, 16, 3, 3), attrs),
                                   ((2, 6, 5, 3), (6, 3, 4, 4), {"strides": (2, 2), "padding": (1, 1, 1, 1)}),
                                   ((1, 4, 3, 3), (4, 32, 3, 5), {"strides": (3, 2)})]:
        b = builder()
        x, w = b.input("x", shape_x, "float32"), b.input("w", shape_w, "float32")
        before = b.finish([b.add1("conv_transpose2d", [x, w], case)])
        got = alter_layout_conv_transpose(before, AVX512)
        assert any(n.op == "conv_transpose2d_nchwc" for n in got.nodes)
        ins = [rand(*shape_x), rand(*shape_w)]
        np.testing.assert_allclose(run_reference(got, *ins)[0], run_reference(before, *ins)[0], rtol=1e-4, atol=1e-4)
    b = builder()                      # 20 output channels leave part of a vector: stays
    x, w = b.input("x", (1, 4, 3, 3), "float32"), b.input("w", (4, 20, 3, 3), "float32")
    odd = b.finish([b.add1("conv_transpose2d", [x, w], {"strides": (2, 2)})])
    assert alter_layout_conv_transpose(odd, AVX512) is odd


def test_alter_layout_conv_transpose_of_a_1x1_input_is_a_matmul():
    w = rand(6, 4, 2, 2)
    b = builder()
    x = b.input("x", (3, 6, 1, 1), "float32")
    before = b.finish([b.add1("conv_transpose2d", [x, b.const(w)], {"strides": (1, 1)})])

    e = builder()
    x = e.input("x", (3, 6, 1, 1), "float32")
    flat = e.add1("reshape", [x], {"shape": (3, 6)})
    y = e.add1("matmul", [flat, e.const(w.reshape(6, 16))])
    want = e.finish([e.add1("reshape", [y], {"shape": (3, 4, 2, 2)})])
    got = alter_layout_conv_transpose(before, AVX512)
    assert_graph_equal(got, want)
    xin = rand(3, 6, 1, 1)
    np.testing.assert_allclose(run_reference(got, xin)[0], run_reference(before, xin)[0], rtol=1e-5, atol=1e-5)


# -- alter_layout_matmul --------------------------------------------------------------------------

def test_alter_layout_matmul_packs_constant_weights_into_panels():
    w = rand(8, 20)
    b = builder()
    x = b.input("x", (5, 8), "float32")
    before = b.finish([b.add1("matmul", [x, b.const(w)])])

    nr = 32                              # 20 columns, 16 float lanes: one panel of two vectors
    panels = np.zeros((1, 8, nr), "float32")
    panels[0, :, :20] = w
    e = builder()
    x = e.input("x", (5, 8), "float32")
    want = e.finish([e.add1("matmul_packed", [x, e.const(panels)], {"units": 20})])
    assert_graph_equal(alter_layout_matmul(before, AVX512), want)


def test_alter_layout_matmul_makes_a_narrow_product_dot_products_of_rows():
    # a scoring head x[2, 3, 32] @ W[32, 1] + b: 1 column against 16 float lanes, so dense over the
    # batch's 6 rows with W transposed (each output one dot product), the bias added to the rows
    w, bias = rand(32, 1), rand(1)
    b = builder()
    x = b.input("x", (2, 3, 32), "float32")
    before = b.finish([b.add1("add", [b.add1("matmul", [x, b.const(w)]), b.const(bias)])])
    e = builder()
    x = e.input("x", (2, 3, 32), "float32")
    rows = e.add1("reshape", [x], {"shape": (6, 32)})
    y = e.add1("add", [e.add1("dense", [rows, e.const(np.ascontiguousarray(w.T))]), e.const(bias)])
    want = e.finish([e.add1("reshape", [y], {"shape": (2, 3, 1)})])
    got = alter_layout_matmul(before, AVX512)
    assert_graph_equal(got, want)
    xin = rand(2, 3, 32)
    np.testing.assert_allclose(run_reference(got, xin)[0], run_reference(before, xin)[0], rtol=1e-5, atol=1e-6)
    # 9 columns (more than half a vector) stay packed panels; so does a reduction of one vector
    for k, n in ((32, 9), (16, 1)):
        b = builder()
        x = b.input("x", (6, k), "float32")
        wide = b.finish([b.add1("matmul", [x, b.const(rand(k, n))])])
        assert [m.op for m in alter_layout_matmul(wide, AVX512).nodes] == ["matmul_packed"]


def test_alter_layout_matmul_pads_run_time_columns_to_whole_vectors():
    # attention's scores over 7 tokens: k^T padded to 16 columns (one AVX-512 vector), the
    # product's extra columns sliced off; 4 rows (a copy of k^T per few products) stay as they are
    b = builder()
    q, k = b.input("q", (2, 9, 5), "float32"), b.input("k", (2, 5, 7), "float32")
    before = b.finish([b.add1("matmul", [q, k])])
    e = builder()
    q, k = e.input("q", (2, 9, 5), "float32"), e.input("k", (2, 5, 7), "float32")
    wide = e.add1("pad", [k], {"pads": (0, 0, 0, 0, 0, 9)})
    y = e.add1("matmul", [q, wide])
    want = e.finish([e.add1("slice", [y], {"starts": (0,), "ends": (7,), "axes": (2,)})])
    got = alter_layout_matmul(before, AVX512)
    assert_graph_equal(got, want)
    qin, kin = rand(2, 9, 5), rand(2, 5, 7)
    np.testing.assert_allclose(run_reference(got, qin, kin)[0], run_reference(before, qin, kin)[0], rtol=1e-5)
    few = builder()
    q, k = few.input("q", (4, 5), "float32"), few.input("k", (5, 7), "float32")
    few_rows = few.finish([few.add1("matmul", [q, k])])
    assert alter_layout_matmul(few_rows, AVX512) is few_rows


def test_alter_layout_makes_a_run_time_dense_weight_a_transposed_matmul_operand():
    # ONNX Gemm(a, b, transB=1) with b an input imports as dense(a, b); the dense template read
    # b's rows as a scalar dot product per unit (65x ONNX Runtime's time)
    b = builder()
    x, w = b.input("x", (4, 8), "float32"), b.input("w", (6, 8), "float32")
    before = b.finish([b.add1("dense", [x, w])])
    e = builder()
    x, w = e.input("x", (4, 8), "float32"), e.input("w", (6, 8), "float32")
    want = e.finish([e.add1("matmul", [x, w], {"transpose_b": True})])
    assert_graph_equal(alter_layout(before, AVX512), want)


def test_alter_layout_matmul_transposes_run_time_operands_by_nodes_of_their_own():
    # q k^T and a^T b on run-time operands: explicit transposes, then the product without flags
    # (k^T's 16 columns fill a vector, so no padding follows); a constant operand keeps its flag
    b = builder()
    q, k = b.input("q", (2, 9, 5), "float32"), b.input("k", (2, 16, 5), "float32")
    a, c = b.input("a", (5, 9), "float32"), b.input("c", (5, 16), "float32")
    before = b.finish([b.add1("matmul", [q, k], {"transpose_b": True}),
                       b.add1("matmul", [a, c], {"transpose_a": True})])
    e = builder()
    q, k = e.input("q", (2, 9, 5), "float32"), e.input("k", (2, 16, 5), "float32")
    a, c = e.input("a", (5, 9), "float32"), e.input("c", (5, 16), "float32")
    y0 = e.add1("matmul", [q, e.add1("transpose", [k], {"perm": (0, 2, 1)})], {"transpose_b": False})
    y1 = e.add1("matmul", [e.add1("transpose", [a], {"perm": (1, 0)}), c], {"transpose_a": False})
    want = e.finish([y0, y1])
    got = alter_layout_matmul(before, AVX512)
    assert_graph_equal(got, want)
    ins = [rand(2, 9, 5), rand(2, 16, 5), rand(5, 9), rand(5, 16)]
    for g1, g0 in zip(run_reference(got, *ins), run_reference(before, *ins)):
        np.testing.assert_allclose(g1, g0, rtol=1e-5)


def test_alter_layout_matmul_folds_batch_axes_into_the_rows_of_one_gemm():
    # x[6, 1, 8] x W[8, 20], as torch.onnx.export writes nn.Linear over a sequence: one GEMM of
    # 6 rows (panel width chosen for 6 rows, not for single-row products), reshaped back
    w = rand(8, 20)
    b = builder()
    x = b.input("x", (6, 1, 8), "float32")
    before = b.finish([b.add1("matmul", [x, b.const(w)])])

    nr = 32
    panels = np.zeros((1, 8, nr), "float32")
    panels[0, :, :20] = w
    e = builder()
    x = e.input("x", (6, 1, 8), "float32")
    rows = e.add1("reshape", [x], {"shape": (6, 8)})
    y = e.add1("matmul_packed", [rows, e.const(panels)], {"units": 20})
    want = e.finish([e.add1("reshape", [y], {"shape": (6, 1, 20)})])
    got = alter_layout_matmul(before, AVX512)
    assert_graph_equal(got, want)
    xin = rand(6, 1, 8)
    np.testing.assert_allclose(run_reference(got, xin)[0], run_reference(before, xin)[0], rtol=1e-5, atol=1e-5)


def test_alter_layout_matmul_adds_the_bias_to_the_rows_before_reshaping_back():
    # the Linear's bias, broadcast over x[6, 1, 8] x W[8, 20], is added to the (6, 20) rows so that
    # it fuses into the GEMM's epilogue; the reshape back comes last
    w, bias = rand(8, 20), rand(1, 1, 20)
    b = builder()
    x = b.input("x", (6, 1, 8), "float32")
    before = b.finish([b.add1("add", [b.add1("matmul", [x, b.const(w)]), b.const(bias)])])

    nr = 32
    panels = np.zeros((1, 8, nr), "float32")
    panels[0, :, :20] = w
    e = builder()
    x = e.input("x", (6, 1, 8), "float32")
    rows = e.add1("reshape", [x], {"shape": (6, 8)})
    y = e.add1("matmul_packed", [rows, e.const(panels)], {"units": 20})
    z = e.add1("add", [y, e.const(bias.reshape(20))])
    want = e.finish([e.add1("reshape", [z], {"shape": (6, 1, 20)})])
    got = alter_layout_matmul(before, AVX512)
    assert_graph_equal(got, want)
    xin = rand(6, 1, 8)
    np.testing.assert_allclose(run_reference(got, xin)[0], run_reference(before, xin)[0], rtol=1e-5, atol=1e-5)


def test_alter_layout_matmul_keeps_an_add_that_is_not_a_row_bias_after_the_reshape():
    # a constant that varies along the batch axis is not one row added to every row
    w = rand(8, 20)
    b = builder()
    x = b.input("x", (6, 1, 8), "float32")
    before = b.finish([b.add1("add", [b.add1("matmul", [x, b.const(w)]), b.const(rand(6, 1, 20))])])
    got = alter_layout_matmul(before, AVX512)
    assert [n.op for n in got.nodes] == ["reshape", "matmul_packed", "reshape", "add"]


def test_alter_layout_matmul_keeps_a_single_batch_as_it_is():
    w = rand(8, 20)
    b = builder()
    x = b.input("x", (1, 5, 8), "float32")
    before = b.finish([b.add1("matmul", [x, b.const(w)])])
    got = alter_layout_matmul(before, AVX512)
    assert [n.op for n in got.nodes] == ["matmul_packed"]


def test_alter_layout_matmul_leaves_runtime_weights_alone():
    b = builder()
    x, w = b.input("x", (5, 8), "float32"), b.input("w", (8, 20), "float32")
    g = b.finish([b.add1("matmul", [x, w])])
    assert alter_layout_matmul(g, AVX512) is g


# -- alter_layout_rnn -----------------------------------------------------------------------------

def test_alter_layout_rnn_packs_the_recurrent_weight_once_for_every_step():
    hidden = 20                          # 16 float lanes: two blocks, the second padded
    r = rand(4 * hidden, hidden)
    b = builder()
    xw, s0 = b.input("xw", (2, 4 * hidden), "float32"), b.input("s", (1, 2, hidden), "float32")
    rc = b.const(r)
    s1 = b.add1("lstm_cell", [xw, s0, rc], {"step": 0})
    before = b.finish([b.add1("lstm_cell", [xw, s1, rc], {"step": 1})])

    packed = np.zeros((2, hidden, 4, 16), "float32")      # [block, k, gate, lane] = R[gate * H + unit, k]
    for u in range(hidden):
        for gate in range(4):
            packed[u // 16, :, gate, u % 16] = r[gate * hidden + u]
    e = builder()
    xw, s0 = e.input("xw", (2, 4 * hidden), "float32"), e.input("s", (1, 2, hidden), "float32")
    rp = e.const(packed)
    s1 = e.add1("lstm_cell_packed", [xw, s0, rp], {"step": 0})
    want = e.finish([e.add1("lstm_cell_packed", [xw, s1, rp], {"step": 1})])
    got = alter_layout_rnn(before, AVX512)
    assert_graph_equal(got, want)
    assert len(got.params) == 1
    xin, sin = rand(2, 4 * hidden), rand(1, 2, hidden)
    np.testing.assert_allclose(run_reference(got, xin, sin)[0], run_reference(before, xin, sin)[0],
                               rtol=1e-5, atol=1e-5)


def test_alter_layout_rnn_leaves_runtime_weights_alone():
    b = builder()
    xw, s0, r = b.input("xw", (2, 16), "float32"), b.input("s", (1, 2, 4), "float32"), b.input("r", (16, 4), "float32")
    g = b.finish([b.add1("lstm_cell", [xw, s0, r], {"step": 1})])
    assert alter_layout_rnn(g, AVX512) is g


# -- alter_layout_ops: the depthwise rule--------------------------------------------------------------------

def test_alter_layout_depthwise():
    w = rand(8, 1, 3, 3)
    b = builder()
    x = b.input("x", (1, 8, 6, 6), "float32")
    before = b.finish([b.add1("conv2d", [x, b.const(w)], dict(CONV, groups=8))])

    e = builder()
    x = e.input("x", (1, 8, 6, 6), "float32")
    want = e.finish([e.add1("depthwise_conv2d", [x, e.const(w)],
                            {k: CONV[k] for k in ("strides", "padding", "dilations")})])
    assert_graph_equal(alter_layout_ops(before, AVX512), want)


def test_alter_layout_depthwise_leaves_other_groupings_alone():
    b = builder()
    x = b.input("x", (1, 8, 6, 6), "float32")
    g = b.finish([b.add1("conv2d", [x, b.const(rand(8, 2, 3, 3))], dict(CONV, groups=4))])
    assert alter_layout_ops(g, AVX512) is g


# -- alter_layout_ops: the rows rules-------------------------------------------------------------------------

def _rows_graphs(lanes: int):
    gamma, beta = rand(32), rand(32)
    pool = {"kernel": (2, 2), "strides": (2, 2)}
    b = builder()
    x = b.input("x", (2, 4, 32), "float32")
    img = b.input("img", (1, 2, 4, 4), "float32")
    s = b.add1("softmax", [x], {"axes": (-1,)})
    n = b.add1("layer_norm", [s, b.const(gamma), b.const(beta)], {"axis": -1, "epsilon": 1e-3})
    across = b.add1("softmax", [x], {"axes": (1,)})             # not the last axis: unchanged
    p = b.add1("max_pool2d", [img], pool)
    before = b.finish([n, across, p])

    e = builder()
    x = e.input("x", (2, 4, 32), "float32")
    img = e.input("img", (1, 2, 4, 4), "float32")
    s = e.add1("softmax_rows", [x], {"lanes": lanes})
    n = e.add1("layer_norm_rows", [s, e.const(gamma), e.const(beta)], {"epsilon": 1e-3, "lanes": lanes})
    across = e.add1("softmax", [x], {"axes": (1,)})
    p = e.add1("max_pool2d_rows", [img], pool)
    return before, e.finish([n, across, p])


def test_alter_layout_rows():
    before, want = _rows_graphs(16)
    assert_graph_equal(alter_layout_ops(before, AVX512), want)


def test_alter_layout_rows_takes_the_vector_width_from_the_target():
    """Rows of 32 float32: 16 partial results on 512-bit vectors (one vector: two would need rows
    of 64), 16 on 256-bit ones (two vectors); a target whose backend prefers no row forms keeps
    the graph."""
    before, want = _rows_graphs(16)
    assert_graph_equal(alter_layout_ops(before, Target.parse("c -mcpu=x86-64-v3")), want)
    assert alter_layout_ops(before, Target.parse("cuda")) is before


def test_alter_layout_rows_leaves_integer_and_other_axis_ops_alone():
    b = builder()
    x = b.input("x", (2, 4, 6), "float32")
    g = b.finish([b.add1("softmax", [x], {"axes": (0,)})])
    assert alter_layout_ops(g, AVX512) is g


@pytest.mark.parametrize("name", sorted(TESTED))
def test_each_pass_returns_a_valid_graph_on_its_own_output(name):
    """A second run of any pass on its own output changes nothing more (the passes are
    idempotent), checked on a graph that exercises several of them."""
    fn = next(f for n, f, _ in PASSES if n == name)
    b = builder()
    x = b.input("x", (2, 8), "float32")
    y = b.add1("dense", [b.add1("identity", [x]), b.const(rand(16, 8))])
    y = b.add1("softmax", [y], {"axes": (-1,)})
    once = fn(b.finish([y]), AVX512)
    assert_graph_equal(fn(once, AVX512), once)


def test_alter_layout_pads_few_filters_of_overlapping_windows():
    """6 filters of a 3x3 stride-1 conv: padded with zero filters to a block of 8, sliced back."""
    wc = rand(6, 4, 3, 3)
    b = builder()
    img = b.input("img", (1, 4, 8, 8), "float32")
    g = b.finish([b.add1("conv2d", [img, b.const(wc)], CONV)])
    e = builder()
    img = e.input("img", (1, 4, 8, 8), "float32")
    padded = np.concatenate([wc, np.zeros((2, 4, 3, 3), np.float32)])
    blocked = e.add1("conv2d_nchwc", [img, e.const(pack_oihw(padded, 8))],
                     {k: CONV[k] for k in ("strides", "padding", "dilations")})
    full = e.add1("nchwc_to_nchw", [blocked])
    y = e.add1("slice", [full], {"starts": (0,), "ends": (6,), "axes": (1,)})
    assert_graph_equal(alter_layout(g, AVX512), e.finish([y]))
