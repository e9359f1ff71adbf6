"""Fusion by the paper's rules (kernel counts), the memory plan, the executor and export/load."""
import numpy as np
import pytest

import tensorforge
from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.fuse import fuse
from tensorforge.graph.ir import Graph, GraphError, Node, Value
from tensorforge.graph.reference import run_reference


def mlp():
    b = GraphBuilder("mlp")
    rng = np.random.default_rng(0)
    x = b.input("x", (4, 16), "float32")
    w1 = b.const(rng.standard_normal((32, 16)).astype("float32"), "w1")
    b1 = b.const(rng.standard_normal((32,)).astype("float32"), "b1")
    w2 = b.const(rng.standard_normal((8, 32)).astype("float32"), "w2")
    h = b.add1("t_dense", [x, w1])
    h = b.add1("t_add", [h, b1])
    h = b.add1("t_relu", [h])
    y = b.add1("t_dense", [h, w2])
    r = b.add1("t_add", [y, y])       # diamond into one injective op
    s = b.add1("t_sum", [b.add1("t_relu", [r])])
    z = b.add1("t_sort", [r])
    return b.finish([s, z])


def test_fusion_rules_kernel_count():
    g = mlp()
    groups = fuse(g)
    shapes = [(grp.pattern, [n.op for n in grp.nodes]) for grp in groups]
    assert shapes == [
        ("complex-out-fusable", ["t_dense", "t_add", "t_relu"]),   # dense + bias + relu: one kernel
        ("complex-out-fusable", ["t_dense", "t_add"]),             # diamond y -> add(y, y) fused
        ("reduction", ["t_relu", "t_sum"]),                        # reduction with its injective input
        ("opaque", ["t_sort"]),
    ]


def test_compiled_matches_reference_and_export(tmp_path):
    g = mlp()
    model = tensorforge.compile(g, target="c")
    x = np.random.default_rng(1).standard_normal((4, 16)).astype("float32")
    got = model(x)
    want = run_reference(g, x)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    assert model.run(x=x)[0].shape == (4,)
    path = model.export(str(tmp_path / "mlp.tfm"))
    again = tensorforge.load(path)
    for a, b in zip(again(x), want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    prof = model.profile(x, repeat=2)
    assert len(prof) == 4


def test_bad_inputs_are_clear():
    model = tensorforge.compile(mlp(), target="c")
    with pytest.raises(ValueError, match=r"input 'x': expected shape \(4, 16\), got \(4, 15\)"):
        model(np.zeros((4, 15), "float32"))
    with pytest.raises(TypeError, match="expected dtype float32, got float64"):
        model(np.zeros((4, 16)))
    with pytest.raises(TypeError, match="unknown input"):
        model.run(y=np.zeros((4, 16), "float32"))


def test_cycle_is_rejected():
    a = Value("a", (2,), "float32")
    b = Value("b", (2,), "float32")
    x = Value("x", (2,), "float32")
    nodes = [Node("t_add", (x, b), (a,)), Node("t_relu", (a,), (b,))]
    with pytest.raises(GraphError, match="before it is defined"):
        Graph((x,), (b,), tuple(nodes)).validate()


def test_memory_plan_reuses_storage():
    b = GraphBuilder("chain")
    x = b.input("x", (64, 64), "float32")
    w = b.const(np.ones((64, 64), "float32"), "w")
    h = x
    for _ in range(6):
        h = b.add1("t_relu", [b.add1("t_dense", [h, w])])
    g = b.finish([h])
    model = tensorforge.compile(g, target="c")
    plan = model.info["plan"]
    assert plan.total_bytes <= 2 * 64 * 64 * 4 + 128   # ping-pong between two buffers
    assert plan.unplanned_bytes == 5 * 64 * 64 * 4
    xin = np.random.default_rng(0).standard_normal((64, 64)).astype("float32") * 0.01
    np.testing.assert_allclose(model(xin)[0], run_reference(g, xin)[0], rtol=1e-4, atol=1e-4)


def test_resnet18_fusion_and_memory_plan():
    from tensorforge.frontend import from_onnx
    from tensorforge.graph.pipeline import optimize
    from tensorforge.graph.plan_memory import plan_memory
    from tensorforge.testing import models
    # a fixed AVX-512 target (with 16 registers the 7-column stride-2 conv is a GEMM on its windows)
    g = optimize(from_onnx(models.get("resnet18")[0]), "c -mcpu=x86-64-v4")
    assert not any(n.op == "batch_norm" for n in g.nodes)     # folded into the convolutions
    groups = fuse(g)
    kinds = [tuple(n.op for n in grp.nodes) for grp in groups]
    assert len(groups) == 23
    conv = ("conv2d_nchwc",)              # blocked-layout conv, values stay NCHW[x]c between kernels
    wino = ("conv2d_winograd_nchwc",)     # the 3x3 stride-1 convs
    assert kinds.count(conv + ("add", "relu")) == 4               # stem + stride-2 convs + folded BN + relu
    assert kinds.count(wino + ("add", "relu")) == 5
    assert kinds.count(wino + ("add", "add", "relu")) == 8        # ... + residual add
    assert kinds.count(conv + ("add",)) == 3                      # downsample convs + folded BN
    assert kinds.count(("max_pool2d_nchwc",)) == 1
    # back to NCHW after the pool: a reshape, since 1x1 planes are laid out alike in both layouts
    assert kinds.count(("global_avg_pool_nchwc", "reshape", "flatten")) == 1
    external = set(g.inputs) | set(g.params) | set(g.outputs)
    plan = plan_memory([(x.inputs, x.outputs) for x in groups], external)
    all_intermediates = sum(v.nbytes for n in g.nodes for v in n.outputs if v not in external)
    assert plan.total_bytes <= all_intermediates / 3


def test_simplify_graph_merges_reshapes_and_drops_identities():
    from tensorforge.graph.pipeline import optimize
    b = GraphBuilder("shapes")
    x = b.input("x", (2, 3, 4), "float32")
    h = b.add1("identity", [x])
    h = b.add1("reshape", [h], {"shape": (6, 4)})
    h = b.add1("reshape", [h], {"shape": (4, 6)})
    g = b.finish([b.add1("t_relu", [h])])
    opt = optimize(g, "c")
    assert [n.op for n in opt.nodes] == ["reshape", "t_relu"]
    assert opt.nodes[0].inputs[0] is g.inputs[0]
    xin = np.random.default_rng(0).standard_normal((2, 3, 4)).astype("float32")
    np.testing.assert_array_equal(run_reference(opt, xin)[0], run_reference(g, xin)[0])


def test_elementwise_producers_of_a_reduction_are_inlined():
    """mul, relu, exp, add fused into reduce_sum: one kernel that computes them inside the
    reduction, with no temporary buffer per producer (they used to be written in full, in
    serial scalar loops, making the fused kernel slower than the unfused ones)."""
    from tensorforge.graph.reference import run_reference
    from tensorforge.ir.functor import post_order_visit
    from tensorforge.tir import nodes as N

    rng = np.random.default_rng(0)
    b = GraphBuilder("reduce_fused")
    x = b.input("x", (1, 8, 6, 6), "float32")
    c = b.const(rng.standard_normal((1, 8, 1, 1)).astype("float32"), "c")
    h = b.add1("add", [b.add1("exp", [b.add1("relu", [b.add1("mul", [x, c])])]), x])
    graph = b.finish([b.add1("reduce_sum", [h], {"axes": (2, 3), "keepdims": 1})])
    model = tensorforge.compile(graph)
    assert [[n.op for n in g.nodes] for g in model.info["groups"]] == [["mul", "relu", "exp", "add", "reduce_sum"]]
    (func,) = model.info["funcs"]
    allocated = []
    post_order_visit(func.body, lambda n: allocated.append(n.buffer.name) if isinstance(n, N.Allocate) else None)
    assert allocated == []
    data = rng.standard_normal((1, 8, 6, 6)).astype("float32")
    np.testing.assert_allclose(model(data)[0], run_reference(graph, data)[0], rtol=1e-5, atol=1e-5)
