"""Products and convolutions whose weight is a run-time input (dynamic filters, Gemm's transB on
an input): compiled for the CPU, each takes the blocked or GEMM path with the weight re-laid out
by nodes in the graph, and matches ONNX Runtime."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
from onnx_compiled_helpers import one_node_model, rand  # noqa: E402
from onnx_nn_helpers import run_both  # noqa: E402

import tensorforge  # noqa: E402
from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.pipeline import optimize  # noqa: E402

TARGET = "c -mcpu=x86-64-v3"      # AVX2 everywhere CI runs: 8 float32 lanes

CASES = [
    # (op, x shape, w shape, attrs, the op the optimized graph runs it with)
    ("Conv", (1, 8, 9, 9), (16, 8, 3, 3), dict(pads=[1, 1, 1, 1]), "conv2d_nchwc"),
    ("Conv", (2, 8, 7, 6), (16, 4, 3, 1), dict(group=2, strides=[2, 1], pads=[1, 0, 1, 0]), "conv2d_nchwc"),
    ("Conv", (1, 6, 30), (8, 6, 5), dict(strides=[2], pads=[2, 1]), "conv2d_nchwc"),
    ("ConvTranspose", (1, 8, 5, 5), (8, 16, 4, 4), dict(strides=[2, 2], pads=[1, 1, 1, 1]), "conv_transpose2d_nchwc"),
    ("ConvTranspose", (1, 4, 4, 3), (4, 8, 3, 3), dict(strides=[2, 2], output_padding=[1, 1]), "conv_transpose2d_nchwc"),
    ("Gemm", (12, 20), (24, 20), dict(transB=1), "transpose"),
    ("Gemm", (20, 12), (20, 24), dict(transA=1), "transpose"),
]


@pytest.mark.parametrize("op, xs, ws, attrs, runs_as", CASES)
def test_run_time_weight_takes_the_fast_path_and_matches(op, xs, ws, attrs, runs_as):
    model, feeds = one_node_model(op, {"x": rand(xs), "w": rand(ws, seed=1)}, attrs, opset=17)
    graph = from_onnx(model)
    ops = [n.op for n in optimize(graph, TARGET).nodes]
    assert runs_as in ops and not {"conv2d", "conv1d", "conv_transpose2d", "dense"} & set(ops), ops
    got = tensorforge.compile(graph, target=TARGET)(*[feeds[v.name] for v in graph.inputs])
    _, want = run_both(model, feeds)
    np.testing.assert_allclose(np.asarray(got[0] if isinstance(got, (list, tuple)) else got), want[0],
                               rtol=1e-4, atol=1e-4)
