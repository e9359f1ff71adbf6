"""Whole graphs with target "accel": int8 convs that fit run on the simulated accelerator, the rest
on the CPU, bit for bit the same as the graph compiled for the CPU alone."""
from __future__ import annotations

import numpy as np
import pytest

import tensorforge as tf
from tensorforge.graph.builder import GraphBuilder
from tensorforge.ops.testing import check_op
from tensorforge.testing.resnet_int8 import resnet18_int8


def _small_net():
    """conv (3 channels: CPU) -> conv 16->32 s2 (accel) -> conv 32->32 (accel) -> residual add."""
    rng = np.random.default_rng(1)
    b = GraphBuilder("small_int8")
    x = b.input("data", (1, 3, 12, 12), "int8")

    def conv(v, oc, k, s, shift):
        w = b.const(rng.integers(-64, 64, (oc, v.shape[1], k, k), dtype=np.int8))
        bias = b.const(rng.integers(-16, 16, (oc,), dtype=np.int32))
        p = k // 2
        return b.add1("conv2d_int8", [v, w, bias], {"strides": (s, s), "padding": (p, p, p, p), "shift": shift})

    y = conv(x, 16, 3, 1, 8)
    y = conv(y, 32, 3, 2, 10)
    z = conv(y, 32, 3, 1, 11)
    s = b.add1("add", [b.add1("cast", [y], {"dtype": "int32"}), b.add1("cast", [z], {"dtype": "int32"})])
    out = b.add1("cast", [b.add1("clip", [s], {"min": 0, "max": 127})], {"dtype": "int8"})
    return b.finish([out]), rng.integers(0, 128, (1, 3, 12, 12), dtype=np.int8)


def test_conv2d_int8_matches_its_reference_on_the_cpu():
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (1, 16, 9, 9), dtype=np.int8)
    w = rng.integers(-128, 128, (32, 16, 3, 3), dtype=np.int8)
    bias = rng.integers(-50, 50, 32, dtype=np.int32)
    out = check_op("conv2d_int8", [x, w, bias], {"strides": (2, 2), "padding": (1, 1, 1, 1), "shift": 9})[0]
    assert 0.2 < (out > 0).mean() < 0.9          # the epilogue neither zeroes nor saturates all


def test_small_int8_network_offloads_the_convs_that_fit():
    graph, data = _small_net()
    ref = tf.compile(graph, target="c")(data)[0]
    model = tf.compile(graph, target="accel")
    out = model(data)[0]
    np.testing.assert_array_equal(out, ref)
    devices = [d for label, d in model.info["placement"] if "conv2d_int8" in label]
    assert devices == ["c", "accel", "accel"]          # the 3-channel conv stays on the CPU
    assert all(d == "c" for label, d in model.info["placement"] if "conv2d_int8" not in label)
    stats = [s for s in model.accel_stats().values()]
    # MACs / (BLOCK_IN x BLOCK_OUT): 32x16x9 x 6x6 and 32x32x9 x 6x6
    assert sum(s.gemm_blocks for s in stats) == (32 * 16 * 9 * 36 + 32 * 32 * 9 * 36) // 256
    assert [s.dma_bytes["out"] for s in stats] == [32 * 36, 32 * 36]


def test_a_model_with_accelerator_steps_refuses_to_export(tmp_path):
    graph, _ = _small_net()
    with pytest.raises(NotImplementedError, match="cannot be exported"):
        tf.compile(graph, target="accel").export(str(tmp_path / "m.tfm"))


def test_resnet18_int8_offload_is_bit_exact_with_the_cpu():
    graph, inputs = resnet18_int8()
    ref = tf.compile(graph, target="c")(inputs["data"])[0]
    model = tf.compile(graph, target="accel")
    out = model(inputs["data"])[0]
    np.testing.assert_array_equal(out, ref)
    assert np.std(ref) > 0                      # the requantized activations did not collapse
    assert sum(d == "accel" for _, d in model.info["placement"]) == 19
    assert sum(s.gemm_blocks for s in model.accel_stats().values()) == 6_623_232
