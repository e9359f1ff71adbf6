"""Winograd conv (ops/nn_conv_winograd.py): the NumPy algorithm against the direct conv, the
TE compute against the NumPy algorithm under the plain schedule and under random configs of
its CPU template, the graph pass that chooses it, and the errors for bad attributes."""
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorforge
from tensorforge.autotune.task import Task
from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.passes.alter_layout_winograd import winograd_tile
from tensorforge.ops.nn_conv import conv_reference
from tensorforge.ops.nn_conv_nchwc import pack_weight, to_nchw, to_nchwc
from tensorforge.ops.nn_conv_winograd import transform_weight, winograd_reference
from tensorforge.ops.registry import OpError
from tensorforge.ops.testing import check_op
from tensorforge.testing import check_candidate

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("hw,pad", [(14, (1, 1, 1, 1)), (7, (1, 1, 1, 1)), (9, (0, 0, 0, 0)), (10, (1, 0, 2, 1)),
                                    (3, (0, 0, 0, 0))])
def test_algorithm_equals_the_direct_conv(m, hw, pad):
    x = RNG.standard_normal((2, 32, hw, hw + 1)).astype(np.float32)
    w = RNG.standard_normal((32, 32, 3, 3)).astype(np.float32)
    want = conv_reference(x, w, (1, 1), pad, (1, 1), 1)
    u = transform_weight(pack_weight(w, 16), m)
    assert u.shape == (m + 2, m + 2, 2, 32, 16) and u.dtype == np.float32
    got = to_nchw(winograd_reference(to_nchwc(x, 16), u, m, pad, "NCHW16c"))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("m", [2, 4])
def test_compute_with_the_plain_schedule(m):
    # any transformed weight, not only the transform of a 3x3 one: the op is the algorithm
    data = RNG.standard_normal((1, 2, 6, 7, 8)).astype(np.float32)
    u = RNG.standard_normal((m + 2, m + 2, 3, 16, 8)).astype(np.float32)
    check_op("conv2d_winograd_nchwc", [data, u], {"tile": m, "padding": (1, 1, 1, 1), "data_layout": "NCHW8c"},
             rtol=1e-4, atol=1e-3)


def _task(n, c, h, w, bi, k, b, m, padding):
    a = m + 2
    return Task.for_op("conv2d_winograd_nchwc", [((n, c // bi, h, w, bi), "float32"), ((a, a, k // b, c, b), "float32")],
                       {"tile": m, "padding": padding, "data_layout": f"NCHW{bi}c"})


@pytest.mark.parametrize("shape", [
    (1, 32, 9, 9, 16, 32, 32, 4, (1, 1, 1, 1)),      # 9x9 output: 4x4 tiles with tails
    (2, 16, 8, 5, 16, 16, 16, 2, (0, 1, 2, 1)),      # two images, uneven padding
    (1, 32, 7, 7, 32, 48, 16, 2, (1, 1, 1, 1)),      # blocks of 32 in, 16 out
], ids=["m4_tails", "m2_batch2", "m2_blocks"])
def test_template_configs_compute_the_same(shape):
    task = _task(*shape)
    space = task.config_space
    assert {"tile_p", "tile_fi", "order", "pad_inline", "by_rows"} <= set(space.knobs)
    rng = random.Random(1)
    default = space.default_config()
    rows = [c for c in space.neighbors(default) if c["by_rows"].val != default["by_rows"].val]
    for config in [default, *rows] + [space.random(rng) for _ in range(3)]:
        check_candidate(task, config, atol=1e-3)


@settings(max_examples=6, deadline=None)
@given(m=st.sampled_from([2, 4]), h=st.integers(3, 11), w=st.integers(3, 11), pads=st.tuples(*[st.integers(0, 2)] * 4),
       seed=st.integers(0, 2 ** 16))
def test_random_shapes_and_configs(m, h, w, pads, seed):
    if h + pads[0] + pads[2] < 3 or w + pads[1] + pads[3] < 3:
        return
    task = _task(1, 16, h, w, 16, 16, 16, m, pads)
    check_candidate(task, task.config_space.random(random.Random(seed)), atol=1e-3)


def test_bad_attributes_are_clear_errors():
    data = np.zeros((1, 1, 6, 6, 16), np.float32)
    with pytest.raises(OpError, match="tile must be one of"):
        check_op("conv2d_winograd_nchwc", [data, np.zeros((5, 5, 1, 16, 16), np.float32)], {"tile": 3})
    with pytest.raises(OpError, match=r"transformed weight must be \(6, 6, F/B, 16, B\)"):
        check_op("conv2d_winograd_nchwc", [data, np.zeros((4, 4, 1, 16, 16), np.float32)],
                 {"tile": 4, "data_layout": "NCHW16c"})
    with pytest.raises(OpError, match="does not match"):
        check_op("conv2d_winograd_nchwc", [data, np.zeros((6, 6, 1, 16, 16), np.float32)],
                 {"tile": 4, "data_layout": "NCHW8c"})
    with pytest.raises(OpError, match="takes \\(F/B, C, 3, 3, B\\)"):
        transform_weight(np.zeros((1, 16, 5, 5, 16), np.float32), 4)


def test_large_images_run_a_row_of_tiles_at_a_time():
    """Where V outgrows the L2 cache, the input transform, the product and the output transform
    run per row of tiles (by_rows), parallel over the rows; smaller convs keep three nests."""
    from tensorforge.target import Target
    target = Target.parse("c -mcpu=x86-64-v3")
    big = _task(1, 64, 112, 112, 16, 64, 16, 4, (1, 1, 1, 1))
    small = _task(1, 64, 28, 28, 16, 64, 16, 4, (1, 1, 1, 1))
    assert big.config_space.default_config()["by_rows"].val is (4 * 784 * 36 * 64 > 2 * target.l2_cache_bytes)
    assert small.config_space.default_config()["by_rows"].val is False


def test_tile_choice():
    assert winograd_tile(64, 64, 56, 56) == 4 and winograd_tile(512, 512, 7, 7) == 2
    assert winograd_tile(3, 64, 224, 224) == 0 and winograd_tile(64, 8, 56, 56) == 0
    assert winograd_tile(8, 32, 56, 56) == 0 and winograd_tile(8, 32, 56, 56, min_channels=8) == 4


@pytest.mark.parametrize("mcpu, winograd", [("x86-64-v3", True), ("x86-64-v4", False)])
def test_eight_input_channels_take_winograd_with_16_registers(mcpu, winograd):
    """With 16 vector registers (AVX2, one 8-lane block) an 8 -> 32 channel 3x3 conv is a
    Winograd conv; with 32 (AVX-512, where the 16-channel floor was measured) it stays direct."""
    b = GraphBuilder("eight")
    x = b.input("x", (1, 8, 20, 20), "float32")
    w = b.const(RNG.standard_normal((32, 8, 3, 3)).astype("float32") * 0.3, "w")
    graph = b.finish([b.add1("relu", [b.add1("conv2d", [x, w], {"padding": (1, 1, 1, 1)})])])
    data = RNG.standard_normal((1, 8, 20, 20)).astype("float32")
    model = tensorforge.compile(graph, target=f"c -mcpu={mcpu}", opt_level=3)
    ops = [n.op for n in model.info["graph"].nodes]
    assert ("conv2d_winograd_nchwc" in ops) == winograd
    if winograd:
        want = tensorforge.compile(graph, target="c", opt_level=2)(data)[0]
        np.testing.assert_allclose(model(data)[0], want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def _net():
    """conv (NCHW input) -> relu -> 3x3 conv (blocked input) -> add residual -> relu
    -> 3x3 stride-2 conv (direct)."""
    b = GraphBuilder("wino")
    x = b.input("x", (1, 16, 32, 32), "float32")     # a 16-column stride-2 output: blocked on any x86
    w1 = b.const(RNG.standard_normal((32, 16, 3, 3)).astype("float32") * 0.2, "w1")
    w2 = b.const(RNG.standard_normal((32, 32, 3, 3)).astype("float32") * 0.2, "w2")
    w3 = b.const(RNG.standard_normal((32, 32, 3, 3)).astype("float32") * 0.2, "w3")
    pad = {"padding": (1, 1, 1, 1)}
    h = b.add1("relu", [b.add1("conv2d", [x, w1], pad)])
    h2 = b.add1("relu", [b.add1("add", [b.add1("conv2d", [h, w2], pad), h])])
    y = b.add1("conv2d", [h2, w3], {**pad, "strides": (2, 2)})
    return b.finish([y]), RNG.standard_normal((1, 16, 32, 32)).astype("float32")


def test_graph_uses_winograd_at_opt_level_3_only():
    graph, x = _net()
    fast = tensorforge.compile(graph, target="c")
    direct = tensorforge.compile(graph, target="c", opt_level=2)
    ops = [n.op for n in fast.info["graph"].nodes]
    # the first conv reads 16 NCHW channels: it becomes a Winograd conv behind a layout change
    assert ops.count("conv2d_winograd_nchwc") == 2 and ops.count("conv2d_nchwc") == 1
    assert ops.count("nchw_to_nchwc") == 1
    (first,) = [n for n in fast.info["graph"].nodes if n.op == "nchw_to_nchwc"]
    assert first.inputs[0].name == "x" and first.attrs["block"] == 16
    assert "conv2d_winograd_nchwc" not in [n.op for n in direct.info["graph"].nodes]
    want = direct(x)[0]
    np.testing.assert_allclose(fast(x)[0], want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    # the residual add and relu are fused into the Winograd kernel's output transform
    assert any("conv2d_winograd_nchwc+add+relu" in label for label, _ in fast.profile(x, repeat=1))


def test_transformed_shape_is_the_transforms():
    from tensorforge.ops.nn_conv_winograd import TILES, transform_weight, transformed_shape
    wp = np.zeros((3, 40, 3, 3, 8), np.float32)
    for m in TILES:
        assert transformed_shape(wp.shape, m) == transform_weight(wp, m).shape


@pytest.mark.parametrize("m", [2, 4])
def test_grouped_algorithm_equals_the_grouped_direct_conv(m):
    """With groups, each group's blocks are a Winograd conv of their own (3 groups of 32)."""
    x = RNG.standard_normal((1, 96, 9, 8)).astype(np.float32)
    w = RNG.standard_normal((96, 32, 3, 3)).astype(np.float32)
    want = conv_reference(x, w, (1, 1), (1, 1, 1, 1), (1, 1), 3)
    u = transform_weight(pack_weight(w, 16), m)
    got = to_nchw(winograd_reference(to_nchwc(x, 16), u, m, (1, 1, 1, 1), "NCHW16c", groups=3))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    # the TE compute reads only its group's input blocks
    data = to_nchwc(x, 16)
    check_op("conv2d_winograd_nchwc", [data, u], {"tile": m, "padding": (1, 1, 1, 1), "data_layout": "NCHW16c",
                                                  "groups": 3}, rtol=1e-4, atol=1e-3)


def test_grouped_template_configs_compute_the_same():
    a = 4
    task = Task.for_op("conv2d_winograd_nchwc", [((1, 4, 10, 9, 16), "float32"), ((a, a, 4, 32, 16), "float32")],
                       {"tile": 2, "padding": (1, 1, 1, 1), "data_layout": "NCHW16c", "groups": 2})
    space = task.config_space
    rng = random.Random(3)
    default = space.default_config()
    rows = [c for c in space.neighbors(default) if c["by_rows"].val != default["by_rows"].val]
    assert rows                          # per (group, row of tiles), and the three whole nests
    for config in [default, *rows] + [space.random(rng) for _ in range(3)]:
        check_candidate(task, config, atol=1e-3)


def test_bad_groups_are_clear_errors():
    data = np.zeros((1, 3, 6, 6, 16), np.float32)
    with pytest.raises(OpError, match="2 groups must split"):
        check_op("conv2d_winograd_nchwc", [data, np.zeros((6, 6, 2, 24, 16), np.float32)],
                 {"tile": 4, "data_layout": "NCHW16c", "groups": 2})


def _grouped_net(groups: int, per_group: int):
    """1x1 conv -> relu -> grouped 3x3 conv -> relu (the grouped conv reads blocked data)."""
    c = groups * per_group
    b = GraphBuilder("grouped")
    x = b.input("x", (1, c, 14, 14), "float32")
    w1 = b.const(RNG.standard_normal((c, c, 1, 1)).astype("float32") * 0.2, "w1")
    w2 = b.const(RNG.standard_normal((c, per_group, 3, 3)).astype("float32") * 0.2, "w2")
    h = b.add1("relu", [b.add1("conv2d", [x, w1], {})])
    y = b.add1("relu", [b.add1("conv2d", [h, w2], {"padding": (1, 1, 1, 1), "groups": groups})])
    return b.finish([y]), RNG.standard_normal((1, c, 14, 14)).astype("float32")


@pytest.mark.parametrize("groups,per_group,winograd", [
    (3, 64, True),      # RegNet's groups of 64 channels: each group whole blocks
    (8, 8, False),      # groups of 8 channels do not fill a block of 16
])
def test_grouped_convs_on_blocked_data_take_winograd(groups, per_group, winograd):
    graph, x = _grouped_net(groups, per_group)
    fast = tensorforge.compile(graph, target="c -mcpu=x86-64-v4")
    nodes = [n for n in fast.info["graph"].nodes if n.op == "conv2d_winograd_nchwc"]
    assert bool(nodes) == winograd
    if winograd:
        assert nodes[0].attrs["groups"] == groups
    want = tensorforge.compile(graph, target="c -mcpu=x86-64-v4", opt_level=2)(x)[0]
    np.testing.assert_allclose(fast(x)[0], want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("l2, inside", [(4096, True), (1 << 20, False)])
def test_batches_with_a_large_transformed_weight_read_it_once(monkeypatch, tmp_path, l2, inside):
    """With several images and a transformed weight U of U_FROM_MEMORY times the L2 cache or more
    (the phases of a dilated conv through 512 channels), the product's position and channel
    block loops hold the images, so each block of U is read once, not once per image; a U the
    caches hold keeps the images outside.  The same values either way."""
    from tensorforge.target import Target
    monkeypatch.setattr(Target, "l2_cache_bytes", property(lambda self: l2))
    monkeypatch.setenv("TENSORFORGE_CACHE_DIR", str(tmp_path))      # kernels lowered for this cache size
    b = GraphBuilder("w")
    x = b.input("x", (2, 16, 4, 4), "float32")
    w = RNG.standard_normal((64, 16, 3, 3)).astype("float32")       # U: 4 x 4 x 16 x 64 floats, 64 KB
    y = b.add1("conv2d", [x, b.const(w)], {"strides": (1, 1), "padding": (1, 1, 1, 1), "dilations": (1, 1),
                                            "groups": 1})
    model = tensorforge.compile(b.finish([y]), target="c -mcpu=x86-64-v4")
    loops = [line.strip() for line in model.source.splitlines() if line.strip().startswith("for (int64_t i_eps_nu")]
    assert (not loops) == inside      # the product's outer loop fuses the image with the position
    xs = RNG.standard_normal((2, 16, 4, 4)).astype("float32")
    np.testing.assert_allclose(model(xs)[0], conv_reference(xs, w, (1, 1), (1, 1, 1, 1), (1, 1), 1), rtol=1e-3, atol=1e-3)
