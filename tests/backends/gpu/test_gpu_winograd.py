"""Winograd convolutions on GPUs: graph pass alter_layout_winograd_nchw turns 3x3 stride-1 NCHW
convs with enough channels into conv2d_winograd_nchw (ops/nn_conv_winograd_nchw.py), scheduled
by conv2d_winograd_nchw.gpu (ops/schedules/gpu_winograd.py).  Equal to the direct conv on
OpenCL, for both tile sizes, with and without a fused epilogue, at any knob setting;
`-winograd=0` and the convs Winograd does not pay for stay direct; compiled for sm_90."""
from __future__ import annotations

import numpy as np
import pytest
from gpu_probe import SPELLING

import tensorforge
from tensorforge.autotune import extract_tasks
from tensorforge.autotune.records import Record, RecordWriter
from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.pipeline import optimize
from tensorforge.ops import registry
from tensorforge.ops.nn_conv_winograd_nchw import transform_weight_nchw, winograd_reference_nchw
from tensorforge.ops.testing import check_op


def _conv(c, k, h, w, *, batch=1, pad=(1, 1, 1, 1), strides=(1, 1), epilogue=True, seed=0):
    """(graph, x, expected): x -> conv2d [-> + bias -> relu], the expectation from the direct
    conv's NumPy reference."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, c, h, w)).astype("float32")
    wt = (rng.standard_normal((k, c, 3, 3)) * 0.2).astype("float32")
    bias = rng.standard_normal((1, k, 1, 1)).astype("float32")
    attrs = {"padding": pad, "strides": strides}
    b = GraphBuilder("conv")
    y = b.add1("conv2d", [b.input("x", x.shape, "float32"), b.const(wt, "w")], attrs)
    expected = registry.get("conv2d").run_reference([x, wt], attrs)[0]
    if epilogue:
        y = b.add1("relu", [b.add1("add", [y, b.const(bias, "bias")])])
        expected = np.maximum(expected + bias, 0)
    return b.finish([y]), x, expected


def _ops(graph, target) -> list[str]:
    return [n.op for n in optimize(graph, target).nodes]


@pytest.mark.parametrize("m", [2, 4])
def test_transformed_weight_and_reference_equal_the_direct_conv(m):
    rng = np.random.default_rng(m)
    x, w = rng.standard_normal((2, 5, 9, 7)).astype("float32"), rng.standard_normal((6, 5, 3, 3)).astype("float32")
    direct = registry.get("conv2d").run_reference([x, w], {"padding": (1, 0, 2, 1)})[0]
    u = transform_weight_nchw(w, m)
    assert u.shape == (m + 2, m + 2, 5, 6)
    np.testing.assert_allclose(winograd_reference_nchw(x, u, m, (1, 0, 2, 1)), direct, rtol=1e-4, atol=1e-4)
    got = check_op("conv2d_winograd_nchw", [x, u], {"tile": m, "padding": (1, 0, 2, 1)}, rtol=1e-4, atol=1e-4)[0]
    np.testing.assert_allclose(got, direct, rtol=1e-4, atol=1e-4)


def test_the_pass_picks_the_tile_and_keeps_convs_winograd_does_not_pay_for():
    graph, _, _ = _conv(16, 16, 8, 8)
    (wino,) = [n for n in optimize(graph, "opencl").nodes if n.op == "conv2d_winograd_nchw"]
    assert wino.attrs["tile"] == 4
    (wino,) = [n for n in optimize(_conv(16, 24, 6, 6)[0], "cuda -arch=sm_90").nodes
               if n.op == "conv2d_winograd_nchw"]
    assert wino.attrs["tile"] == 2                                   # a small map: 2x2 tiles
    assert "conv2d_winograd_nchw" not in _ops(_conv(8, 16, 8, 8)[0], "opencl")                 # few channels
    assert "conv2d_winograd_nchw" not in _ops(_conv(16, 16, 8, 8, strides=(2, 2))[0], "opencl")
    assert "conv2d_winograd_nchw" not in _ops(graph, "opencl -winograd=0")                   # turned off
    assert "conv2d_winograd_nchw" not in _ops(graph, "c")                                    # the CPU's own form


@pytest.mark.parametrize("c,k,h,w,batch,pad,epilogue", [
    (16, 16, 8, 8, 1, (1, 1, 1, 1), True),        # m = 4, conv + bias + relu
    (20, 16, 6, 7, 2, (1, 1, 1, 1), False),       # m = 2, two images, a ragged last tile
    (16, 32, 10, 9, 1, (0, 0, 0, 0), True),       # no padding: 8 x 7 output
])
def test_winograd_conv_on_gpu_equals_the_direct_conv(gpu, c, k, h, w, batch, pad, epilogue):
    graph, x, expected = _conv(c, k, h, w, batch=batch, pad=pad, epilogue=epilogue)
    model = tensorforge.compile(graph, target=gpu)
    kernels = [s["symbol"] for s in model.spec.steps if s["kind"] == "kernel"]
    assert len(kernels) == 1 and "winograd" in kernels[0]          # the epilogue fused into its launches
    assert model.source.count(SPELLING[gpu]["kernel"]) == 4               # transform, product, transform, crop
    direct = tensorforge.compile(graph, target=f"{gpu} -winograd=0")
    assert "wino_m" not in direct.source
    np.testing.assert_allclose(model(x)[0], expected, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(model(x)[0], direct(x)[0], rtol=1e-3, atol=1e-3)


def test_product_knobs_keep_the_result(opencl, tmp_path):
    graph, x, expected = _conv(16, 16, 8, 8)
    (task,) = [t for t in extract_tasks(graph, target="opencl") if t.template == "conv2d_winograd_nchw.gpu"]
    knobs = task.config_space.default_config().to_json()
    assert {"tile_0", "tile_1", "tile_r", "shared"} <= set(knobs)
    config = next(c for c in task.config_space if c.to_json()["shared"] is False and c.to_json() != knobs)
    records = str(tmp_path / "tune.jsonl")
    with RecordWriter(records) as writer:
        writer.write(Record(task=task, config=config.to_json(), costs=(1e-6,)))
    model = tensorforge.compile(graph, target="opencl", records=records)
    assert model.info["tuned_groups"] == 1 and "__local float" not in model.source.split("kernel1")[1].split("kernel2")[0]
    np.testing.assert_allclose(model(x)[0], expected, rtol=1e-3, atol=1e-3)


def test_winograd_conv_compiles_for_sm_90(nvrtc):
    graph, _, _ = _conv(32, 32, 14, 14)
    model = tensorforge.compile(graph, target="cuda -arch=sm_90")
    assert model.program[:4] == b"\x7fELF"
    assert model.source.count('extern "C" __global__ void') == 4 and "winograd" in model.source
