"""conv3d_as_conv2d: a float conv3d with a constant weight becomes a conv2d over the frames with
its depth taps stacked as channels; the model computes the reference's values for any depth
stride, dilation, padding, groups and kernel, in the reference and compiled."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorforge
from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.passes.conv3d_as_conv2d import conv3d_as_conv2d
from tensorforge.graph.reference import run_reference
from tensorforge.target import Target


def _graph(cin, cout, groups, kernel, strides, dilations, pads, shape, seed=0, weight_input=False):
    rng = np.random.default_rng(seed)
    b = GraphBuilder("c3")
    x = b.input("x", (shape[0], cin, *shape[1:]), "float32")
    w_shape = (cout, cin // groups, *kernel)
    w = (b.input("w", w_shape, "float32") if weight_input
         else b.const(rng.standard_normal(w_shape).astype("float32") * 0.3, "w"))
    y = b.add1("conv3d", [x, w], {"strides": strides, "padding": pads, "dilations": dilations, "groups": groups})
    bias = b.const(rng.standard_normal((1, cout, 1, 1, 1)).astype("float32"), "bias")
    graph = b.finish([b.add1("relu", [b.add1("add", [y, bias])])])
    return graph, rng.standard_normal((shape[0], cin, *shape[1:])).astype("float32")


@settings(max_examples=20, deadline=None)
@given(groups=st.sampled_from([1, 2]), cin_per=st.integers(1, 5), cout_per=st.integers(1, 9),
       kd=st.integers(1, 3), k=st.integers(1, 3), sd=st.integers(1, 2), s=st.integers(1, 2),
       dd=st.integers(1, 2), batch=st.integers(1, 2), data=st.data())
def test_conv3d_becomes_a_conv2d_with_the_same_values(groups, cin_per, cout_per, kd, k, sd, s, dd, batch, data):
    pads = tuple(data.draw(st.integers(0, 2)) for _ in range(6))
    graph, x = _graph(groups * cin_per, groups * cout_per, groups, (kd, k, k), (sd, s, s), (dd, 1, 1), pads,
                      (batch, 6, 7, 5))
    rewritten = conv3d_as_conv2d(graph, Target.parse("c"))
    ops = [n.op for n in rewritten.nodes]
    assert "conv3d" not in ops and ops.count("conv2d") == 1
    want = run_reference(graph, x)[0]
    np.testing.assert_allclose(run_reference(rewritten, x)[0], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(tensorforge.compile(graph)(x)[0], want, rtol=1e-4, atol=1e-4)


def test_a_weight_given_at_run_time_keeps_the_conv3d():
    graph, _ = _graph(4, 6, 1, (3, 3, 3), (1, 1, 1), (1, 1, 1), (1,) * 6, (1, 4, 5, 5), weight_input=True)
    assert conv3d_as_conv2d(graph, Target.parse("c")) is graph
