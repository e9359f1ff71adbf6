"""trim_conv_taps' bands: a conv2d most of whose products read padding (an atrous conv whose
dilation is a large share of its map) runs as convs of the live taps of each (row run, column
run) region, on the slices of the input they read, concatenated back.  The regions, the values
(in the reference and compiled, blocked) for any dilation, padding, stride, groups and size, and
the convs it leaves alone."""
from __future__ import annotations

import numpy as np
import pytest
from conv_graphs import conv_relu_graph
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorforge
from tensorforge.graph.passes.trim_conv_taps import BAND_MAX_LIVE, tap_bands, trim_conv_taps
from tensorforge.graph.reference import run_reference
from tensorforge.target import Target

AVX512 = Target.parse("c -mcpu=x86-64-v4")




def test_tap_bands_of_an_aspp_rate():
    # rate 18 on 32 rows, padding 18: rows 0-13 read taps 1-2, rows 14-17 tap 1, rows 18-31 taps 0-1
    assert tap_bands(32, 32, 3, 1, 18, 18) == [(0, 14, 1, 2), (14, 18, 1, 1), (18, 32, 0, 1)]
    assert tap_bands(32, 32, 3, 1, 1, 1) == [(0, 1, 1, 2), (1, 31, 0, 2), (31, 32, 0, 1)]
    assert tap_bands(4, 4, 3, 1, 9, 9) == [(0, 4, 1, 1)]  # one run: the outer taps are trim_conv_taps' to cut
    assert tap_bands(2, 6, 3, 1, 1, 3) is None            # output 0 reads padding only


def test_an_aspp_conv_becomes_nine_regions_of_its_live_taps():
    graph, x = conv_relu_graph(16, 32, (32, 32), (18, 18), (18, 18, 18, 18))
    after = trim_conv_taps(graph, AVX512)
    convs = [n for n in after.nodes if n.op == "conv2d"]
    assert len(convs) == 9 and all(n.attrs["padding"] == (0, 0, 0, 0) for n in convs)
    # the regions' kernels are the live taps: 2, 1, 2 rows by 2, 1, 2 columns
    assert sorted(n.inputs[1].shape[2:] for n in convs) == sorted((a, b) for a in (2, 1, 2) for b in (2, 1, 2))
    assert [n.op for n in after.nodes].count("concat") == 4          # three rows of columns, then the rows
    assert after.nodes[-2].outputs[0] is graph.nodes[0].outputs[0]    # the last concat is the conv's output
    np.testing.assert_allclose(run_reference(after, x)[0], run_reference(graph, x)[0], rtol=1e-5, atol=1e-5)
    model = tensorforge.compile(graph, opt_level=2)
    ops = [n.op for n in model.info["graph"].nodes]
    assert ops.count("conv2d_nchwc") == 9 and ops.count("nchwc_to_nchw") == 1     # blocked throughout
    np.testing.assert_allclose(model(x)[0], run_reference(graph, x)[0], rtol=1e-4, atol=1e-4)


@settings(max_examples=12, deadline=None)
@given(dh=st.integers(1, 12), dw=st.integers(1, 12), h=st.integers(6, 24), w=st.integers(6, 24),
       s=st.integers(1, 2), groups=st.sampled_from([1, 2]), k=st.sampled_from([(3, 3), (3, 1), (2, 3)]),
       data=st.data())
def test_bands_compute_the_conv(dh, dw, h, w, s, groups, k, data):
    pads = tuple(data.draw(st.integers(0, d * (kk - 1))) for d, kk in ((dh, k[0]), (dw, k[1]))) * 2
    if (h + pads[0] + pads[2] - dh * (k[0] - 1)) < 1 or (w + pads[1] + pads[3] - dw * (k[1] - 1)) < 1:
        return
    graph, x = conv_relu_graph(16, 16, (h, w), (dh, dw), pads, kernel=k, strides=(s, s), groups=groups)
    after = trim_conv_taps(graph, AVX512)
    want = run_reference(graph, x)[0]
    np.testing.assert_allclose(run_reference(after, x)[0], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(tensorforge.compile(graph)(x)[0], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("size, dilation", [((32, 32), 1), ((32, 32), 4), ((17, 17), 2)])
def test_convs_whose_products_mostly_meet_data_are_left_alone(size, dilation):
    graph, _ = conv_relu_graph(16, 16, size, (dilation, dilation), (dilation,) * 4)
    assert trim_conv_taps(graph, AVX512) is graph
    assert BAND_MAX_LIVE < 1
