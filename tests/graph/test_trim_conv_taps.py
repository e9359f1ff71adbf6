"""Taps that only read padding are cut from a conv (graph/passes/trim_conv_taps.py): on random
shapes where kernels, dilations and padding reach past small inputs, the trimmed graph computes
what the original does, and a compiled model of one matches the op's NumPy reference."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorforge
from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.passes.trim_conv_taps import live_taps, trim_conv_taps
from tensorforge.graph.reference import run_reference
from tensorforge.ops.nn_window import out_spatial
from tensorforge.target import Target


def _graph(size, kernel, stride, dilation, pads, groups=1, seed=0):
    rank = len(size)
    rng = np.random.default_rng(seed)
    b = GraphBuilder("conv")
    x = b.input("x", (1, 2 * groups, *size), "float32")
    w = b.const(rng.standard_normal((3 * groups, 2, *kernel)).astype(np.float32), name="w")
    y = b.add1(f"conv{rank}d", [x, w], {"strides": stride, "padding": pads, "dilations": dilation,
                                         "groups": groups})
    return b.finish([y]), rng.standard_normal((1, 2 * groups, *size)).astype(np.float32)


@settings(max_examples=60, deadline=None)
@given(rank=st.sampled_from([1, 2]), size=st.integers(1, 6), k=st.integers(1, 7), stride=st.integers(1, 3),
       dilation=st.integers(1, 3), pad_begin=st.integers(0, 6), pad_end=st.integers(0, 6),
       groups=st.sampled_from([1, 2]))
def test_trimmed_conv_computes_the_same(rank, size, k, stride, dilation, pad_begin, pad_end, groups):
    shape = (size,) + (1,) * (rank - 1)           # the second axis of a conv2d is a column
    kernel = (k,) + (1,) * (rank - 1)
    pads = (pad_begin,) + (0,) * (rank - 1) + (pad_end,) + (0,) * (rank - 1)
    try:
        out_spatial("conv", shape, kernel, (stride,) * rank, pads, (dilation,) * rank)
    except Exception:
        return                                        # the window does not fit
    graph, x = _graph(shape, kernel, (stride,) * rank, (dilation,) * rank, pads, groups)
    trimmed = trim_conv_taps(graph, Target.parse("c"))
    want = run_reference(graph, x)[0]
    np.testing.assert_allclose(run_reference(trimmed, x)[0], want, rtol=1e-5, atol=1e-5)
    convs = [n for n in trimmed.nodes if n.op.startswith("conv")]
    if trimmed is not graph and len(convs) == 1:
        first, last = live_taps(size, want.shape[2], k, stride, dilation, pad_begin)
        assert convs[0].inputs[1].shape[2] == last - first + 1 < k
    elif trimmed is not graph:          # cut into bands (tests/graph/test_conv_tap_bands.py): a band of the
        # middle rows may keep every tap (2 rows, 2 taps, padding 1: rows 0 and 2 read one tap, row 1 both)
        taps = [n.inputs[1].shape[2] for n in convs]
        assert rank == 2 and max(taps) <= k and min(taps) < k


def test_a_wide_kernel_on_a_column_runs_as_its_live_column():
    """A 5x5 kernel over data of width 1 (a stride-1 transposed conv of a 1-D signal exports so):
    the kernel keeps its centre column, which alter_layout_column_conv then lays along a row."""
    graph, x = _graph((28, 1), (5, 5), (1, 1), (1, 1), (2, 2, 2, 2))
    model = tensorforge.compile(graph)
    np.testing.assert_allclose(model(x)[0], run_reference(graph, x)[0], rtol=1e-4, atol=1e-4)
    optimized = tensorforge.graph.pipeline.optimize(graph, "c")
    assert all(v.shape[-2:] != (5, 5) for v in optimized.params), [v.shape for v in optimized.params]
