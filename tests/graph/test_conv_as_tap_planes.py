"""conv_as_tap_planes: a conv with few filters and many taps runs as a 1x1 conv to one plane per
(filter, tap) and the sum of the shifted planes (ops/nn_tap_sum.py).  The op's reference
against the conv's, the compiled op, the rewrite's values for any kernel, padding and dilation,
conv1d too, and the convs it leaves alone."""
from __future__ import annotations

import numpy as np
import pytest
from conv_graphs import conv_relu_graph
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorforge
from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.passes.conv_as_tap_planes import conv_as_tap_planes
from tensorforge.graph.reference import run_reference
from tensorforge.ops import get
from tensorforge.ops.nn_conv import conv_reference
from tensorforge.target import Target

AVX512 = Target.parse("c -mcpu=x86-64-v4")
AVX2 = Target.parse("c -mcpu=x86-64-v3")


def _tap_planes(x, w):
    """The 1x1 conv's planes: (N, M * K, H, W), plane m * K + k = sum over c of w[m, c, k] * x[c]."""
    m, c = w.shape[:2]
    return np.einsum("mck,nchw->nmkhw", w.reshape(m, c, -1), x).reshape(x.shape[0], -1, *x.shape[2:])


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 3), c=st.integers(1, 5), kh=st.integers(1, 4), kw=st.integers(1, 4), h=st.integers(1, 9),
       w=st.integers(1, 9), dh=st.integers(1, 3), dw=st.integers(1, 3), data=st.data())
def test_the_sum_of_tap_planes_is_the_conv(m, c, kh, kw, h, w, dh, dw, data):
    pads = tuple(data.draw(st.integers(0, 4)) for _ in range(4))
    if h + pads[0] + pads[2] - dh * (kh - 1) < 1 or w + pads[1] + pads[3] - dw * (kw - 1) < 1:
        return
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, c, h, w)).astype("float32")
    wt = rng.standard_normal((m, c, kh, kw)).astype("float32")
    got = get("tap_sum").reference(_tap_planes(x, wt), (kh, kw), pads, (dh, dw))
    want = conv_reference(x, wt, (1, 1), pads, (dh, dw), 1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("planes,kernel,pads,dil", [((1, 18, 10, 13), (3, 3), (1, 1, 1, 1), (1, 1)),
                                                    ((1, 64, 40, 14), (64, 1), (32, 0, 31, 0), (1, 1)),
                                                    ((2, 45, 9, 7), (5, 3), (2, 1, 2, 1), (1, 2)),
                                                    ((1, 64, 1, 100), (1, 16), (0, 8, 0, 7), (1, 1)),
                                                    ((1, 4, 30, 40), (2, 2), (0, 0, 0, 0), (3, 5))])
def test_tap_sum_compiles_to_its_reference(planes, kernel, pads, dil):
    b = GraphBuilder("taps")
    x = b.input("x", planes, "float32")
    y = b.add1("tap_sum", [x], {"kernel": kernel, "padding": pads, "dilations": dil})
    graph = b.finish([b.add1("relu", [y])])
    xv = np.random.default_rng(1).standard_normal(planes).astype("float32")
    want = np.maximum(get("tap_sum").reference(xv, kernel, pads, dil), 0)
    np.testing.assert_allclose(tensorforge.compile(graph)(xv)[0], want, rtol=1e-5, atol=1e-5)


def test_tap_sum_refuses_planes_that_are_not_whole_filters():
    b = GraphBuilder("taps")
    x = b.input("x", (1, 10, 8, 8), "float32")
    with pytest.raises(ValueError, match="not a whole number of filters of 9 taps"):
        b.add1("tap_sum", [x], {"kernel": (3, 3)})


def _ops(graph):
    return [n.op for n in graph.nodes]


@settings(max_examples=10, deadline=None)
@given(cout=st.integers(1, 7), k=st.sampled_from([(3, 3), (5, 3), (1, 3), (7, 1), (2, 2)]), h=st.integers(24, 40),
       w=st.integers(24, 48), dil=st.sampled_from([(1, 1), (2, 1), (1, 3)]), data=st.data())
def test_a_few_filter_conv_runs_as_tap_planes_with_its_values(cout, k, h, w, dil, data):
    pads = tuple(data.draw(st.integers(0, d * (kk - 1))) for d, kk in ((dil[0], k[0]), (dil[1], k[1]))) * 2
    if h + pads[0] + pads[2] - dil[0] * (k[0] - 1) < 1 or w + pads[1] + pads[3] - dil[1] * (k[1] - 1) < 1:
        return
    graph, x = conv_relu_graph(64, cout, (h, w), dil, pads, kernel=k)
    after = conv_as_tap_planes(graph, AVX512)
    assert _ops(after) == ["conv2d", "tap_sum", "relu"]
    want = run_reference(graph, x)[0]
    np.testing.assert_allclose(run_reference(after, x)[0], want, rtol=1e-5, atol=1e-5)
    model = tensorforge.compile(graph)
    assert "tap_sum" in _ops(model.info["graph"])
    np.testing.assert_allclose(model(x)[0], want, rtol=1e-4, atol=1e-4)


def test_a_few_filter_conv1d_runs_as_tap_planes_of_height_one():
    rng = np.random.default_rng(2)
    b = GraphBuilder("conv1d")
    x = b.input("x", (1, 96, 1024), "float32")
    w = b.const(rng.standard_normal((4, 96, 16)).astype("float32") * 0.1, "w")
    y = b.add1("conv1d", [x, w], {"padding": (8, 7), "dilations": (1,)})
    graph = b.finish([b.add1("relu", [y])])
    after = conv_as_tap_planes(graph, AVX512)
    assert _ops(after) == ["conv1d", "reshape", "tap_sum", "reshape", "relu"]
    xv = rng.standard_normal((1, 96, 1024)).astype("float32")
    want = run_reference(graph, xv)[0]
    np.testing.assert_allclose(tensorforge.compile(graph)(xv)[0], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("cin,cout,size,kernel,strides,groups,target", [
    (32, 8, (20, 20), (3, 3), (1, 1), 1, AVX512),     # 8 filters fill a block of 8
    (32, 4, (20, 20), (3, 3), (1, 1), 1, AVX2),       # with 8 lanes, 4 filters use half a vector
    (32, 2, (20, 20), (3, 3), (2, 2), 1, AVX512),     # strided: the planes would be computed s^2 times over
    (32, 4, (20, 20), (3, 3), (1, 1), 2, AVX512),     # groups
    (32, 2, (20, 20), (1, 1), (1, 1), 1, AVX512),     # one tap: a GEMM already
    (2, 1, (20, 20), (3, 3), (1, 1), 1, AVX512),      # too few channels to pay for the planes
    (13, 7, (20, 20), (3, 3), (1, 1), 1, AVX512),     # ... for 7 filters: more than 14
    (64, 1, (4, 4), (3, 3), (1, 1), 1, AVX512),       # too little work for two kernels
    (16, 1, (64, 64), (7, 7), (1, 1), 1, AVX512),     # rows of 4 vectors: the NCHW template, from 24 channels
])
def test_convs_it_leaves_alone(cin, cout, size, kernel, strides, groups, target):
    graph, _ = conv_relu_graph(cin, cout, size, (1, 1), (0, 0, 0, 0), kernel=kernel, strides=strides, groups=groups)
    assert conv_as_tap_planes(graph, target) is graph


def test_avx2_takes_up_to_three_filters():
    graph, _ = conv_relu_graph(32, 3, (20, 20), (1, 1), (1, 1, 1, 1))
    assert "tap_sum" in _ops(conv_as_tap_planes(graph, AVX2))


def _conv_transpose1d_graph(cin, cout, length, k, s, pads, out_pad=0, seed=3):
    rng = np.random.default_rng(seed)
    b = GraphBuilder("deconv")
    x = b.input("x", (1, cin, length), "float32")
    w = b.const(rng.standard_normal((cin, cout, k)).astype("float32") * 0.1, "w")
    y = b.add1("conv_transpose1d", [x, w], {"strides": (s,), "padding": pads, "output_padding": (out_pad,)})
    graph = b.finish([b.add1("relu", [y])])
    return graph, rng.standard_normal((1, cin, length)).astype("float32")


@settings(max_examples=12, deadline=None)
@given(cout=st.integers(1, 4), s=st.integers(2, 8), j=st.integers(1, 4), short=st.integers(0, 1),
       length=st.integers(1, 40), data=st.data())
def test_a_strided_conv_transpose1d_runs_as_phase_sums_with_its_values(cout, s, j, short, length, data):
    k = j * s - short if j * s - short >= 4 * (j * s) / 5 else j * s     # a kernel of at most 1.25x padding
    pb, pe = data.draw(st.integers(0, k - 1)), data.draw(st.integers(0, k - 1))
    out_pad = data.draw(st.integers(0, s - 1))
    if s * (length - 1) + out_pad + k - pb - pe < 1:
        return
    graph, x = _conv_transpose1d_graph(32, cout, length, k, s, (pb, pe), out_pad)
    after = conv_as_tap_planes(graph, AVX512)
    assert _ops(after) == ["conv1d", "reshape", "tap_sum", "reshape", "transpose", "reshape", "slice", "relu"]
    want = run_reference(graph, x)[0]
    np.testing.assert_allclose(run_reference(after, x)[0], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(tensorforge.compile(graph)(x)[0], want, rtol=1e-4, atol=1e-4)


def test_a_speech_decoder_runs_as_phase_sums():
    # Conv-TasNet's decoder: 512 -> 1 channel, 16 taps at stride 8 (2.1x ONNX Runtime's time on
    # the phase template, 1.0x so)
    graph, x = _conv_transpose1d_graph(512, 1, 300, 16, 8, (0, 0))
    model = tensorforge.compile(graph)
    assert "tap_sum" in _ops(model.info["graph"])
    np.testing.assert_allclose(model(x)[0], run_reference(graph, x)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("cin,cout,k,s", [(64, 8, 16, 8),     # 8 filters
                                          (64, 1, 3, 2),      # 3 taps at stride 2: a third of the work on zero taps
                                          (16, 1, 16, 8),     # too few channels
                                          (64, 1, 16, 1)])    # stride 1: conv_transpose_as_conv's
def test_conv_transposes_it_leaves_alone(cin, cout, k, s):
    graph, _ = _conv_transpose1d_graph(cin, cout, 50, k, s, (0, 0))
    assert conv_as_tap_planes(graph, AVX512) is graph
