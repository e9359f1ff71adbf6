"""dilated_conv_as_phases: a dilated 3x3 stride-1 conv whose leading padding is a multiple of
its dilation runs undilated on each phase of its input (space to batch, conv, batch to space);
the model computes the reference's values for any dilations, paddings and sizes, in the
reference and compiled, and the convs the Winograd path would not take are left alone."""
from __future__ import annotations

import numpy as np
from conv_graphs import conv_relu_graph
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorforge
from tensorforge.graph.passes.dilated_conv_as_phases import dilated_conv_as_phases
from tensorforge.graph.reference import run_reference
from tensorforge.target import Target

AVX512 = Target.parse("c -mcpu=x86-64-v4")




@settings(max_examples=12, deadline=None)
@given(dh=st.integers(1, 4), dw=st.integers(1, 4), h=st.integers(9, 30), w=st.integers(9, 30),
       qb=st.integers(0, 1), extra=st.integers(0, 3), data=st.data())
def test_phases_compute_the_dilated_conv(dh, dw, h, w, qb, extra, data):
    if (dh, dw) == (1, 1):
        dh = 2
    pads = (qb * dh, qb * dw, data.draw(st.integers(0, 2 * dh)), data.draw(st.integers(0, 2 * dw)))
    graph, x = conv_relu_graph(16, 16, (h, w), (dh, dw), pads)
    out_h, out_w = graph.nodes[0].outputs[0].shape[2:]
    rewritten = dilated_conv_as_phases(graph, AVX512)
    ops = [n.op for n in rewritten.nodes]
    if min(-(-out_h // dh), -(-out_w // dw)) >= 4:
        assert ops.count("conv2d") == 1 and rewritten.nodes[ops.index("conv2d")].attrs["dilations"] == (1, 1)
    else:
        assert rewritten is graph
    want = run_reference(graph, x)[0]
    np.testing.assert_allclose(run_reference(rewritten, x)[0], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(tensorforge.compile(graph, target="c -mcpu=x86-64-v4")(x)[0], want,
                               rtol=1e-4, atol=1e-4)


def test_the_expected_graph_of_a_same_padded_atrous_conv():
    graph, x = conv_relu_graph(16, 32, (10, 13), (2, 3), (2, 3, 2, 3))
    after = dilated_conv_as_phases(graph, AVX512)
    assert [n.op for n in after.nodes] == ["pad", "reshape", "transpose", "reshape", "conv2d", "reshape",
                                           "transpose", "reshape", "slice", "relu"]
    pad, _, _, phases, conv, _, _, merged, crop, _ = after.nodes
    assert pad.attrs["pads"] == (0, 0, 0, 0, 0, 0, 0, 2)          # 13 -> 15 columns: 3 phases of 5
    assert phases.outputs[0].shape == (6, 16, 5, 5)              # 2 x 3 phases of 5 x 5
    assert conv.attrs == {"strides": (1, 1), "dilations": (1, 1), "groups": 1, "padding": (1, 1, 1, 1)}
    assert merged.outputs[0].shape == (1, 32, 10, 15) and crop.outputs[0].shape == (1, 32, 10, 13)
    np.testing.assert_allclose(run_reference(after, x)[0], run_reference(graph, x)[0], rtol=1e-5, atol=1e-5)


def test_convs_the_winograd_path_would_not_take_stay_dilated():
    cases = [dict(pads=(1, 1, 1, 1)),                             # leading padding no multiple of 2
             dict(pads=(2, 2, 2, 2), strides=(2, 2)),
             dict(pads=(2, 2, 2, 2), kernel=(5, 5)),
             dict(pads=(2, 2, 2, 2), groups=2),
             dict(pads=(2, 2, 2, 2), cin=4)]                        # too few channels
    for case in cases:
        cin = case.pop("cin", 16)
        graph, _ = conv_relu_graph(cin, 16, (20, 20), (2, 2), **case)
        assert dilated_conv_as_phases(graph, AVX512) is graph, case
    graph, _ = conv_relu_graph(16, 16, (12, 12), (6, 6), (6, 6, 6, 6))    # phases of 2 x 2 outputs
    assert dilated_conv_as_phases(graph, AVX512) is graph
