"""The CPU forms of transposed and depthwise convolution: conv_transpose2d_nchwc (phase
decomposition, packed weights, graph pass alter_layout_conv_transpose, template
conv_transpose2d_nchwc.cpu) and depthwise_conv2d (phase-split padding, graph pass
conv2d's layout rule, template window2d.cpu).  Whole graphs compiled with the default
schedules, against the graph's NumPy reference."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tensorforge
from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.reference import run_reference
from tensorforge.ops.nn_conv_transpose import conv_transpose_reference
from tensorforge.ops.nn_conv_transpose_nchwc import pack_transpose_weight, unpack_transpose_weight
from tensorforge.ops.testing import check_op


def _check(graph, *inputs, rtol=1e-4, atol=1e-4):
    model = tensorforge.compile(graph, target="c")
    for g, w in zip(model(*inputs), run_reference(graph, *inputs)):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return model


def _ops(model) -> list:
    return [n.op for n in model.info["graph"].nodes]


def _rng(*key):
    return np.random.default_rng(abs(hash(key)) % (2 ** 32))


# -- transposed convolution ----------------------------------------------------------------------
def _deconv_graph(c, m, h, w, k, stride, pad, out_pad=0, epilogue="bn_relu", groups=1, dilation=1):
    rng = _rng("deconv", c, m, h, w, k, stride, pad, out_pad, epilogue)
    b = GraphBuilder("deconv")
    x = b.input("x", (1, c, h, w), "float32")
    wt = b.const((rng.standard_normal((c, m // groups, k, k)) / np.sqrt(c * k)).astype("float32"), "w")
    y = b.add1("conv_transpose2d", [x, wt], {"strides": (stride, stride), "padding": (pad,) * 4,
                                              "output_padding": (out_pad, out_pad), "groups": groups,
                                              "dilations": (dilation, dilation)})
    if epilogue in ("bn_relu", "bn"):
        stats = [b.const(v.astype("float32"), n) for v, n in (
            (rng.uniform(0.5, 1.5, m), "gamma"), (rng.normal(0, 0.1, m), "beta"),
            (rng.normal(0, 0.1, m), "mean"), (rng.uniform(0.5, 1.5, m), "var"))]
        y = b.add1("batch_norm", [y, *stats])
    if epilogue in ("bn_relu", "relu"):
        y = b.add1("relu", [y])
    elif epilogue == "tanh":
        y = b.add1("tanh", [y])
    return b.finish([y]), rng.standard_normal((1, c, h, w)).astype("float32")


@pytest.mark.parametrize("c, m, h, w, k, stride, pad, out_pad", [
    (8, 32, 4, 4, 4, 2, 1, 0),      # DCGAN's up-sampling block
    (5, 16, 2, 1, 4, 1, 0, 0),      # stride 1: one phase
    (6, 16, 3, 5, 3, 2, 0, 1),      # odd kernel (zero taps pad it to 4), output padding
    (4, 16, 5, 4, 5, 3, 2, 2),      # stride 3
    (7, 3, 6, 6, 4, 2, 1, 0),       # 3 output channels: padded to one block, sliced off
])
def test_conv_transpose_packed(c, m, h, w, k, stride, pad, out_pad):
    graph, x = _deconv_graph(c, m, h, w, k, stride, pad, out_pad)
    model = _check(graph, x)
    assert "conv_transpose2d_nchwc" in _ops(model) and "batch_norm" not in _ops(model)


@pytest.mark.parametrize("epilogue", ["bn_relu", "none"])
def test_conv_transpose_of_one_pixel_is_a_matmul(epilogue):
    graph, x = _deconv_graph(5, 24, 1, 1, 4, 1, 0, epilogue=epilogue)   # DCGAN's first block
    ops = _ops(_check(graph, x))
    assert "matmul_packed" in ops and "conv_transpose2d" not in ops and "batch_norm" not in ops


@pytest.mark.parametrize("epilogue", ["none", "tanh", "bn"])
def test_conv_transpose_epilogues(epilogue):
    graph, x = _deconv_graph(6, 16, 3, 3, 4, 2, 1, epilogue=epilogue)
    _check(graph, x)


@pytest.mark.parametrize("kw", [{"groups": 2}, {"dilation": 2}])
def test_conv_transpose_unsupported_forms_keep_the_generic_op(kw):
    graph, x = _deconv_graph(4, 16, 3, 3, 3, 2, 1, epilogue="relu", **kw)
    model = _check(graph, x)
    assert "conv_transpose2d" in _ops(model) and "conv_transpose2d_nchwc" not in _ops(model)


def test_conv_transpose_nchwc_op_reference():
    rng = _rng("op")
    x = rng.standard_normal((1, 3, 4, 5)).astype("float32")
    w = rng.standard_normal((3, 16, 3, 3)).astype("float32")
    wp = pack_transpose_weight(w, 16, (2, 2))
    assert wp.shape == (1, 2, 2, 3, 2, 2, 16)              # (M/B, sy, sx, C, KH'/sy, KW'/sx, B)
    # each phase's taps together: tap (ky, kx) = (qy + 2 ty, qx + 2 tx), zero past the 3x3 kernel
    np.testing.assert_array_equal(wp[0, 1, 0, 2, 0, 1, 5], w[2, 5, 1, 2])
    np.testing.assert_array_equal(wp[0, 0, 1, :, 1, 1, :], 0.0)
    np.testing.assert_array_equal(unpack_transpose_weight(wp, (3, 3)), w)
    want = conv_transpose_reference(x, w, (2, 2), (1, 1, 1, 1), (1, 1), (1, 1), 1)
    got = check_op("conv_transpose2d_nchwc", [x, wp], {"strides": (2, 2), "out_hw": want.shape[2:],
                                                       "kernel": (3, 3), "padding": (1, 1, 1, 1)},
                   rtol=1e-4, atol=1e-4)[0]
    np.testing.assert_allclose(got.transpose(0, 1, 4, 2, 3).reshape(want.shape), want, rtol=1e-4, atol=1e-4)



def test_conv_transpose_nchwc_unequal_strides_and_a_narrow_block():
    """Strides (3, 2) with a 5x3 kernel (padded to 6x4: zero taps in each phase's block) and a
    block of 3 channels (the narrow form): pack and unpack invert each other, and the op matches
    the reference."""
    rng = _rng("op-uneven")
    x = rng.standard_normal((1, 4, 3, 5)).astype("float32")
    w = rng.standard_normal((4, 3, 5, 3)).astype("float32")
    wp = pack_transpose_weight(w, 3, (3, 2))
    assert wp.shape == (1, 3, 2, 4, 2, 2, 3)
    np.testing.assert_array_equal(unpack_transpose_weight(wp, (5, 3)), w)
    np.testing.assert_array_equal(wp[0, 2, 1, 1, 0, 0, 2], w[1, 2, 2, 1])     # tap (2 + 3*0, 1 + 2*0)
    want = conv_transpose_reference(x, w, (3, 2), (1, 0, 1, 0), (0, 0), (1, 1), 1)
    got = check_op("conv_transpose2d_nchwc", [x, wp], {"strides": (3, 2), "out_hw": want.shape[2:],
                                                       "kernel": (5, 3), "padding": (1, 0, 1, 0)},
                   rtol=1e-4, atol=1e-4)[0]
    np.testing.assert_allclose(got.transpose(0, 1, 4, 2, 3).reshape(want.shape), want, rtol=1e-4, atol=1e-4)

# -- depthwise convolution -----------------------------------------------------------------------
def _depthwise_graph(c, h, w, k, stride, pad, dilation=1, epilogue="bias_relu"):
    rng = _rng("dw", c, h, w, k, stride, pad, dilation, epilogue)
    b = GraphBuilder("dw")
    x = b.input("x", (1, c, h, w), "float32")
    wt = b.const(rng.standard_normal((c, 1, k, k)).astype("float32"), "w")
    y = b.add1("conv2d", [x, wt], {"strides": (stride, stride), "padding": (pad,) * 4,
                                   "dilations": (dilation, dilation), "groups": c})
    if epilogue == "bias_relu":
        y = b.add1("relu", [b.add1("add", [y, b.const(rng.standard_normal((c, 1, 1)).astype("float32"), "b")])])
    elif epilogue == "reshape":
        y = b.add1("reshape", [y], {"shape": (1, -1)})
    return b.finish([y]), rng.standard_normal((1, c, h, w)).astype("float32")


@pytest.mark.parametrize("c, h, w, k, stride, pad, dilation", [
    (16, 12, 12, 3, 1, 1, 1),
    (8, 14, 14, 3, 2, 1, 1),      # stride 2: two column phases
    (4, 7, 7, 3, 1, 1, 1),        # a row narrower than a vector
    (3, 20, 37, 3, 1, 1, 1),      # rows of whole vectors and a remainder
    (5, 11, 10, 5, 3, 2, 1),      # stride 3, 5x5
    (6, 9, 9, 3, 1, 2, 2),        # dilation 2
])
def test_depthwise(c, h, w, k, stride, pad, dilation):
    graph, x = _depthwise_graph(c, h, w, k, stride, pad, dilation)
    model = _check(graph, x)
    assert "depthwise_conv2d" in _ops(model)


@pytest.mark.parametrize("w, pad, stride", [(18, 2, 1), (26, 2, 1), (34, 1, 1), (38, 3, 1), (22, 1, 2)])
def test_depthwise_and_pool_rows_on_widths_of_blocks_of_two(w, pad, stride):
    """Rows whose length is 2 mod 4 (padded planes in blocks of two columns, before): GCC 12 at -O3
    with AVX2 or AVX-512 miscompiled the copy of such a plane (wrong values in some blocks), so
    these compile for the host's vector ISA, where the plain "c" target above does not show it."""
    graph, x = _depthwise_graph(2, 9, w, 3, stride, pad)
    model = tensorforge.compile(graph)
    assert "depthwise_conv2d" in _ops(model)
    np.testing.assert_allclose(model(x)[0], run_reference(graph, x)[0], rtol=1e-4, atol=1e-4)
    b = GraphBuilder("pool")
    xp = b.input("x", (1, 2, 9, w), "float32")
    graph = b.finish([b.add1("max_pool2d", [xp], {"kernel": (3, 3), "padding": (1,) * 4, "strides": (stride, stride)})])
    np.testing.assert_allclose(tensorforge.compile(graph)(x)[0], run_reference(graph, x)[0])


@pytest.mark.parametrize("epilogue", ["none", "reshape"])
def test_depthwise_epilogues(epilogue):
    graph, x = _depthwise_graph(4, 10, 9, 3, 2, 1, epilogue=epilogue)
    _check(graph, x)


def test_depthwise_op_reference():
    rng = _rng("dwop")
    x = rng.standard_normal((2, 3, 9, 8)).astype("float32")
    w = rng.standard_normal((3, 1, 3, 3)).astype("float32")
    check_op("depthwise_conv2d", [x, w], {"strides": (2, 2), "padding": (1, 0, 1, 2)}, rtol=1e-4, atol=1e-4)


def test_column_tile_evens_out_widths_without_a_good_divisor():
    from tensorforge.ops.schedules.common import column_tile
    assert column_tile(56, 7) == 7 and column_tile(14, 7) == 7 and column_tile(20, 7) == 5   # divisors
    assert column_tile(9, 7) == 5 and column_tile(13, 12) == 7 and column_tile(11, 7) == 6    # tails
    assert column_tile(5, 7) == 5 and column_tile(1, 7) == 1


@pytest.mark.parametrize("hw, kernel, stride", [(9, 4, 2), (11, 1, 1), (13, 3, 1), (17, 3, 2)])
def test_direct_conv_with_a_tail_tile(hw, kernel, stride):
    """Widths whose best divisor is a narrow tile take an even split with a shorter last tile
    (DQN's 9x9 layer: 5 + 4 columns instead of three tiles of 3): same results."""
    rng = np.random.default_rng(hw)
    b = GraphBuilder("tail")
    x = b.input("x", (1, 16, hw, hw), "float32")
    w = b.const(rng.standard_normal((32, 16, kernel, kernel)).astype("float32") * 0.1, "w")
    bias = b.const(rng.standard_normal((32, 1, 1)).astype("float32"), "bias")
    y = b.add1("conv2d", [x, w], {"strides": (stride, stride), "padding": (kernel // 2,) * 4, "dilations": (1, 1),
                                  "groups": 1})
    g = b.finish([b.add1("relu", [b.add1("add", [y, bias])])])
    model = tensorforge.compile(g, opt_level=2)
    xs = rng.standard_normal((1, 16, hw, hw)).astype("float32")
    np.testing.assert_allclose(model(xs)[0], run_reference(g, xs)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kernel, strides, padding, want", [
    ((3, 3), (2, 2), (1, 1, 1, 1), {(0, 0): (1, 1), (0, 1): (1, 2), (1, 0): (2, 1), (1, 1): (2, 2)}),
    ((1, 3), (4, 1), (0, 1, 0, 1), {(0, 0): (1, 3)}),          # three rows of phases no tap reaches
])
def test_conv_transpose_phases_reduce_over_exactly_their_taps(kernel, strides, padding, want):
    """Where the stride does not divide the kernel, each phase is a stage of its own whose
    reduction covers only the taps that reach it (a shared stage padded every phase to the
    most taps: 16 products per 2x2 output block of a 3x3 stride-2 kernel where 9 are needed)."""
    from tensorforge import te
    from tensorforge.ops import registry

    ty, tx = (-(-k // s) for k, s in zip(kernel, strides))
    x = te.placeholder((1, 8, 6, 5), "float32", "x")
    wp = te.placeholder((1, *strides, 8, ty, tx, 16), "float32", "wp")
    out = registry.get("conv_transpose2d_nchwc").compute(x, wp, strides=strides, out_hw=(9, 9), kernel=kernel,
                                                         padding=padding)
    (gathered,) = out.op.input_tensors()
    stages = {tuple(int(v) for v in t.op.name.rsplit("phase", 1)[1].split("_")):
              tuple(int(iv.dom.extent.value) for iv in t.op.reduce_axis[1:]) for t in gathered.op.input_tensors()}
    assert stages == want


def test_narrow_conv_transpose_tiles_whole_vectors_of_several_rows():
    """A one-channel output (the narrow block) whose phase rows are shorter than a vector (5
    positions) and whose phase height is prime (37): the rows are computed as whole vectors (8
    positions, 3 past the output) and each register tile holds several rows with a shorter last
    tile.  Before, a 24 -> 1 channel kernel-64 layer ran one accumulator of 14 lanes, kept in
    memory, per tile: 6x ONNX Runtime's time."""
    from tensorforge.ops.nn_conv_transpose_nchwc import narrow_row
    assert [narrow_row(n) for n in (1, 3, 5, 14, 16, 17, 53)] == [1, 4, 8, 16, 16, 32, 64]
    rng = _rng("narrow-tail")
    b = GraphBuilder("narrow")
    x = b.input("x", (1, 6, 38, 5), "float32")
    w = b.const((rng.standard_normal((6, 1, 8, 1)) / 7).astype("float32"), "w")
    y = b.add1("conv_transpose2d", [x, w], {"strides": (2, 4), "padding": (4, 0, 4, 0), "output_padding": (0, 0),
                                            "groups": 1, "dilations": (1, 1)})
    graph = b.finish([b.add1("relu", [y])])
    model = _check(graph, rng.standard_normal((1, 6, 38, 5)).astype("float32"))
    assert "conv_transpose2d_nchwc" in _ops(model)
    text = "\n".join(str(f) for f in model.info["funcs"])
    tiles = re.findall(r"conv_transpose2d_phase\w*\.local = allocate\(\[1, 1, 1, (\d+), (\d+)\]", text)
    assert tiles and all(int(rows) > 1 and int(width) == 8 for rows, width in tiles), tiles


@pytest.mark.parametrize("c, m, length, k, stride, pad", [
    (16, 24, 32, 16, 8, 4),       # a vocoder's up-sampling: 31 positions per phase (a prime)
    (8, 16, 9, 4, 2, 1),
    (6, 3, 10, 5, 3, 2),          # 3 output channels: the narrow block
])
def test_conv_transpose1d_runs_as_a_transposed_conv_of_height_one(c, m, length, k, stride, pad):
    """A 1-D transposed conv takes the blocked phase path through a height of 1 (it ran on the
    generic template at 6-15x ONNX Runtime's time), its phase rows tiled with a shorter last tile
    where their length has no divisor near the register tile."""
    rng = _rng("deconv1d", c, m, length, k, stride)
    b = GraphBuilder("deconv1d")
    x = b.input("x", (1, c, length), "float32")
    w = b.const((rng.standard_normal((c, m, k)) / np.sqrt(c * k)).astype("float32"), "w")
    y = b.add1("relu", [b.add1("conv_transpose1d", [x, w], {"strides": (stride,), "padding": (pad, pad),
                                                             "output_padding": (0,), "dilations": (1,),
                                                             "groups": 1})])
    graph = b.finish([y])
    model = _check(graph, rng.standard_normal((1, c, length)).astype("float32"))
    assert "conv_transpose2d_nchwc" in _ops(model) and "conv_transpose1d" not in _ops(model)
