"""Tasks: extraction from a graph (distinct workloads, occurrence counts), and candidates that
compute the same result under every config (tuning never changes what is computed)."""
import random

import numpy as np
import pytest
from autotune_graphs import conv_net, first_conv_group, schedule_group

import tensorforge
from tensorforge.autotune import extract_tasks
from tensorforge.autotune.task import Task, instantiate
from tensorforge.ops.schedules import get_template, get_tunable
from tensorforge.target import Target
from tensorforge.testing import check_candidate

# a fixed 16-lane target: the blocks (NCHW32c) and shapes below do not depend on the machine
AVX512 = "c -mcpu=skylake-avx512"


def test_extract_tasks_counts_distinct_workloads():
    # opt_level 2: the direct convolutions (3 adds the Winograd rewrite, below)
    tasks = extract_tasks(conv_net(), target=AVX512, opt_level=2)
    assert [(t.template, t.occurrences) for t in tasks] == [
        ("conv2d_nchwc.cpu", 1), ("conv2d_nchwc.cpu", 2), ("matmul_packed.cpu", 1)]
    first, shared, dense = tasks
    # the first conv reads the NCHW input; the others read the blocked output of the one before
    assert first.inputs[0] == ((1, 8, 10, 10), "float32") and shared.inputs[0] == ((1, 1, 10, 10, 32), "float32")
    assert "data_layout" not in dict(first.attrs) and dict(shared.attrs)["data_layout"] == "NCHW32c"
    assert dict(shared.attrs)["padding"] == (1, 1, 1, 1) and dense.op == "matmul_packed"
    assert all(t.config_space.size > 1 for t in tasks)
    assert shared.flops == 2 * (1 * 32 * 10 * 10) * (32 * 3 * 3)
    with pytest.raises(TypeError, match="expects a tensorforge Graph"):
        extract_tasks("model.onnx")


def test_extract_tasks_winograd_at_opt_level_3():
    # the 3x3 stride-1 convs on blocked data become one Winograd task with its transformed weight
    first, wino, dense = extract_tasks(conv_net(), target=AVX512)
    assert first.template == "conv2d_nchwc.cpu" and dense.op == "matmul_packed"
    assert (wino.template, wino.occurrences) == ("conv2d_winograd_nchwc.cpu", 2)
    attrs = dict(wino.attrs)
    assert attrs["tile"] == 4 and attrs["data_layout"] == "NCHW32c" and attrs["padding"] == (1, 1, 1, 1)
    assert wino.inputs[1] == ((6, 6, 1, 32, 32), "float32")
    # the product stage's multiply-adds: 36 positions x 9 tiles (3x3 of 4x4) x 32 x 32 channels
    assert wino.flops == 2 * 36 * 9 * 32 * 32


@pytest.mark.parametrize("task,n", [
    (Task.for_op("matmul", [((2, 13, 24), "float32"), ((2, 24, 40), "float32")]), 5),
    (Task.for_op("matmul_packed", [((6, 32), "float32"), ((2, 32, 32), "float32")], {"units": 50}), 3),
    (Task.for_op("conv2d_nchwc", [((1, 8, 6, 6), "float32"), ((1, 8, 3, 3, 32), "float32")],
                 {"padding": (1, 1, 1, 1), "strides": (1, 1)}), 4),
    (Task.for_op("conv2d_nchwc", [((1, 2, 7, 6, 8), "float32"), ((2, 16, 3, 3, 16), "float32")],
                 {"padding": (1, 0, 1, 2), "strides": (2, 1), "data_layout": "NCHW8c"}), 4),
], ids=["matmul", "packed", "conv", "conv_blocked_input"])
def test_every_config_computes_the_same(task, n):
    space = task.config_space
    rng = random.Random(0)
    configs = [space.default_config()] + [space.random(rng) for _ in range(n)]
    if "pack_b" in space:
        configs.append(space.from_json({**space.random(rng).to_json(), "pack_b": True, "order": [1, 0]}))
    for c in configs:
        check_candidate(task, c)


def _build_group(group, template, cfg):
    """(module, placeholders, outputs) of the group scheduled by `template` under `cfg`."""
    s, placeholders, outs = schedule_group(group, template, cfg)
    return tensorforge.build(s, placeholders + outs), placeholders, outs


def test_conv_configs_inside_a_fused_epilogue_compute_the_same():
    group = first_conv_group()
    task = extract_tasks(conv_net(), opt_level=2)[0]
    rng = random.Random(3)
    want_mod, placeholders, outs = _build_group(group, get_template("conv2d_nchwc.cpu"), None)
    data = np.random.default_rng(0)
    inputs = [data.standard_normal([int(d.value) for d in p.shape]).astype("float32") for p in placeholders]
    want = np.zeros([int(d.value) for d in outs[0].shape], "float32")
    want_mod(*inputs, want)
    for _ in range(3):
        # a config of the task (the conv alone) applies to the group with its epilogue
        config = task.config_space.random(rng)
        mod, _, _ = _build_group(group, get_tunable("conv2d_nchwc.cpu").fn, config)
        got = np.full_like(want, np.nan)
        mod(*inputs, got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=str(config))


@pytest.fixture
def small_l2(monkeypatch):
    """An L2 cache of 4 KiB: the small convs below then have weights that do not fit it (the
    config spaces, cached per task, are built afresh under it and after it)."""
    from tensorforge.autotune import task as task_module
    task_module._config_space.cache_clear()
    monkeypatch.setattr(Target, "l2_cache_bytes", property(lambda self: 4096))
    yield
    task_module._config_space.cache_clear()


@pytest.mark.parametrize("task", [
    # NCHW input with many channels and a long kernel row (the pitch estimator's shape, small)
    Task.for_op("conv2d_nchwc", [((2, 24, 1, 23), "float32"), ((2, 24, 1, 9, 8), "float32")],
                {"padding": (0, 4, 0, 4), "strides": (1, 1)}),
    # blocked input: the chunks are of channel blocks
    Task.for_op("conv2d_nchwc", [((1, 4, 5, 13, 8), "float32"), ((2, 32, 3, 3, 8), "float32")],
                {"padding": (1, 1, 1, 1), "strides": (1, 1), "data_layout": "NCHW8c"}),
], ids=["nchw_input", "blocked_input"])
def test_reduction_chunks_compute_the_same(task, small_l2):
    # weights of one output block beyond L2: the chunk_rc knob exists, its default chunks the
    # reduction, and every chunk (with the other knobs random: column tails, loop orders) agrees
    # with the reference
    space = task.config_space
    assert "chunk_rc" in space
    chunks = [e.to_json() for e in space.knob("chunk_rc").entities if e.to_json()]
    assert chunks and space.default_config()["chunk_rc"].val in chunks
    rng = random.Random(5)
    for c in [0, *chunks]:
        check_candidate(task, space.from_json({**space.random(rng).to_json(), "chunk_rc": c}))


def test_reduction_chunks_only_where_the_weights_exceed_l2():
    task = Task.for_op("conv2d_nchwc", [((2, 24, 1, 23), "float32"), ((2, 24, 1, 9, 8), "float32")],
                       {"padding": (0, 4, 0, 4), "strides": (1, 1)})
    assert "chunk_rc" not in task.config_space      # 7 KiB of weights per block


def test_reduction_chunks_inside_a_fused_epilogue_compute_the_same(small_l2):
    group = first_conv_group()
    task = extract_tasks(conv_net(), opt_level=2)[0]
    assert "chunk_rc" in task.config_space
    data = np.random.default_rng(0)
    inputs, results = None, []
    for c in [e.to_json() for e in task.config_space.knob("chunk_rc").entities]:
        config = task.config_space.from_json({**task.config_space.default_config().to_json(), "chunk_rc": c})
        mod, placeholders, outs = _build_group(group, get_tunable("conv2d_nchwc.cpu").fn, config)
        if inputs is None:
            inputs = [data.standard_normal([int(d.value) for d in p.shape]).astype("float32") for p in placeholders]
        got = np.full([int(d.value) for d in outs[0].shape], np.nan, "float32")
        mod(*inputs, got)
        results.append(got)
    for got in results[1:]:
        np.testing.assert_allclose(got, results[0], rtol=1e-4, atol=1e-4)


@pytest.fixture
def small_caches(monkeypatch):
    """L1 of 1 KiB and L2 of 8 KiB: the small products below then take cache blocks."""
    from tensorforge.autotune import task as task_module
    task_module._config_space.cache_clear()
    monkeypatch.setattr(Target, "l1_cache_bytes", property(lambda self: 1024))
    monkeypatch.setattr(Target, "l2_cache_bytes", property(lambda self: 8192))
    yield
    task_module._config_space.cache_clear()


AVX2 = "c -mcpu=x86-64-v3"


@pytest.mark.parametrize("task", [
    Task.for_op("matmul_packed", [((96, 64), "float32"), ((4, 64, 16), "float32")], {"units": 64}, target=AVX2),
    Task.for_op("matmul_packed", [((2, 100, 96), "float32"), ((3, 96, 16), "float32")], {"units": 48}, target=AVX2),
], ids=["packed", "packed_batched"])
def test_cache_blocks_compute_the_same(task, small_caches):
    # a reduction of several L1-sized chunks with 16 registers: the cache_block knob exists, its
    # default blocks the product, and every value (with the other knobs random) matches the
    # reference
    space = task.config_space
    assert "cache_block" in space
    values = [e.to_json() for e in space.knob("cache_block").entities]
    assert values[0] == "none" and space.default_config()["cache_block"].val != "none"
    rng = random.Random(7)
    for value in values:
        check_candidate(task, space.from_json({**space.random(rng).to_json(), "cache_block": value}))


def test_cache_blocks_only_with_16_registers_and_enough_rows(small_caches):
    from tensorforge.ops.schedules.cpu_matmul import cache_blocks
    avx2, avx512 = Target.parse(AVX2), Target.parse("c -mcpu=x86-64-v4")
    assert cache_blocks(96, 64, 64, 6, 16, avx2) == [(16, 48, 64), (8, 48, 64)]
    assert cache_blocks(96, 64, 64, 6, 64, avx512) == []      # 32 registers: unmeasured there
    assert cache_blocks(48, 64, 64, 6, 16, avx2) == []        # 8 row tiles
    assert cache_blocks(96, 64, 16, 6, 16, avx2) == []        # one chunk of the reduction
    assert cache_blocks(96, 40, 64, 6, 16, avx2) == []        # no multiple of nr divides N


@pytest.mark.parametrize("size,order", [(2, [0, 1]), (7, [1, 0])])
def test_pointwise_rows_order_follows_the_input_size(size, order, small_l2):
    # weights of 16 KiB fill the 4 KiB L2 of `small_l2`: the position tiles go outside the
    # channel blocks only when the input (size x size x 64 channels) does not fit half of it
    task = Task.for_op("conv2d_nchwc", [((1, 8, size, size, 8), "float32"), ((4, 64, 1, 1, 16), "float32")],
                       {"data_layout": "NCHW8c"}, target=AVX2)
    assert list(task.config_space.default_config()["order_outer"].perm) == order
    check_candidate(task, None)


@pytest.mark.parametrize("size,strides,order", [(4, 2, [0, 1]), (16, 2, [1, 0]), (8, 1, [0, 1])])
def test_strided_pointwise_rows_put_positions_outside_when_the_input_spans_l2(size, strides, order, small_l2):
    # weights of 512 B, far from filling the 4 KiB L2: a stride-2 conv takes the position tiles
    # outside the channel blocks when the input rows it spans (16 x 16 x 8 channels: 8 KiB)
    # exceed half of L2; a 4 x 4 input does not, nor does an unstrided conv on 8 x 8 (2 KiB)
    task = Task.for_op("conv2d_nchwc", [((1, 1, size, size, 8), "float32"), ((2, 8, 1, 1, 8), "float32")],
                       {"data_layout": "NCHW8c", "strides": (strides, strides)}, target=AVX2)
    assert list(task.config_space.default_config()["order_outer"].perm) == order
    check_candidate(task, None)


@pytest.mark.parametrize("shape,strides", [((1, 2, 7, 9, 8), (1, 1)), ((2, 2, 9, 11, 8), (2, 2)),
                                           ((1, 2, 8, 13, 8), (2, 1))], ids=["s1", "s2", "s2x1"])
def test_pointwise_rows_with_strides_compute_the_same(shape, strides):
    # a 1x1 unpadded conv on blocked data, strided or not, is a product over output positions
    # (conv2d_nchwc_rows); its default and random configs (position tails) match the reference
    task = Task.for_op("conv2d_nchwc", [(shape, "float32"), ((2, 16, 1, 1, 16), "float32")],
                       {"data_layout": "NCHW8c", "strides": strides}, target=AVX2)
    _, args = instantiate(task, None)
    assert any(getattr(t.op, "tag", "") == "conv2d_nchwc_rows" for t in args[-1].op.input_tensors())
    rng = random.Random(11)
    for config in [None] + [task.config_space.random(rng) for _ in range(3)]:
        check_candidate(task, config)


@pytest.mark.parametrize("shape,kernel,strides", [((1, 2, 27, 27, 8), 3, (2, 2)), ((1, 2, 20, 20, 8), 4, (2, 2)),
                                                  ((1, 2, 9, 40, 8), 3, (1, 2))])
def test_strided_conv_on_blocked_input_takes_a_wide_tile(shape, kernel, strides):
    # 16 registers: up to 15 columns, the kernel column unrolled inside them, the block's
    # vectors not unrolled; the default computes what the reference does
    task = Task.for_op("conv2d_nchwc", [(shape, "float32"), ((2, 16, kernel, kernel, 16), "float32")],
                       {"data_layout": "NCHW8c", "strides": strides, "padding": (1, 1, 1, 1)}, target=AVX2)
    config = task.config_space.default_config()
    assert list(config["order_inner"].perm) == [0, 1, 3, 2] and config["unroll_kw"].val
    assert config["unroll_acc"].anns == ("unroll", "none") and 8 <= config["tile_x"].size[-1] <= 15
    check_candidate(task, None)



def test_cache_block_accumulators_live_on_the_stack():
    """A cache block of accumulators fits the stack limit of the C printer, so it is a local
    array (GCC keeps its register tiles in registers through the reduction), not a heap block
    (inside a parallel loop GCC could not tell a heap block from the operands, and loaded and
    stored the tile at every multiply-add: BERT's FFN output product ran 3x slower when the
    block's address shared its low 12 bits with the rows it read)."""
    from tensorforge.codegen.c import STACK_LIMIT_BYTES
    from tensorforge.ops.schedules.cpu_matmul import BLOCK_BYTES
    assert BLOCK_BYTES <= STACK_LIMIT_BYTES
    task = Task.for_op("matmul_packed", [((128, 1024), "float32"), ((16, 1024, 16), "float32")], {"units": 256},
                       target=AVX2)
    config = task.config_space.default_config()
    assert config["cache_block"].val != "none"
    from tensorforge.autotune.task import build_candidate
    from tensorforge.build_module import build
    source = build(build_candidate(task, config)).source
    assert "tf_alloc" not in source and "__attribute__((aligned(64)))" in source


@pytest.mark.parametrize("kw,columns", [(16, 14), (5, 15)])
def test_one_vector_tile_leaves_a_register_for_the_weight(kw, columns):
    """With 16 registers and 8-channel blocks: taps in a loop of their own (16 of them) take 14
    columns, so the broadcast and the tap's weight vector both stay in registers; taps unrolled
    into the columns (5, unblocked input) keep 15."""
    task = Task.for_op("conv2d_nchwc", [((1, 24, 1, 300), "float32"), ((3, 24, 1, kw, 8), "float32")],
                       {"padding": (0, kw // 2, 0, kw // 2)}, target=AVX2)
    config = task.config_space.default_config()
    assert config["tile_x"].size[-1] == columns
    check_candidate(task, config)
