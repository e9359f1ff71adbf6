"""Every op family through the GPU schedule templates on OpenCL, against the op's NumPy
reference: each case is a one-op graph (its constants as params) compiled with
`tensorforge.compile(graph, target="opencl")`, so the kernel is scheduled by the template the op
names for GPUs (conv2d.gpu, matmul.gpu) or by the generic injective/reduction/complex.gpu."""
from __future__ import annotations

import numpy as np
import pytest
from gpu_probe import SPELLING

import tensorforge
from tensorforge.graph.builder import GraphBuilder
from tensorforge.ops import registry

R = np.random.default_rng(7)


def f32(*shape):
    return R.standard_normal(shape).astype("float32")


def pos(*shape):
    return (R.random(shape) + 0.5).astype("float32")


# (op, inputs (arrays; the first is the graph input, the rest constants), attrs): at least one per
# op family module (elemwise_*, activation*, reduce*, nn_*, transform_*, index_*)
CASES = [
    ("add", [f32(3, 17), f32(17)], {}),                                   # broadcasting, a tail block
    ("div", [f32(2, 5, 7), pos(2, 1, 7)], {}),
    ("maximum", [f32(64), f32(64)], {}),
    ("exp", [f32(4, 33)], {}),
    ("sqrt", [pos(300)], {}),
    ("cast", [f32(5, 6) * 10], {"dtype": "int32"}),
    ("where", [f32(4, 4) > 0, f32(4, 4), f32(4, 4)], {}),
    ("greater", [f32(9), f32(9)], {}),
    ("pow", [pos(3, 4), f32(3, 4)], {}),
    ("relu", [f32(1000)], {}),
    ("sigmoid", [f32(2, 50)], {}),
    ("gelu", [f32(8, 16)], {}),
    ("leaky_relu", [f32(7, 3)], {"alpha": 0.2}),
    ("reduce_sum", [f32(6, 40)], {"axes": (1,), "keepdims": 0}),
    ("reduce_sum", [f32(5, 70)], {"keepdims": 0}),                      # to a scalar: one thread
    ("reduce_max", [f32(3, 5, 7)], {"axes": (0, 2), "keepdims": 1}),
    ("reduce_mean", [f32(2, 3, 4, 5)], {"axes": (2, 3), "keepdims": 1}),
    ("argmax", [f32(4, 9)], {"axis": 1, "keepdims": 0}),
    ("cumsum", [f32(3, 10)], {"axis": 1}),
    ("softmax", [f32(4, 37)], {}),
    ("log_softmax", [f32(3, 11)], {}),
    ("conv2d", [f32(1, 8, 12, 12), f32(16, 8, 3, 3)], {"strides": (1, 1), "padding": (1, 1, 1, 1)}),
    ("conv2d", [f32(2, 3, 15, 15), f32(8, 3, 5, 5)], {"strides": (2, 2), "padding": (2, 2, 2, 2)}),
    ("conv2d", [f32(1, 16, 7, 7), f32(32, 16, 1, 1)], {"strides": (1, 1), "padding": (0, 0, 0, 0)}),
    ("conv2d", [f32(1, 8, 9, 9), f32(8, 2, 3, 3)], {"padding": (1, 1, 1, 1), "groups": 4}),
    ("depthwise_conv2d", [f32(1, 8, 10, 10), f32(8, 1, 3, 3)], {"strides": (2, 2), "padding": (1, 1, 1, 1)}),
    ("conv_transpose2d", [f32(1, 4, 5, 5), f32(4, 3, 3, 3)], {"strides": (2, 2), "padding": (1, 1, 1, 1)}),
    ("max_pool2d", [f32(1, 4, 11, 11)], {"kernel": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1)}),
    ("avg_pool2d", [f32(1, 3, 8, 8)], {"kernel": (2, 2), "strides": (2, 2)}),
    ("global_avg_pool", [f32(2, 6, 5, 5)], {}),
    ("batch_norm", [f32(1, 4, 3, 3), pos(4), f32(4), f32(4), pos(4)], {}),
    ("layer_norm", [f32(4, 24), pos(24), f32(24)], {}),
    ("dense", [f32(3, 40), f32(24, 40)], {}),
    ("matmul", [f32(33, 20), f32(20, 50)], {}),
    ("matmul", [f32(3, 16, 8), f32(3, 8, 12)], {}),
    ("matmul", [f32(6, 16).astype("float16"), f32(16, 5).astype("float16")], {}),     # half, no cl_khr_fp16 needed
    ("conv2d", [f32(1, 4, 6, 6).astype("float16"), f32(4, 4, 3, 3).astype("float16")], {"padding": (1, 1, 1, 1)}),
    ("transpose", [f32(2, 3, 4)], {"perm": (2, 0, 1)}),
    ("reshape", [f32(4, 6)], {"shape": (3, 8)}),
    ("concat", [f32(2, 3), f32(2, 5)], {"axis": 1}),
    ("slice", [f32(6, 8)], {"starts": (1, 2), "ends": (5, 8), "axes": (0, 1), "steps": (2, 3)}),
    ("pad", [f32(3, 4)], {"pads": (1, 0, 2, 1), "mode": "reflect"}),
    ("tile", [f32(2, 3)], {"repeats": (2, 3)}),
    ("resize", [f32(1, 2, 4, 4)], {"sizes": (1, 2, 8, 8), "scales": (1.0, 1.0, 2.0, 2.0), "mode": "nearest"}),
    ("gather", [f32(10, 4), np.array([[0, 9], [3, 3]], "int64")], {"axis": 0}),
    ("one_hot", [np.array([1, 0, 3], "int64")], {"depth": 5}),
    ("einsum", [f32(3, 4), f32(4, 5)], {"equation": "ij,jk->ik"}),
    ("topk", [f32(3, 12)], {"k": 4}),
    # long rows: one block per output, the threads combined by the shared-memory all-reduce
    ("reduce_sum", [f32(3, 1000)], {"axes": (1,), "keepdims": 0}),
    ("reduce_max", [f32(4, 30, 9)], {"axes": (1, 2), "keepdims": 1}),
    ("reduce_mean", [f32(5000)], {"keepdims": 0}),
    ("softmax", [f32(3, 700)], {}),
    ("layer_norm", [f32(2, 384), pos(384), f32(384)], {}),
    ("global_avg_pool", [f32(1, 5, 14, 14)], {}),
]


def _graph(op: str, inputs: list, attrs: dict):
    b = GraphBuilder(f"one_{op}")
    x = b.input("x", inputs[0].shape, inputs[0].dtype.name)
    consts = [b.const(a, name=f"c{k}") for k, a in enumerate(inputs[1:])]
    outs = b.add(op, [x, *consts], attrs)
    return b.finish(list(outs) if isinstance(outs, (list, tuple)) else [outs])


@pytest.mark.parametrize("op,inputs,attrs", CASES, ids=[f"{c[0]}{k}" for k, c in enumerate(CASES)])
def test_op_on_gpu_matches_numpy(gpu, op, inputs, attrs):
    opdef = registry.get(op)
    expected = opdef.run_reference(list(inputs), dict(attrs))
    model = tensorforge.compile(_graph(op, inputs, attrs), target=gpu)
    got = model(inputs[0])
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape
        if e.dtype == np.float16:
            np.testing.assert_allclose(g.astype("float32"), e.astype("float32"), rtol=1e-2, atol=2e-2)
        elif np.issubdtype(e.dtype, np.floating):
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)
        else:
            np.testing.assert_array_equal(g, e)


def test_long_softmax_rows_use_the_all_reduce(gpu):
    x = f32(2, 512)
    model = tensorforge.compile(_graph("softmax", [x], {}), target=gpu)
    assert SPELLING[gpu]["shared"] in model.source and SPELLING[gpu]["barrier"] in model.source
    np.testing.assert_allclose(model(x)[0], registry.get("softmax").run_reference([x], {})[0], rtol=1e-5, atol=1e-6)


def test_conv_bias_relu_is_one_kernel_on_gpu(gpu):
    """Fusion as on the CPU: conv2d + bias + relu is one kernel step, and right."""
    x, w, bias = f32(1, 8, 10, 10), f32(16, 8, 3, 3), f32(1, 16, 1, 1)
    b = GraphBuilder("cbr")
    v = b.input("x", x.shape, "float32")
    y = b.add1("conv2d", [v, b.const(w, "w")], {"padding": (1, 1, 1, 1)})
    y = b.add1("relu", [b.add1("add", [y, b.const(bias, "b")])])
    model = tensorforge.compile(b.finish([y]), target=gpu)
    kernels = [s for s in model.spec.steps if s["kind"] == "kernel"]
    assert len(kernels) == 1
    assert SPELLING[gpu]["shared"] in model.source and SPELLING[gpu]["barrier"] in model.source
    ref = registry.get("conv2d").run_reference([x, w], {"padding": (1, 1, 1, 1)})[0]
    np.testing.assert_allclose(model(x)[0], np.maximum(ref + bias, 0), rtol=1e-4, atol=1e-4)


def test_a_cached_kernel_reused_under_another_name_keeps_kernel_names_unique(opencl, tmp_path, monkeypatch):
    """The lowering cache hands a loop program lowered as group k1 to a later model's group k0;
    its kernels must be renamed with it, or they clash with that model's own k1 kernels."""
    monkeypatch.setenv("TENSORFORGE_CACHE_DIR", str(tmp_path))
    b = GraphBuilder("first")
    x, y = b.input("x", (4, 8), "float32"), b.input("y", (4, 8), "float32")
    tensorforge.compile(b.finish([b.add1("exp", [x]), b.add1("mul", [x, y])]), target="opencl")
    b = GraphBuilder("second")
    x, y = b.input("x", (4, 8), "float32"), b.input("y", (4, 8), "float32")
    z, w = b.input("z", (3, 5), "float32"), b.input("w", (3, 5), "float32")
    model = tensorforge.compile(b.finish([b.add1("mul", [x, y]), b.add1("mul", [z, w])]), target="opencl")
    a, c = f32(4, 8), f32(3, 5)
    got = model(a, a, c, c)
    np.testing.assert_allclose(got[0], a * a, rtol=1e-6)
    np.testing.assert_allclose(got[1], c * c, rtol=1e-6)
