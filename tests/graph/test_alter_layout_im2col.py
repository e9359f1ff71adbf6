"""Convolutions that no blocked template serves (conv1d; conv2d whose output channels do not
fill the vectors; with 16 registers, strided convs with short output rows) become im2col + one
packed GEMM (pointwise ones a product on the image itself), and compute the same as the op's
reference: random shapes with strides, padding, dilation, odd channel counts and tall kernels."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorforge
from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.passes.alter_layout_im2col import alter_layout_im2col
from tensorforge.graph.reference import run_reference
from tensorforge.target import Target


def _conv_graph(rank, n, c, m, size, kernel, stride, pad, dilation, seed=0):
    rng = np.random.default_rng(seed)
    b = GraphBuilder("conv")
    x = b.input("x", (n, c, *size), "float32")
    w = b.const(rng.standard_normal((m, c, *kernel)).astype(np.float32), name="w")
    y = b.add1(f"conv{rank}d", [x, w], {"strides": stride, "padding": pad, "dilations": dilation, "groups": 1})
    return b.finish([y]), rng.standard_normal((n, c, *size)).astype(np.float32)


@settings(max_examples=12, deadline=None)
@given(rank=st.sampled_from([1, 2]), n=st.integers(1, 2), c=st.integers(1, 5), m=st.sampled_from([1, 3, 8, 17]),
       size=st.integers(4, 12), k=st.integers(1, 4), stride=st.integers(1, 3), pad=st.integers(0, 2),
       dilation=st.integers(1, 2))
def test_im2col_conv_matches_reference(rank, n, c, m, size, k, stride, pad, dilation):
    if (size + 2 * pad - dilation * (k - 1) - 1) < 0:
        return
    graph, x = _conv_graph(rank, n, c, m, (size,) * rank, (k,) * rank, (stride,) * rank, (pad,) * (2 * rank),
                           (dilation,) * rank)
    rewritten = alter_layout_im2col(graph, Target.parse("c"))
    assert [nd.op for nd in rewritten.nodes if nd.op.startswith("conv")] == []
    want = run_reference(graph, x)[0]
    np.testing.assert_allclose(run_reference(rewritten, x)[0], want, rtol=1e-4, atol=1e-4)
    model = tensorforge.compile(graph, target="c -O1")
    if k == 1 and stride == 1 and pad == 0:      # pointwise: a product on the image itself, no windows
        assert not any("im2col" in label for label in model.spec.labels), model.spec.labels
    else:   # im2col, or (overlapping windows) the blocked conv on filters padded to a block, or (stride 1,
        # few filters) a product per tap and the sum of the tap planes (conv_as_tap_planes)
        assert any(p in label for p in ("im2col", "conv2d_nchwc", "tap_sum") for label in model.spec.labels), \
            model.spec.labels
    np.testing.assert_allclose(model(x)[0], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape,path", [
    (((8, 1, 832), (258, 1, 256), (128,)), "im2col"),          # an STFT as conv1d: 2 taps per stride
    (((2, 64, 40, 3), (6, 64, 16, 1), (1, 1)), "taps"),          # tall kernel, 6 outputs
    (((1, 24, 30, 8), (7, 24, 3, 1), (1, 1)), "taps"),           # 3 taps, 7 filters
    (((1, 16, 20, 20), (5, 16, 3, 3), (2, 2)), "conv2d_nchwc"),  # 3x3 at stride 2, 5 filters
    (((1, 16, 20, 20), (5, 16, 2, 2), (2, 2)), "im2col"),        # patches: no overlap
])
def test_user_shapes(shape, path):
    """Which path a conv whose filters do not fill a block takes: padded to a block where its
    windows overlap (with few filters, from 1.5 taps per stride), else one GEMM on its windows;
    "taps": at stride 1 with filters under half a vector's lanes (7 with AVX-512, 3 with AVX2), a
    product per tap and the sum of the tap planes, else padded to a block."""
    from tensorforge.graph.passes.conv_as_tap_planes import conv_as_tap_planes

    xs, ws, stride = shape
    rank = len(xs) - 2
    graph, x = _conv_graph(rank, xs[0], xs[1], ws[0], xs[2:], ws[2:], stride, (0,) * (2 * rank), (1,) * rank)
    if path == "taps":
        native = Target.parse("c -mcpu=native")
        path = "tap_sum" if conv_as_tap_planes(graph, native) is not graph else "conv2d_nchwc"
    model = tensorforge.compile(graph)
    assert any(path in label for label in model.spec.labels), model.spec.labels
    np.testing.assert_allclose(model(x)[0], run_reference(graph, x)[0], rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("size,stride,mcpu,gemm", [(14, 2, "x86-64-v3", True),    # 7 columns of 2 vectors
                                                   (28, 2, "x86-64-v3", False),   # 14 columns: the wide tile
                                                   (7, 1, "x86-64-v3", False),    # stride 1: Winograd's
                                                   (14, 2, "x86-64-v4", False)])  # 32 registers: unmeasured
def test_strided_conv_with_short_rows_is_a_gemm_with_16_registers(size, stride, mcpu, gemm):
    from tensorforge.graph.passes.alter_layout import alter_layout

    graph, x = _conv_graph(2, 1, 16, 32, (size, size), (3, 3), (stride, stride), (1, 1, 1, 1), (1, 1))
    target = Target.parse(f"c -mcpu={mcpu}")
    blocked = [nd.op for nd in alter_layout(graph, target).nodes if nd.op.startswith("conv")]
    assert blocked == (["conv2d"] if gemm else ["conv2d_nchwc"])      # left NCHW for alter_layout_im2col
    if gemm:
        model = tensorforge.compile(graph, target=f"c -mcpu={mcpu}")
        assert any("im2col" in label for label in model.spec.labels), model.spec.labels
        np.testing.assert_allclose(model(x)[0], run_reference(graph, x)[0], rtol=1e-4, atol=1e-4)


def test_pointwise_conv_between_nchw_values_is_a_product_on_the_image():
    """A 1x1 conv that reads a graph input and writes a graph output runs as W times the image
    (NCHW in and out); one that reads a blocked conv's output, or writes into one, stays
    blocked; so does one over a 1x1 map (a squeeze-and-excitation block's)."""
    from tensorforge.graph.passes.alter_layout import alter_layout

    rng = np.random.default_rng(3)
    target = Target.parse("c -mcpu=x86-64-v3")

    def conv(b, x, cin, cout, k):
        w = b.const(rng.standard_normal((cout, cin, k, k)).astype(np.float32) * 0.2)
        return b.add1("conv2d", [x, w], {"padding": (k // 2,) * 4})

    b = GraphBuilder("pw")
    x = b.input("x", (1, 16, 12, 12), "float32")
    alone = b.add1("relu", [conv(b, x, 16, 24, 1)])
    after = conv(b, b.add1("relu", [conv(b, x, 16, 32, 3)]), 32, 32, 1)       # reads a blocked conv
    before = conv(b, conv(b, x, 16, 32, 1), 32, 32, 3)                        # feeds a blocked conv
    tiny = conv(b, b.input("s", (1, 16, 1, 1), "float32"), 16, 32, 1)
    graph = b.finish([alone, after, before, tiny])
    ops = [(n.op, n.inputs[1].shape[2:] if n.op.startswith("conv") else None) for n in alter_layout(graph, target).nodes
           if n.op.startswith("conv")]
    assert ops.count(("conv2d", (1, 1))) == 1, ops          # only `alone` is left for the product
    model = tensorforge.compile(graph, target="c -mcpu=x86-64-v3")
    assert sum("matmul" in label for label in model.spec.labels) == 1, model.spec.labels
    feeds = [rng.standard_normal((1, 16, 12, 12)).astype(np.float32), rng.standard_normal((1, 16, 1, 1)).astype(np.float32)]
    for got, want in zip(model(*feeds), run_reference(graph, *feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_small_windows_between_nchw_values_are_a_product_on_their_windows():
    """A conv over one channel, or a conv1d over a few, writing a graph output runs as W times
    its windows (its NCHW rows written whole); the same conv feeding another conv stays
    blocked, and so does a 3-channel stem."""
    from tensorforge.graph.passes.alter_layout import alter_layout

    rng = np.random.default_rng(4)
    target = Target.parse("c -mcpu=x86-64-v3")

    def conv(b, x, cin, cout, k, op="conv2d"):
        shape = (cout, cin, k, k) if op == "conv2d" else (cout, cin, k)
        w = b.const(rng.standard_normal(shape).astype(np.float32) * 0.3)
        return b.add1(op, [x, w], {"padding": (k // 2,) * (4 if op == "conv2d" else 2)})

    b = GraphBuilder("small")
    image, signal = b.input("x", (1, 1, 20, 24), "float32"), b.input("s", (1, 4, 300), "float32")
    alone = conv(b, image, 1, 32, 3)
    feeding = conv(b, b.add1("relu", [conv(b, image, 1, 32, 3)]), 32, 16, 3)
    audio = conv(b, signal, 4, 64, 7, "conv1d")
    stem = conv(b, b.input("rgb", (1, 3, 20, 24), "float32"), 3, 32, 3)
    graph = b.finish([alone, feeding, audio, stem])
    kept = [n for n in alter_layout(graph, target).nodes if n.op in ("conv1d", "conv2d")]
    assert sorted(n.outputs[0].shape[1] for n in kept) == [32, 64]     # `alone` and `audio`
    model = tensorforge.compile(graph, target="c -mcpu=x86-64-v3")
    assert sum("im2col" in label for label in model.spec.labels) == 2, model.spec.labels
    feeds = [rng.standard_normal(v.shape).astype(np.float32) for v in graph.inputs]
    for got, want in zip(model(*feeds), run_reference(graph, *feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_pointwise_conv_between_layout_transforms_stays_blocked():
    """A 1x1 conv read through nchwc_to_nchw and written into nchw_to_nchwc runs blocked (the
    propagation cancels the transform pairs), as benchmarks/ops.py's "blocked" layers do."""
    from tensorforge.graph.passes.alter_layout import alter_layout

    target = Target.parse("c -mcpu=x86-64-v3")
    b = GraphBuilder("between")
    x = b.input("x", (1, 4, 12, 12, 16), "float32")
    w = b.const(np.random.default_rng(4).standard_normal((64, 64, 1, 1)).astype(np.float32))
    y = b.add1("conv2d", [b.add1("nchwc_to_nchw", [x]), w], {"padding": (0, 0, 0, 0)})
    graph = b.finish([b.add1("nchw_to_nchwc", [y], {"block": 16})])
    assert [n.op for n in alter_layout(graph, target).nodes if n.op.startswith("conv")] == ["conv2d_nchwc"]


def test_a_slice_after_a_splitting_reshape_stays_after_it():
    """A reshape that splits the last axis trivially ((1, 8, 1, 2) -> (1, 2, 4, 1, 2): 2 = 1 x 2),
    read by a slice from index 0 (how alter_layout drops the zero filters of a grouped conv's
    padded groups): the slice reads its input at the output's index, but it is no element-wise
    op, so it does not move before the reshape (it did, with its axis and the reshape's shape
    kept, and the compile failed: "cannot reshape (1, 8, 1, 2) ... to (1, 2, 1, 1, 2)")."""
    from tensorforge.graph.passes.alter_layout_im2col import epilogues_before_reshape
    b = GraphBuilder("groups")
    x = b.input("x", (1, 8, 1, 2), "float32")
    g = b.add1("reshape", [x], {"shape": (1, 2, 4, 1, 2)})
    kept = b.add1("slice", [g], {"axes": (2,), "starts": (0,), "ends": (1,)})
    y = b.add1("reshape", [kept], {"shape": (1, 2, 1, 2)})
    graph = b.finish([y])
    assert epilogues_before_reshape(graph) is graph
    data = np.arange(16, dtype=np.float32).reshape(1, 8, 1, 2)
    np.testing.assert_array_equal(run_reference(graph, data)[0], data.reshape(1, 2, 4, 1, 2)[:, :, :1].reshape(1, 2, 1, 2))


def test_grouped_conv_with_padded_groups_after_an_im2col_conv_compiles():
    """The model the random-model campaign found (seed 5073's core): a 5x5 stride-2 conv that
    becomes im2col + GEMM, then a dilated grouped conv with one filter per group, whose padded
    groups alter_layout slices off, compiled for AVX2, against the reference."""
    rng = np.random.default_rng(0)
    b = GraphBuilder("groups_after_im2col")
    x = b.input("x", (1, 1, 14, 16), "float32")
    w1 = b.const(rng.standard_normal((24, 1, 5, 5)).astype(np.float32), name="w1")
    w2 = b.const(rng.standard_normal((2, 12, 3, 3)).astype(np.float32), name="w2")
    y = b.add1("conv2d", [x, w1], {"strides": (2, 2), "padding": (0, 0, 0, 0), "dilations": (1, 1), "groups": 1})
    z = b.add1("conv2d", [y, w2], {"strides": (1, 1), "padding": (0, 0, 0, 0), "dilations": (2, 2), "groups": 2})
    out = b.add1("add", [z, b.const(np.float32(0.5), name="half")])
    graph = b.finish([out])
    data = rng.standard_normal((1, 1, 14, 16)).astype(np.float32)
    model = tensorforge.compile(graph, target="c -mcpu=haswell")
    np.testing.assert_allclose(model(data)[0], run_reference(graph, data)[0], rtol=1e-4, atol=1e-4)


def test_an_expand_after_a_splitting_reshape_stays_after_it():
    """An op that broadcasts the reshaped value to a larger shape (Expand of a squeeze-and-excite
    gate (1, 4, 1, 1) to (1, 4, 3, 1)) reads it at the output's index, but its output is not the
    reshape's shape: it stays after the reshape (moved, it kept its 4-D shape attribute on the
    3-D product and the compile failed: "expand: shapes (1, 4, 1), (1, 1, 3, 1) do not
    broadcast"; found by the random-model campaign)."""
    from tensorforge.graph.passes.alter_layout_im2col import epilogues_before_reshape
    b = GraphBuilder("gate")
    x = b.input("x", (1, 4, 1), "float32")
    g = b.add1("reshape", [x], {"shape": (1, 4, 1, 1)})
    y = b.add1("expand", [g], {"shape": (1, 1, 3, 1)})
    graph = b.finish([y])
    assert epilogues_before_reshape(graph) is graph
    data = np.arange(4, dtype=np.float32).reshape(1, 4, 1)
    model = tensorforge.compile(graph, target="c")
    np.testing.assert_array_equal(model(data)[0], np.broadcast_to(data.reshape(1, 4, 1, 1), (1, 4, 3, 1)))
