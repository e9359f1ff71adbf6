"""conv_transpose_as_conv: a stride-1 transposed conv with a constant weight becomes the conv
with the flipped, channel-swapped kernel and padding d (K - 1) - p; the model computes the
reference's values for any groups, dilation and padding, and strides above 1 (or padding beyond
the kernel's span) keep the transposed conv, except a 2-D kernel equal to its square stride
without padding: a 1x1 conv and a depth-to-space."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorforge
from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.passes.conv_transpose_as_conv import MAX_GROWTH, conv_transpose_as_conv
from tensorforge.graph.reference import run_reference
from tensorforge.target import Target


def _graph(rank, cin, cout, groups, kernel, dilation, pads, strides=None, size=9, seed=0):
    rng = np.random.default_rng(seed)
    b = GraphBuilder("ct")
    x = b.input("x", (1, cin, *(size,) * rank), "float32")
    w = b.const(rng.standard_normal((cin, cout // groups, *kernel)).astype("float32") * 0.3, "w")
    y = b.add1(f"conv_transpose{rank}d", [x, w],
               {"strides": strides or (1,) * rank, "padding": pads, "output_padding": (0,) * rank,
                "dilations": dilation, "groups": groups})
    return b.finish([b.add1("relu", [y])]), rng.standard_normal((1, cin, *(size,) * rank)).astype("float32")


@settings(max_examples=25, deadline=None)
@given(rank=st.sampled_from([1, 2]), groups=st.sampled_from([1, 2, 3]), cin_per=st.integers(1, 5),
       cout_per=st.integers(1, 9), k=st.integers(1, 4), d=st.integers(1, 2), data=st.data())
def test_stride_one_becomes_a_conv_with_the_same_values(rank, groups, cin_per, cout_per, k, d, data):
    kernel = (k,) * rank
    span = d * (k - 1)
    pads = tuple(data.draw(st.integers(0, span)) for _ in range(2 * rank))
    graph, x = _graph(rank, groups * cin_per, groups * cout_per, groups, kernel, (d,) * rank, pads, size=24)
    rewritten = conv_transpose_as_conv(graph, Target.parse("c"))
    out_size, in_size = graph.nodes[0].outputs[0].shape[2:], x.shape[2:]
    spreads = np.prod(out_size) > MAX_GROWTH * np.prod(in_size)
    assert [n.op for n in rewritten.nodes] == [f"conv_transpose{rank}d" if spreads else f"conv{rank}d", "relu"]
    want = run_reference(graph, x)[0]
    np.testing.assert_allclose(run_reference(rewritten, x)[0], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(tensorforge.compile(graph)(x)[0], want, rtol=1e-4, atol=1e-4)


def test_strides_above_one_and_padding_beyond_the_span_stay_transposed():
    for strides, pads in (((2, 2), (1, 1, 1, 1)), ((1, 1), (3, 0, 0, 0))):
        graph, _ = _graph(2, 4, 6, 1, (3, 3), (1, 1), pads, strides)
        assert conv_transpose_as_conv(graph, Target.parse("c")) is graph


@pytest.mark.parametrize("s, cin, cout, size", [(2, 8, 16, 9), (3, 5, 4, 6), (4, 16, 3, 8)])
def test_kernel_equal_to_stride_becomes_a_pointwise_conv_and_a_depth_to_space(s, cin, cout, size):
    """Each output takes the one tap of its place in its s x s cell: a 1x1 conv to (a, b, o)
    channels, then depth_to_space (DCR); the same values, in the reference and compiled."""
    graph, x = _graph(2, cin, cout, 1, (s, s), (1, 1), (0, 0, 0, 0), (s, s), size=size)
    rewritten = conv_transpose_as_conv(graph, Target.parse("c"))
    assert [n.op for n in rewritten.nodes] == ["conv2d", "depth_to_space", "relu"]
    conv, d2s = rewritten.nodes[:2]
    assert conv.inputs[1].shape == (cout * s * s, cin, 1, 1)
    assert d2s.attrs == {"blocksize": s, "mode": "DCR"}
    want = run_reference(graph, x)[0]
    np.testing.assert_allclose(run_reference(rewritten, x)[0], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(tensorforge.compile(graph)(x)[0], want, rtol=1e-4, atol=1e-4)


def test_kernel_equal_to_stride_with_padding_groups_or_unequal_sides_stays_transposed():
    cases = [((2, 2), (2, 2), (1, 1, 1, 1), 1),      # padding crops the cells
             ((2, 2), (2, 2), (0, 0, 0, 0), 2),      # groups
             ((2, 1), (2, 1), (0, 0, 0, 0), 1)]      # a rectangular cell: no one block size
    for kernel, strides, pads, groups in cases:
        graph, _ = _graph(2, 4, 6, groups, kernel, (1, 1), pads, strides)
        assert conv_transpose_as_conv(graph, Target.parse("c")) is graph
