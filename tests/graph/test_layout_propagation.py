"""alter_layout_propagate: values stay in NCHW[x]c between convolutions; layout transforms remain
only where the layout changes (counted in the zoo models), consecutive transforms cancel, and
graphs with ops that cannot run blocked get exactly the transforms they need and still compute
the reference's values."""
from __future__ import annotations

import numpy as np
import pytest

import tensorforge
from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.passes.alter_layout import alter_layout, block_for
from tensorforge.graph.passes.alter_layout_propagate import (
    alter_layout_propagate,
    cancel_layout_transforms,
    count_layout_transforms,
    fold_memory_order_chains,
)
from tensorforge.graph.pipeline import optimize
from tensorforge.graph.reference import run_reference
from tensorforge.ops.nn_conv_nchwc import pack_weight
from tensorforge.target import Target

AVX512 = Target.parse("c -mcpu=x86-64-v4")   # the layout passes read the vector width from it
# the block of 32 channels on this machine, where the models are compiled and run (32 with
# AVX-512, 16 with AVX2)
HOST_BLOCK = block_for(32, "float32", Target.parse("c"))

CONV = {"strides": (1, 1), "padding": (1, 1, 1, 1), "dilations": (1, 1), "groups": 1}


def _ops(graph) -> list:
    return [n.op for n in graph.nodes]


CONVS = ("conv2d_nchwc", "conv2d_winograd_nchwc")


@pytest.fixture(scope="module")
def zoo():
    from tensorforge.frontend import from_onnx
    from tensorforge.testing import models
    # a fixed AVX-512 target: with 16 registers ResNet-18's 7-column stride-2 conv leaves the
    # blocked layout for a GEMM on its windows (alter_layout._narrow_strided_product)
    return {name: optimize(from_onnx(models.get(name)[0]), AVX512) for name in ("resnet18", "mobilenet_v1", "dqn")}


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v1", "dqn"])
def test_zoo_models_change_layout_once(zoo, name):
    """The stem conv reads the NCHW image directly and everything up to the classifier stays
    blocked.  The one change of layout, before flatten, is a reshape: the global pool's 1x1
    output is laid out alike in NCHW[b]c and NCHW."""
    g = zoo[name]
    if name == "dqn":         # 7x7 planes before its classifier: a real change of layout
        assert count_layout_transforms(g) == 1
        (t,) = [n for n in g.nodes if n.op == "nchwc_to_nchw"]
    else:
        assert count_layout_transforms(g) == 0
        (t,) = [n for n in g.nodes if n.op == "reshape" and n.inputs[0].ndim == 5]
        producer = {v: n for n in g.nodes for v in n.outputs}
        assert producer[t.inputs[0]].op == "global_avg_pool_nchwc"
    (reader,) = [n for n in g.nodes if t.outputs[0] in n.inputs]
    assert reader.op == "flatten"
    convs = [n for n in g.nodes if n.op in CONVS]
    assert [n.attrs.get("data_layout", "NCHW") for n in convs].count("NCHW") == 1     # only the stem


def test_resnet18_runs_every_op_blocked(zoo):
    ops = _ops(zoo["resnet18"])
    # the thirteen 3x3 stride-1 convs run as Winograd convs (opt_level 3), the other seven direct
    assert ops.count("conv2d_winograd_nchwc") == 13 and ops.count("conv2d_nchwc") == 7
    assert "max_pool2d_nchwc" in ops and "global_avg_pool_nchwc" in ops
    assert not {"max_pool2d", "max_pool2d_rows", "global_avg_pool", "nchw_to_nchwc"} & set(ops)


def test_mobilenet_depthwise_runs_blocked(zoo):
    ops = _ops(zoo["mobilenet_v1"])
    assert ops.count("depthwise_conv2d_nchwc") == 13 and "depthwise_conv2d" not in ops


def _chain(between: str | None = None, mix: bool = False, out_mid: bool = False):
    """conv -> bias -> relu -> [between] (-> add with the relu output) -> conv -> relu."""
    rng = np.random.default_rng(7)
    b = GraphBuilder("mixed")
    x = b.input("x", (1, 16, 8, 8), "float32")
    w1 = b.const(rng.standard_normal((32, 16, 3, 3)).astype("float32") * 0.2, "w1")
    w2 = b.const(rng.standard_normal((32, 32, 3, 3)).astype("float32") * 0.2, "w2")
    bias = b.const(rng.standard_normal((32, 1, 1)).astype("float32"), "bias")
    h = b.add1("relu", [b.add1("add", [b.add1("conv2d", [x, w1], CONV), bias])])
    mid = h
    if between == "transpose":          # injective, but not elementwise: needs NCHW
        mid = b.add1("transpose", [h], {"perm": (0, 1, 3, 2)})
    elif between == "softmax":          # a reduction over the channels: needs NCHW
        mid = b.add1("softmax", [h], {"axes": (1,)})
    if mix:
        mid = b.add1("add", [mid, h])   # blocked + NCHW operand: the NCHW one is converted
    y = b.add1("relu", [b.add1("conv2d", [mid, w2], CONV)])
    outputs = [y, mid] if out_mid else [y]
    return b.finish(outputs), rng.standard_normal((1, 16, 8, 8)).astype("float32")


def _check(graph, x):
    # opt_level 2: layout propagation without the Winograd rewrite of opt_level 3, which adds
    # a layout change in front of a 3x3 conv that reads NCHW (tests/ops/test_nn_conv_winograd.py)
    model = tensorforge.compile(graph, target="c", opt_level=2)
    for got, want in zip(model(x), run_reference(graph, x)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    return model.info["graph"]


def test_conv_chain_needs_one_transform_at_the_output():
    g = _check(*_chain())
    assert _ops(g).count("nchwc_to_nchw") == 1 and "nchw_to_nchwc" not in _ops(g)
    second = [n for n in g.nodes if n.op in CONVS][1]
    assert second.attrs["data_layout"] == f"NCHW{HOST_BLOCK}c"


@pytest.mark.parametrize("between", ["transpose", "softmax"])
def test_op_that_needs_nchw_gets_a_transform_and_the_next_conv_reads_nchw(between):
    g = _check(*_chain(between))
    ops = _ops(g)
    # one back to NCHW before the op, one at the graph output; the next conv reads NCHW directly
    assert ops.count("nchwc_to_nchw") == 2 and "nchw_to_nchwc" not in ops
    first = next(n for n in g.nodes if n.op == "nchwc_to_nchw")
    assert [n.op for n in g.nodes if first.outputs[0] in n.inputs] == [between]
    second = [n for n in g.nodes if n.op in CONVS][1]
    assert second.attrs.get("data_layout", "NCHW") == "NCHW"


def test_nchw_operand_of_a_blocked_add_is_converted_once():
    g = _check(*_chain("transpose", mix=True))
    ops = _ops(g)
    assert ops.count("nchwc_to_nchw") == 2 and ops.count("nchw_to_nchwc") == 1
    (to_blocked,) = [n for n in g.nodes if n.op == "nchw_to_nchwc"]
    assert [n.op for n in g.nodes if to_blocked.outputs[0] in n.inputs] == ["add"]
    second = [n for n in g.nodes if n.op in CONVS][1]
    assert second.attrs["data_layout"] == f"NCHW{HOST_BLOCK}c"


def test_a_blocked_value_that_is_also_a_graph_output():
    graph, x = _chain(mix=True, out_mid=True)
    g = _check(graph, x)
    assert _ops(g).count("nchwc_to_nchw") == 2          # one per graph output
    assert g.outputs == graph.outputs                    # the outputs keep their identity


def test_batch_norm_becomes_a_blocked_affine():
    rng = np.random.default_rng(8)
    b = GraphBuilder("bn")
    x = b.input("x", (1, 16, 6, 6), "float32")
    h = b.add1("conv2d", [x, b.const(rng.standard_normal((32, 16, 1, 1)).astype("float32"), "w")],
               dict(CONV, padding=(0, 0, 0, 0)))
    h = b.add1("relu", [h])        # the relu keeps fold_batch_norm from folding it into the conv
    stats = [b.const(v.astype("float32"), n) for v, n in (
        (rng.uniform(0.5, 1.5, 32), "gamma"), (rng.normal(0, 0.1, 32), "beta"),
        (rng.normal(0, 0.1, 32), "mean"), (rng.uniform(0.5, 1.5, 32), "var"))]
    graph = b.finish([b.add1("batch_norm", [h, *stats], {"epsilon": 1e-5})])
    g = _check(graph, rng.standard_normal((1, 16, 6, 6)).astype("float32"))
    assert _ops(g) == ["conv2d_nchwc", "relu", "mul", "add", "nchwc_to_nchw"]


def _packed_pair(block2: int):
    """conv2d_nchwc -> nchwc_to_nchw -> nchw_to_nchwc(block2) -> conv2d_nchwc (blocked input)."""
    rng = np.random.default_rng(9)
    b = GraphBuilder("pair")
    x = b.input("x", (1, 8, 5, 5), "float32")
    w1 = b.const(pack_weight(rng.standard_normal((32, 8, 3, 3)).astype("float32"), 16), "w1")
    w2 = b.const(pack_weight(rng.standard_normal((16, 32, 1, 1)).astype("float32"), 16), "w2")
    h = b.add1("conv2d_nchwc", [x, w1], {"padding": (1, 1, 1, 1)})
    h = b.add1("nchw_to_nchwc", [b.add1("nchwc_to_nchw", [h])], {"block": block2})
    y = b.add1("conv2d_nchwc", [h, w2], {"data_layout": f"NCHW{block2}c"})
    return b.finish([b.add1("nchwc_to_nchw", [y])]), rng.standard_normal((1, 8, 5, 5)).astype("float32")


def test_consecutive_transforms_cancel():
    graph, x = _packed_pair(16)
    g = cancel_layout_transforms(graph)
    assert _ops(g) == ["conv2d_nchwc", "conv2d_nchwc", "nchwc_to_nchw"]
    assert g.nodes[1].inputs[0] is g.nodes[0].outputs[0]
    np.testing.assert_allclose(run_reference(g, x)[0], run_reference(graph, x)[0], rtol=1e-5, atol=1e-5)


def test_transforms_with_different_blocks_do_not_cancel():
    graph, _ = _packed_pair(8)
    assert _ops(cancel_layout_transforms(graph)) == _ops(graph)


def test_reverse_pair_cancels_and_the_pass_is_idempotent():
    b = GraphBuilder("reverse")
    x = b.input("x", (1, 32, 4, 4), "float32")
    y = b.add1("relu", [b.add1("nchwc_to_nchw", [b.add1("nchw_to_nchwc", [x], {"block": 16})])])
    g = cancel_layout_transforms(b.finish([y]))
    assert _ops(g) == ["relu"] and g.nodes[0].inputs[0] is x
    graph, _ = _chain()
    once = alter_layout_propagate(alter_layout(graph, AVX512), AVX512)
    assert _ops(alter_layout_propagate(once, AVX512)) == _ops(once)


@pytest.mark.parametrize("op, keepdims, axes", [("reduce_mean", 1, (-1, -2)), ("reduce_max", 1, (2, 3)),
                                                 ("reduce_mean", 0, (3, 2))])
def test_a_spatial_mean_or_max_is_the_blocked_global_pool(op, keepdims, axes):
    """torch.mean(x, (2, 3)) exports as ReduceMean over the spatial axes: it pools the blocked
    twin, and only the pooled values go back to NCHW."""
    rng = np.random.default_rng(10)
    b = GraphBuilder("spatial")
    x = b.input("x", (1, 16, 6, 6), "float32")
    w = b.const(rng.standard_normal((32, 16, 3, 3)).astype("float32") * 0.2, "w")
    h = b.add1("relu", [b.add1("conv2d", [x, w], CONV)])
    graph = b.finish([b.add1(op, [h], {"axes": axes, "keepdims": keepdims})])
    g = _check(graph, rng.standard_normal((1, 16, 6, 6)).astype("float32"))
    pool = {"reduce_mean": "global_avg_pool_nchwc", "reduce_max": "global_max_pool_nchwc"}[op]
    assert _ops(g)[:3] == ["conv2d_nchwc", "relu", pool] and op not in _ops(g)
    # 1x1 planes have one memory order in both layouts: a reshape takes them back to NCHW
    # (or the output is a view of the pooled buffer, with no node at all)
    assert count_layout_transforms(g) == 0
    back = [n for n in g.nodes if n.inputs and n.inputs[0].ndim == 5 and n.op not in (pool, "relu")]
    assert all(n.op == "reshape" and n.inputs[0].shape == (1, 32 // HOST_BLOCK, 1, 1, HOST_BLOCK) for n in back)
    # the model returns (1, 32) without keepdims (_check compares shapes), as the pooled
    # buffer under the output's shape
    assert g.outputs[0].shape in ((1, 32, 1, 1), (1, 32 // HOST_BLOCK, 1, 1, HOST_BLOCK))


def test_a_reduction_over_other_axes_stays_nchw():
    rng = np.random.default_rng(11)
    b = GraphBuilder("channels")
    x = b.input("x", (1, 16, 6, 6), "float32")
    w = b.const(rng.standard_normal((32, 16, 3, 3)).astype("float32") * 0.2, "w")
    h = b.add1("conv2d", [x, w], CONV)
    graph = b.finish([b.add1("reduce_mean", [h], {"axes": (1, 3), "keepdims": 1})])
    g = _check(graph, rng.standard_normal((1, 16, 6, 6)).astype("float32"))
    assert "reduce_mean" in _ops(g) and "global_avg_pool_nchwc" not in _ops(g)


@pytest.mark.parametrize("op,attrs", [("pad", {"pads": (0, 0, 0, 0, 0, 0, 0, 0)}),
                                      ("transpose", {"perm": (0, 1, 2, 3)})])
def test_an_op_whose_attributes_name_axes_stays_nchw(op, attrs):
    """A pad of nothing or an identity transpose reads its input at the output's index in 4-D,
    but its attributes have one entry per axis (or axis pair): in 5-D they do not apply."""
    b = GraphBuilder("g")
    x = b.input("x", (1, 32, 8, 8), "float32")
    rng = np.random.default_rng(1)
    y = b.add1("conv2d", [x, b.const((0.05 * rng.standard_normal((32, 32, 3, 3))).astype("float32"), "w")], CONV)
    z = b.add1(op, [y], attrs)
    graph = b.finish([b.add1("conv2d", [z, b.const((0.05 * rng.standard_normal((32, 32, 3, 3))).astype("float32"), "w2")], CONV)])
    g = alter_layout_propagate(alter_layout(graph, AVX512), AVX512)
    # (the identity transpose may become a reshape: it keeps its input's memory order)
    assert all(n.inputs[0].ndim == 4 and n.outputs[0].ndim == 4 for n in g.nodes if n.op == op)
    _check(graph, rng.standard_normal((1, 32, 8, 8)).astype("float32"))


@pytest.mark.parametrize("tokens", [True, False])
def test_a_depthwise_conv_between_channels_last_values_runs_on_them(tokens):
    """SegFormer's Mix-FFN: tokens [B, H*W, C] -> transpose -> reshape [B, C, H, W] -> depthwise
    3x3 + bias -> reshape -> transpose back (or an image [B, H, W, C] permuted to NCHW and back).
    The conv reads the channels-last data as NCHW[C]c through a reshape: no transpose is left."""
    rng = np.random.default_rng(2)
    b = GraphBuilder("g")
    c, h, w = 32, 6, 5
    shape = (1, h * w, c) if tokens else (1, h, w, c)
    x = b.input("x", shape, "float32")
    t = b.add1("relu", [x])
    if tokens:
        v = b.add1("reshape", [b.add1("transpose", [t], {"perm": (0, 2, 1)})], {"shape": (1, c, h, w)})
    else:
        v = b.add1("transpose", [t], {"perm": (0, 3, 1, 2)})
    wt = b.const((0.3 * rng.standard_normal((c, 1, 3, 3))).astype("float32"), "w")
    y = b.add1("conv2d", [v, wt], dict(CONV, groups=c))
    y = b.add1("add", [y, b.const(rng.standard_normal((c, 1, 1)).astype("float32"), "bias")])
    if tokens:
        y = b.add1("transpose", [b.add1("reshape", [y], {"shape": (1, c, h * w)})], {"perm": (0, 2, 1)})
    else:
        y = b.add1("transpose", [y], {"perm": (0, 2, 3, 1)})
    graph = b.finish([b.add1("sigmoid", [y])])
    g = optimize(graph, AVX512, opt_level=2)
    ops = _ops(g)
    assert "transpose" not in ops and count_layout_transforms(g) == 0, ops
    (dw,) = [n for n in g.nodes if n.op == "depthwise_conv2d_nchwc"]
    assert dw.inputs[0].shape == (1, 1, h, w, c)
    _check(graph, rng.standard_normal(shape).astype("float32"))


def test_a_chain_of_layout_ops_that_keeps_memory_order_is_a_reshape():
    b = GraphBuilder("g")
    x = b.input("x", (2, 3, 4), "float32")
    same = b.add1("transpose", [b.add1("reshape", [x], {"shape": (2, 4, 3)})], {"perm": (0, 2, 1)})   # (2, 3, 4), reordered
    back = b.add1("transpose", [b.add1("transpose", [x], {"perm": (2, 0, 1)})], {"perm": (1, 2, 0)})
    graph = b.finish([same, back])
    other = same
    g = fold_memory_order_chains(graph)
    producer = {n.outputs[0]: n for n in g.nodes}
    assert producer[back].op == "reshape" and producer[back].inputs[0] is graph.inputs[0]
    assert producer[other].op == "transpose"
    xv = np.arange(24, dtype="float32").reshape(2, 3, 4)
    for got, want in zip(run_reference(g, xv), run_reference(graph, xv)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("residual", [False, True])
def test_a_conv1d_bias_and_activation_run_on_the_blocked_twin(residual):
    """A conv1d runs as a blocked conv2d of height 1 followed by a squeeze: its bias and
    activation (Whisper's first layer: conv1d 80 -> 384, GELU) run on the blocked twin, not on
    the squeezed NCHW values it gathered back with strided loads (12 -> 6 ms on 3000 frames).
    A run-time operand of the output's shape keeps the ops 3-D where no conv reads the result
    (here a graph output: converting the operand to blocks would cost a pass more)."""
    rng = np.random.default_rng(4)
    b = GraphBuilder("g")
    x = b.input("x", (1, 48, 300), "float32")
    w = b.const((0.1 * rng.standard_normal((64, 48, 3))).astype("float32"), "w")
    y = b.add1("conv1d", [x, w], {"strides": (1,), "padding": (1, 1), "dilations": (1,)})
    y = b.add1("add", [y, b.const(rng.standard_normal((64, 1)).astype("float32"), "bias")])
    inputs = [rng.standard_normal((1, 48, 300)).astype("float32")]
    if residual:
        r = b.input("r", (1, 64, 300), "float32")
        y = b.add1("add", [y, r])
        inputs.append(rng.standard_normal((1, 64, 300)).astype("float32"))
    graph = b.finish([b.add1("gelu", [y])])
    g = optimize(graph, AVX512, opt_level=2)
    gelu = next(n for n in g.nodes if n.op == "gelu")
    assert gelu.outputs[0].ndim == (3 if residual else 5)
    model = tensorforge.compile(graph, target="c", opt_level=2)
    np.testing.assert_allclose(model(*inputs)[0], run_reference(graph, *inputs)[0], rtol=1e-4, atol=1e-4)


def test_a_stack_of_conv1d_layers_stays_blocked():
    """wav2vec 2.0's and HuBERT's feature extractors stack conv1d -> GELU -> conv1d: the next
    conv reads the previous one's blocked twin, with no transform between them (it read NCHW
    rows, 512 streams, at half the speed)."""
    rng = np.random.default_rng(5)
    b = GraphBuilder("g")
    x = b.input("x", (1, 32, 200), "float32")
    y = x
    for k in range(3):
        w = b.const((0.2 * rng.standard_normal((32, 32, 3))).astype("float32"), f"w{k}")
        y = b.add1("gelu", [b.add1("conv1d", [y, w], {"strides": (2,), "padding": (0, 0), "dilations": (1,)})])
    graph = b.finish([y])
    g = optimize(graph, AVX512, opt_level=2)
    assert [n.op for n in g.nodes].count("nchwc_to_nchw") == 1
    xv = rng.standard_normal((1, 32, 200)).astype("float32")
    model = tensorforge.compile(graph, target="c", opt_level=2)
    np.testing.assert_allclose(model(xv)[0], run_reference(graph, xv)[0], rtol=1e-4, atol=1e-4)


def _group_norm_net(groups: int, channels: int = 64, reader_of_mid: bool = False):
    """conv -> GroupNorm as torch.onnx.export writes nn.GroupNorm (reshape to (N, G, -1),
    instance_norm, reshape back, channel scale and shift) -> conv."""
    rng = np.random.default_rng(groups)
    b = GraphBuilder("gn")
    x = b.input("x", (1, channels, 12, 10), "float32")
    w1 = b.const(rng.standard_normal((channels, channels, 3, 3)).astype("float32") * 0.1, "w1")
    w2 = b.const(rng.standard_normal((channels, channels, 3, 3)).astype("float32") * 0.1, "w2")
    h = b.add1("conv2d", [x, w1], CONV)
    r = b.add1("reshape", [h], {"shape": (0, groups, -1)})
    z = b.add1("instance_norm", [r, b.const((rng.random(groups) + 0.5).astype("float32"), "s"),
                                 b.const(rng.standard_normal(groups).astype("float32"), "t")], {"epsilon": 1e-5})
    y = b.add1("reshape", [z], {"shape": (1, channels, 12, 10)})
    y = b.add1("mul", [y, b.const((rng.random((channels, 1, 1)) + 0.5).astype("float32"), "gamma")])
    y = b.add1("add", [y, b.const(rng.standard_normal((channels, 1, 1)).astype("float32"), "beta")])
    outs = [b.add1("conv2d", [y, w2], CONV)]
    if reader_of_mid:
        outs.append(b.add1("relu", [z]))         # the (N, G, L) value read in NCHW order too
    return b.finish(outs), rng.standard_normal((1, channels, 12, 10)).astype("float32")


@pytest.mark.parametrize("groups,blocked", [(1, True), (2, True), (32, False)])
def test_a_group_norm_whose_groups_are_whole_blocks_runs_on_the_twin(groups, blocked):
    graph, x = _group_norm_net(groups)
    g = optimize(graph, AVX512)
    norm = [n for n in g.nodes if n.op == "instance_norm"]
    assert len(norm) == 1
    # the blocked form: the statistics read the twin through a reshape, nothing goes to NCHW
    assert (_ops(g).count("nchwc_to_nchw") == 1) == blocked      # the graph output's only
    _check(graph, x)


def test_a_group_norm_whose_grouped_value_has_another_reader_stays_nchw():
    graph, x = _group_norm_net(2, reader_of_mid=True)
    assert _ops(optimize(graph, AVX512)).count("nchwc_to_nchw") > 1
    _check(graph, x)


def _branches_net(reader: str, channels=(32, 32), plain_branch: bool = False):
    """Two conv branches of `x` (or a conv and `x` itself), concatenated over channels, then
    read by `reader`: a 1x1 conv, a 3x3 average pool, a relu, or a reshape (a channel shuffle
    needs NCHW)."""
    rng = np.random.default_rng(len(reader) + sum(channels))
    b = GraphBuilder("branches")
    cin = channels[1] if plain_branch else 16
    x = b.input("x", (1, cin, 9, 7), "float32")
    parts = []
    for k, c in enumerate(channels):
        if plain_branch and k == 1:
            parts.append(x)
            continue
        w = b.const(rng.standard_normal((c, cin, 3, 3)).astype("float32") * 0.2, f"w{k}")
        parts.append(b.add1("relu", [b.add1("conv2d", [x, w], CONV)]))
    cat = b.add1("concat", parts, {"axis": 1})
    total = sum(channels)
    if reader == "conv":
        w = b.const(rng.standard_normal((32, total, 1, 1)).astype("float32") * 0.2, "wr")
        y = b.add1("conv2d", [cat, w], dict(CONV, padding=(0, 0, 0, 0)))
    elif reader == "pool":
        y = b.add1("avg_pool2d", [cat], {"kernel": (3, 3), "strides": (1, 1), "padding": (1, 1, 1, 1),
                                         "count_include_pad": True})
    elif reader == "relu":
        y = b.add1("relu", [cat])
    else:
        y = b.add1("reshape", [cat], {"shape": (1, 2, total // 2, 9, 7)})
    return b.finish([y]), rng.standard_normal((1, cin, 9, 7)).astype("float32")


@pytest.mark.parametrize("reader", ["conv", "pool", "relu"])
def test_a_channel_concat_of_blocked_values_runs_on_the_twins(reader):
    """Inception's, DenseNet's and a U-Net's concatenations: the blocked branches are
    concatenated along the block axis and the readers take the result blocked; the only layout
    change left is the graph output's."""
    graph, x = _branches_net(reader)
    g = _check(graph, x)
    (cat,) = [n for n in g.nodes if n.op == "concat"]
    assert cat.outputs[0].ndim == 5 and all(v.ndim == 5 for v in cat.inputs) and cat.attrs["axis"] == 1
    assert _ops(g).count("nchwc_to_nchw") == 1 and "nchw_to_nchwc" not in _ops(g)
    if reader == "conv":
        (conv,) = [n for n in g.nodes if n.inputs[0] is cat.outputs[0]]
        assert conv.op == "conv2d_nchwc" and conv.attrs["data_layout"] == f"NCHW{HOST_BLOCK}c"


@pytest.mark.parametrize("case", ["nchw reader", "nchw input", "other blocks"])
def test_a_channel_concat_stays_nchw_where_its_twin_would_not_serve(case):
    """Read only by an op that needs NCHW (a channel shuffle's reshape), with an input that has
    no blocked twin (the graph input), or with twins of different blocks, the concat runs on
    NCHW values as before."""
    if case == "nchw reader":
        graph, x = _branches_net("reshape")
    elif case == "nchw input":
        graph, x = _branches_net("relu", plain_branch=True)
    else:
        graph, x = _branches_net("relu", channels=(32, 8))
    g = _check(graph, x)
    (cat,) = [n for n in g.nodes if n.op == "concat"]
    assert cat.outputs[0].ndim == 4


@pytest.mark.parametrize("mode,ctm", [("nearest", "asymmetric"), ("linear", "half_pixel"),
                                      ("linear", "align_corners"), ("cubic", "pytorch_half_pixel")])
def test_an_up_sampling_read_by_a_conv_resizes_the_blocked_planes(mode, ctm):
    """A YOLO neck's or a U-Net's up-sampling between blocked convs resizes the twin's planes (its
    lanes are channels: every tap one contiguous block) and the next conv reads the result
    blocked; the values are the reference's."""
    rng = np.random.default_rng(3)
    b = GraphBuilder("upsample")
    x = b.input("x", (1, 16, 6, 5), "float32")
    w1 = b.const(rng.standard_normal((32, 16, 3, 3)).astype("float32") * 0.2, "w1")
    w2 = b.const(rng.standard_normal((32, 32, 3, 3)).astype("float32") * 0.2, "w2")
    h = b.add1("relu", [b.add1("conv2d", [x, w1], CONV)])
    up = b.add1("resize", [h], {"sizes": (1, 32, 12, 9), "scales": (1.0, 1.0, 2.0, 1.8), "mode": mode,
                                "coordinate_transformation_mode": ctm})
    graph = b.finish([b.add1("conv2d", [up, w2], CONV)])
    g = _check(graph, rng.standard_normal((1, 16, 6, 5)).astype("float32"))
    (resize,) = [n for n in g.nodes if n.op == "resize"]
    assert resize.outputs[0].shape == (1, 32 // HOST_BLOCK, 12, 9, HOST_BLOCK)
    assert _ops(g).count("nchwc_to_nchw") == 1 and "nchw_to_nchwc" not in _ops(g)


def test_an_up_sampling_read_in_nchw_stays_nchw():
    """Up-sampled to a graph output (DeepLab's last resize), the resize converts its smaller input
    back to NCHW, not its output."""
    rng = np.random.default_rng(4)
    b = GraphBuilder("upsample_out")
    x = b.input("x", (1, 16, 6, 5), "float32")
    w1 = b.const(rng.standard_normal((32, 16, 3, 3)).astype("float32") * 0.2, "w1")
    h = b.add1("relu", [b.add1("conv2d", [x, w1], CONV)])
    graph = b.finish([b.add1("resize", [h], {"sizes": (1, 32, 24, 20), "scales": (1.0, 1.0, 4.0, 4.0),
                                             "mode": "linear"})])
    g = _check(graph, rng.standard_normal((1, 16, 6, 5)).astype("float32"))
    (resize,) = [n for n in g.nodes if n.op == "resize"]
    assert resize.outputs[0].ndim == 4


@pytest.mark.parametrize("cout, blocked", [(32, True), (24, False)])
def test_a_unet_up_sampling_moves_blocks_of_the_twin(cout, blocked):
    """A 2x2 stride-2 transposed conv (a 1x1 conv and a depth-to-space, conv_transpose_as_conv),
    concatenated with the skip and read by a conv: where its output channels are whole blocks,
    the depth-to-space moves blocks of the conv's twin and the concat and the next conv stay
    blocked; the values are the reference's either way."""
    rng = np.random.default_rng(cout)
    b = GraphBuilder("unet_up")
    x = b.input("x", (1, 16, 10, 6), "float32")
    skip = b.input("skip", (1, 16, 20, 12), "float32")
    w0 = b.const(rng.standard_normal((64, 16, 3, 3)).astype("float32") * 0.2, "w0")
    ws = b.const(rng.standard_normal((32, 16, 3, 3)).astype("float32") * 0.2, "ws")
    wt = b.const(rng.standard_normal((64, cout, 2, 2)).astype("float32") * 0.2, "wt")
    w1 = b.const(rng.standard_normal((32, cout + 32, 3, 3)).astype("float32") * 0.2, "w1")
    h = b.add1("relu", [b.add1("conv2d", [x, w0], CONV)])
    up = b.add1("conv_transpose2d", [h, wt], {"strides": (2, 2), "padding": (0, 0, 0, 0), "output_padding": (0, 0),
                                              "dilations": (1, 1), "groups": 1})
    s = b.add1("relu", [b.add1("conv2d", [skip, ws], CONV)])
    cat = b.add1("concat", [up, s], {"axis": 1})
    graph = b.finish([b.add1("conv2d", [cat, w1], CONV)])
    feeds = [rng.standard_normal(v.shape).astype("float32") for v in graph.inputs]
    model = tensorforge.compile(graph, target="c", opt_level=2)
    for got, want in zip(model(*feeds), run_reference(graph, *feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    g = model.info["graph"]
    (d2s,) = [n for n in g.nodes if n.op == "depth_to_space"]
    assert (d2s.outputs[0].ndim == 5) == blocked
    if blocked:
        assert _ops(g).count("nchwc_to_nchw") == 1 and "nchw_to_nchwc" not in _ops(g)


def test_a_slice_keeping_every_step_between_conv1d_layers_runs_on_the_twin():
    """A slice of a conv1d's steps that keeps them all (EnCodec's padding removal where the
    padding is zero) reads the output at its own index: it runs on the blocked twin like any
    elementwise op (not as a slice of planes), and the next conv reads the result blocked."""
    rng = np.random.default_rng(11)
    b = GraphBuilder("trim")
    x = b.input("x", (1, 64, 40), "float32")
    w1 = b.const(rng.standard_normal((32, 64, 3)).astype("float32") * 0.2, "w1")
    w2 = b.const(rng.standard_normal((32, 32, 3)).astype("float32") * 0.2, "w2")
    conv1d = {"strides": (1,), "padding": (2, 2), "dilations": (1,), "groups": 1}
    h = b.add1("elu", [b.add1("conv1d", [x, w1], conv1d)])
    t = b.add1("slice", [h], {"starts": (0,), "ends": (42,), "axes": (2,)})
    graph = b.finish([b.add1("conv1d", [t, w2], conv1d)])
    g = _check(graph, rng.standard_normal((1, 64, 40)).astype("float32"))
    (cut,) = [n for n in g.nodes if n.op == "slice"]
    assert cut.outputs[0].ndim == 5 and _ops(g).count("nchwc_to_nchw") == 1


def test_a_tcn_residual_add_runs_on_the_twin():
    """A temporal conv net's residual block (conv1d, relu, conv1d, relu, + its input): the add
    reads its plain input as [N, C, 1, W] converted to blocks, so the next block's convs read
    blocked data; the values are the reference's."""
    rng = np.random.default_rng(12)
    b = GraphBuilder("tcn")
    x = b.input("x", (1, 32, 50), "float32")
    conv1d = {"strides": (1,), "padding": (2, 0), "dilations": (1,), "groups": 1}
    h = x
    for k in range(2):
        w1 = b.const(rng.standard_normal((32, 32, 3)).astype("float32") * 0.2, f"w{k}a")
        w2 = b.const(rng.standard_normal((32, 32, 3)).astype("float32") * 0.2, f"w{k}b")
        y = b.add1("relu", [b.add1("conv1d", [b.add1("relu", [b.add1("conv1d", [h, w1], conv1d)]), w2], conv1d)])
        h = b.add1("relu", [b.add1("add", [h, y])])
    g = _check(b.finish([h]), rng.standard_normal((1, 32, 50)).astype("float32"))
    adds = [n for n in g.nodes if n.op == "add" and len(n.inputs) == 2 and n.inputs[0].ndim == n.inputs[1].ndim]
    assert all(n.outputs[0].ndim == 5 for n in adds) and _ops(g).count("nchw_to_nchwc") == 1
