"""The ops that the rows layout rules introduce: row-wise softmax and layer_norm (ops/nn_rows.py,
template rows.cpu) and max_pool2d_rows (ops/nn_pool_rows.py, template window2d.cpu).  Whole graphs
compiled with the default schedules, against the graph's NumPy reference (which runs the original
softmax / layer_norm / max_pool2d)."""
from __future__ import annotations

import numpy as np
import pytest

import tensorforge
from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.reference import run_reference
from tensorforge.ops.nn_rows import lanes_for
from tensorforge.ops.testing import check_op


def _check(graph, *inputs, rtol=1e-5, atol=1e-5):
    model = tensorforge.compile(graph, target="c")
    for g, w in zip(model(*inputs), run_reference(graph, *inputs)):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return [n.op for n in model.info["graph"].nodes]


@pytest.mark.parametrize("shape", [(1, 4, 128, 128), (3, 48), (5, 7), (2, 3, 24), (40,)])
@pytest.mark.parametrize("epilogue", [None, "mul"])
def test_softmax_rows(shape, epilogue):
    rng = np.random.default_rng(len(shape))
    b = GraphBuilder("softmax")
    x = b.input("x", shape, "float32")
    y = b.add1("softmax", [b.add1("mul", [x, b.const(np.float32(3.0), "s")])], {"axes": (-1,)})
    if epilogue == "mul":
        y = b.add1("mul", [y, b.const(np.float32(0.5), "half")])
    ops = _check(b.finish([y]), (rng.standard_normal(shape) * 4).astype("float32"))
    assert "softmax_rows" in ops


@pytest.mark.parametrize("shape", [(512, 1024), (3, 48), (5, 7), (2, 3, 24), (40,)])
def test_log_softmax_rows(shape):
    """log_softmax over the last axis runs as log_softmax_rows (vector partial maxima and sums,
    folded in halves); over another axis it is left alone."""
    rng = np.random.default_rng(len(shape))
    b = GraphBuilder("log_softmax")
    x = b.input("x", shape, "float32")
    ops = _check(b.finish([b.add1("log_softmax", [x], {"axes": (-1,)})]), (rng.standard_normal(shape) * 4).astype("float32"))
    assert ops == ["log_softmax_rows"]
    if len(shape) > 1:
        b = GraphBuilder("log_softmax0")
        x = b.input("x", shape, "float32")
        other = _check(b.finish([b.add1("log_softmax", [x], {"axes": (0,)})]), rng.standard_normal(shape).astype("float32"))
        assert other == ["log_softmax"]


@pytest.mark.parametrize("op", ["softmax", "layer_norm"])
def test_row_reductions_fold_their_lanes_in_halves(op):
    """The partial results of a row's reductions are folded in halves (vector steps), not summed by
    a scalar loop over the lanes (a chain of `lanes` dependent operations per row and reduction:
    about half of BERT-small's softmax time); the answers still match the reference."""
    rng = np.random.default_rng(3)
    b = GraphBuilder(op)
    x = b.input("x", (64, 256), "float32")
    if op == "softmax":
        y = b.add1("softmax", [x], {"axes": (-1,)})
    else:
        y = b.add1("layer_norm", [x, b.const(rng.standard_normal(256).astype("float32"), "g")], {"axis": -1})
    graph = b.finish([y])
    model = tensorforge.compile(graph, target="c")
    data = (rng.standard_normal((64, 256)) * 4).astype("float32")
    np.testing.assert_allclose(model(data)[0], run_reference(graph, data)[0], rtol=1e-5, atol=1e-5)
    assert "_fold2" in model.source
    assert "for (int64_t lane" not in model.source


@pytest.mark.parametrize("shape", [(4, 1024), (3, 48), (5, 7)])
def test_float16_softmax_rows_round_at_each_node(shape):
    """float16 softmax over the last axis runs as softmax_rows and gives the bits of ONNX's
    function body computed node by node in float16 (the sum accumulated in float32)."""
    x = (np.random.default_rng(shape[-1]).standard_normal(shape) * 4).astype("float16")
    b = GraphBuilder("softmax16")
    model = tensorforge.compile(b.finish([b.add1("softmax", [b.input("x", shape, "float16")], {"axes": (-1,)})]),
                                target="c")
    assert [n.op for n in model.info["graph"].nodes] == ["softmax_rows"]
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    want = e / e.astype(np.float32).sum(axis=-1, keepdims=True).astype(np.float16)
    got = model(x)[0]
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, want)


def test_softmax_on_another_axis_is_left_alone():
    b = GraphBuilder("softmax0")
    x = b.input("x", (6, 5), "float32")
    ops = _check(b.finish([b.add1("softmax", [x], {"axes": (0,)})]),
                 np.random.default_rng(0).standard_normal((6, 5)).astype("float32"))
    assert ops == ["softmax"]


@pytest.mark.parametrize("shape, with_bias", [((1, 128, 256), True), ((4, 20), False), ((3, 2, 33), True)])
def test_layer_norm_rows(shape, with_bias):
    rng = np.random.default_rng(shape[-1])
    b = GraphBuilder("ln")
    x = b.input("x", shape, "float32")
    ins = [x, b.const(rng.uniform(0.5, 1.5, shape[-1]).astype("float32"), "scale")]
    if with_bias:
        ins.append(b.const(rng.standard_normal(shape[-1]).astype("float32"), "bias"))
    y = b.add1("relu", [b.add1("layer_norm", ins, {"axis": -1, "epsilon": 1e-5})])
    ops = _check(b.finish([y]), (rng.standard_normal(shape) + 2).astype("float32"), rtol=1e-4, atol=1e-5)
    assert "layer_norm_rows" in ops and "layer_norm" not in ops


def test_layer_norm_with_stash_is_left_alone():
    rng = np.random.default_rng(1)
    b = GraphBuilder("ln_stash")
    x = b.input("x", (3, 16), "float32")
    outs = b.add("layer_norm", [x, b.const(np.ones(16, "float32"), "scale")], {"stash": True})
    ops = _check(b.finish(outs), rng.standard_normal((3, 16)).astype("float32"))
    assert ops == ["layer_norm"]


def test_row_ops_references():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 32)).astype("float32")
    check_op("softmax_rows", [x], rtol=1e-5, atol=1e-6)
    check_op("softmax_rows", [x.astype("float16")], rtol=0, atol=0)
    check_op("log_softmax_rows", [x], rtol=1e-5, atol=1e-5)
    check_op("layer_norm_rows", [x, rng.standard_normal(32).astype("float32")], rtol=1e-4, atol=1e-5)
    assert lanes_for(128) == 32 and lanes_for(48) == 16 and lanes_for(24) == 8 and lanes_for(16) == 8
    assert lanes_for(7) == 1 and lanes_for(32, 8) == 16
    # rows that no vector divides: one vector of partial results and a tail
    assert lanes_for(197) == 16 and lanes_for(1500, 8) == 8 and lanes_for(20) == 1


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "layer_norm"])
@pytest.mark.parametrize("shape", [(6, 197), (3, 1500), (2, 3, 37)])
def test_row_reductions_over_rows_no_vector_divides(op, shape):
    """A row of 197 (ViT's tokens) or 1500 (Whisper's frames) elements is reduced as whole
    vectors of partial results plus its last elements one by one: not one scalar chain over the
    row (softmax over 6 x 1500 x 1500 at 1 thread: 29 ms -> 15 ms, ONNX Runtime 11-13 ms)."""
    rng = np.random.default_rng(shape[-1])
    b = GraphBuilder(op)
    x = b.input("x", shape, "float32")
    if op == "layer_norm":
        y = b.add1("layer_norm", [x, b.const(rng.uniform(0.5, 1.5, shape[-1]).astype("float32"), "g")], {"axis": -1})
    else:
        y = b.add1(op, [x], {"axes": (-1,)})
    graph = b.finish([y])
    model = tensorforge.compile(graph, target="c")
    data = (rng.standard_normal(shape) * 4 + 1).astype("float32")
    np.testing.assert_allclose(model(data)[0], run_reference(graph, data)[0], rtol=1e-4, atol=1e-5)
    assert [n.op for n in model.info["graph"].nodes] == [f"{op}_rows"]
    assert "_tail" in model.source and "_fold2" in model.source


@pytest.mark.parametrize("shape, kernel, stride, pad, ceil_mode", [
    ((1, 4, 16, 16), 3, 2, 1, False),      # ResNet's stem pooling
    ((2, 3, 9, 8), 3, 2, 1, True),
    ((1, 2, 7, 10), 2, 2, 0, True),
    ((1, 2, 11, 10), 3, 3, 1, False),      # a row length the stride does not divide
    ((1, 5, 6, 6), 3, 1, 1, False),
])
def test_max_pool_rows(shape, kernel, stride, pad, ceil_mode):
    rng = np.random.default_rng(sum(shape))
    b = GraphBuilder("pool")
    x = b.input("x", shape, "float32")
    y = b.add1("max_pool2d", [x], {"kernel": (kernel, kernel), "strides": (stride, stride),
                                   "padding": (pad,) * 4, "ceil_mode": ceil_mode})
    ops = _check(b.finish([b.add1("relu", [y])]), rng.standard_normal(shape).astype("float32"))
    assert "max_pool2d_rows" in ops
    check_op("max_pool2d_rows", [rng.standard_normal(shape).astype("float32")],
             {"kernel": (kernel, kernel), "strides": (stride, stride), "padding": (pad,) * 4, "ceil_mode": ceil_mode})


def test_strided_pool_copies_its_phases_as_vectors():
    """A stride-2 pool's padded input is dealt into column phases block by block: each block is
    one strided vector load (two loads and a shuffle), not a copy element by element (ResNet's
    stem pooling over 64 x 112 x 112 took 1.43x ONNX Runtime's time with the scalar copy)."""
    rng = np.random.default_rng(5)
    b = GraphBuilder("pool")
    x = b.input("x", (1, 4, 32, 32), "float32")
    y = b.add1("max_pool2d", [x], {"kernel": (3, 3), "strides": (2, 2), "padding": (1,) * 4})
    graph = b.finish([y])
    model = tensorforge.compile(graph, target="c")
    assert [n.op for n in model.info["graph"].nodes] == ["max_pool2d_rows"]
    assert "tf_runs_float32x" in model.source and "gather_strided" not in model.source
    data = rng.standard_normal((1, 4, 32, 32)).astype("float32")
    np.testing.assert_array_equal(model(data)[0], run_reference(graph, data)[0])


@pytest.mark.parametrize("shape, kernel, stride, pad, ceil_mode, include_pad", [
    ((1, 4, 16, 16), 3, 1, 1, False, False),   # an Inception branch's 3x3 stride-1 pooling
    ((1, 4, 16, 16), 3, 1, 1, False, True),
    ((2, 3, 9, 8), 3, 2, 1, True, False),      # strided: the op itself (check_op below)
    ((1, 2, 7, 10), 2, 2, 0, True, True),
    ((1, 2, 11, 10), 3, 3, 1, False, True),    # a row length the stride does not divide
    ((1, 5, 6, 6), 5, 1, 2, False, False),
    ((1, 3, 8, 9), 2, 1, 0, True, True),
])
def test_avg_pool_rows(shape, kernel, stride, pad, ceil_mode, include_pad):
    """avg_pool2d in NCHW at stride 1 runs as avg_pool2d_rows: zero padding, the count of each
    window's counted cells (with count_include_pad the explicit padding too, never ceil_mode's
    cells); the op computes the same at any stride."""
    rng = np.random.default_rng(sum(shape) + kernel)
    attrs = {"kernel": (kernel, kernel), "strides": (stride, stride), "padding": (pad,) * 4,
             "ceil_mode": ceil_mode, "count_include_pad": include_pad}
    b = GraphBuilder("pool")
    x = b.input("x", shape, "float32")
    y = b.add1("avg_pool2d", [x], attrs)
    ops = _check(b.finish([b.add1("relu", [y])]), rng.standard_normal(shape).astype("float32"))
    assert ("avg_pool2d_rows" in ops) == (stride == 1)
    check_op("avg_pool2d_rows", [rng.standard_normal(shape).astype("float32")], attrs, rtol=1e-5, atol=1e-6)
