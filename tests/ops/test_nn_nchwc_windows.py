"""The window ops in the blocked layout NCHW[b]c (depthwise_conv2d_nchwc, max/avg_pool2d_nchwc,
global_avg/max_pool_nchwc): each against its NumPy reference (check_op, plain schedule), and
compiled with its CPU template (window2d_nchwc.cpu, global_pool_nchwc.cpu) inside a graph with a
blocked bias + relu epilogue, against the NCHW op it replaces."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tensorforge
from tensorforge.autotune import extract_tasks
from tensorforge.autotune.records import Record, RecordWriter
from tensorforge.graph.builder import GraphBuilder
from tensorforge.ops.nn_conv_nchwc import pack_weight, to_nchw, to_nchwc
from tensorforge.ops.registry import get
from tensorforge.ops.testing import check_op


def _rng(*key):
    return np.random.default_rng(abs(hash(key)) % (2 ** 32))


def _blocked_input(c, h, w, block, key):
    x = _rng("x", *key).standard_normal((1, c, h, w)).astype("float32")
    return x, to_nchwc(x, block)


# -- references --------------------------------------------------------------------------------
def test_depthwise_op_against_reference():
    x, xb = _blocked_input(32, 9, 8, 16, ("dw",))
    w = _rng("dww").standard_normal((32, 1, 3, 3)).astype("float32")
    attrs = {"strides": (2, 1), "padding": (1, 0, 1, 2)}
    (got,) = check_op("depthwise_conv2d_nchwc", [xb, pack_weight(w, 16)], attrs, rtol=1e-4, atol=1e-4)
    want = get("conv2d").run_reference([x, w], dict(attrs, groups=32))[0]
    np.testing.assert_allclose(to_nchw(got), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kind,attrs", [
    ("max", {"kernel": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1)}),
    ("max", {"kernel": (2, 3), "strides": (2, 2), "padding": (0, 1, 0, 1), "ceil_mode": True}),
    ("avg", {"kernel": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1), "ceil_mode": True}),
    ("avg", {"kernel": (3, 2), "strides": (1, 2), "padding": (1, 1, 1, 0), "count_include_pad": True}),
])
def test_window_pools_against_reference(kind, attrs):
    x, xb = _blocked_input(32, 9, 11, 16, (kind, tuple(attrs)))
    (got,) = check_op(f"{kind}_pool2d_nchwc", [xb], attrs, rtol=1e-5, atol=1e-5)
    want = get(f"{kind}_pool2d").run_reference([x], attrs)[0]
    np.testing.assert_allclose(to_nchw(got), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["avg", "max"])
def test_global_pools_against_reference(kind):
    x, xb = _blocked_input(48, 7, 5, 16, ("global", kind))
    (got,) = check_op(f"global_{kind}_pool_nchwc", [xb], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(to_nchw(got), get(f"global_{kind}_pool").run_reference([x], {})[0],
                               rtol=1e-5, atol=1e-5)


def test_shape_errors_name_the_op():
    from tensorforge.ops.registry import OpError, TensorType
    with pytest.raises(OpError, match="depthwise_conv2d_nchwc"):
        get("depthwise_conv2d_nchwc").infer_types(
            [TensorType((1, 2, 5, 5, 16), "float32"), TensorType((2, 1, 3, 3, 8), "float32")], {})
    with pytest.raises(OpError, match="max_pool2d_nchwc"):
        get("max_pool2d_nchwc").infer_types([TensorType((1, 32, 5, 5), "float32")], {"kernel": (2, 2)})


# -- compiled with the templates ------------------------------------------------------------------
def _compile_blocked(c, h, w, block, op, attrs, weight=None, config=None, tmp_path=None):
    """x (blocked) -> op -> + bias -> relu, compiled (with `config` for the op's task when given:
    a record in tmp_path); returns (model, blocked x, its NCHW twin, the bias in NCHW)."""
    x, xb = _blocked_input(c, h, w, block, (op, c, h, w, tuple(attrs.items())))
    b = GraphBuilder("blocked")
    v = b.input("x", xb.shape, "float32")
    args = [v] + ([b.const(weight, "w")] if weight is not None else [])
    y = b.add1(op, args, attrs)
    bias = _rng("bias", c).standard_normal((1, c // block, 1, 1, block)).astype("float32")
    y = b.add1("relu", [b.add1("add", [y, b.const(bias, "bias")])])
    graph = b.finish([y])
    records = None
    if config is not None:
        (task,) = [t for t in extract_tasks(graph, target="c") if t.op == op]
        records = str(tmp_path / "tune.jsonl")
        full = task.config_space.from_json({**task.config_space.default_config().to_json(), **config})
        with RecordWriter(records) as writer:
            writer.write(Record(task=task, config=full.to_json(), costs=(1e-6,)))
    model = tensorforge.compile(graph, target="c", records=records)
    if config is not None:
        assert model.info["tuned_groups"] == 1
    return model, xb, x, to_nchw(bias)


@pytest.mark.parametrize("c,h,w,block,stride,pad,dilation", [
    (32, 14, 14, 32, 1, 1, 1),      # a MobileNet layer: one block of two vectors
    (32, 13, 10, 16, 2, 1, 1),      # stride 2, odd rows
    (16, 9, 9, 16, 1, 2, 2),        # dilation 2
    (32, 70, 70, 32, 1, 1, 1),      # a plane above PLANE_BYTES
    (16, 6, 7, 16, 1, 0, 1),        # no padding stage
])
def test_compiled_depthwise(c, h, w, block, stride, pad, dilation):
    wt = _rng("w", c).standard_normal((c, 1, 3, 3)).astype("float32")
    attrs = {"strides": (stride, stride), "padding": (pad,) * 4, "dilations": (dilation, dilation)}
    model, xb, x, bias = _compile_blocked(c, h, w, block, "depthwise_conv2d_nchwc", attrs, pack_weight(wt, block))
    want = np.maximum(get("conv2d").run_reference([x, wt], dict(attrs, groups=c))[0] + bias, 0)
    np.testing.assert_allclose(to_nchw(model(xb)[0]), want, rtol=1e-4, atol=1e-4)
    _check_vector_writes(model.source)
    # by default no padded copy is built: the taps read the input in place
    assert not re.search(r"^\s*(\*\(tf_float32x\d+\*\)\()?pad\b", model.source, re.M)


def _check_vector_writes(source):
    """The padded copy and the taps move whole vectors of the channel block: every statement
    that writes the padded plane or the accumulator is a vector statement."""
    writes = [m.group(1) for m in re.finditer(r"^\s*(\*\(tf_float32x\d+\*\)\()?(pad|depthwise_conv2d_nchwc)\b",
                                              source, re.M)]
    assert writes and all(writes)


@pytest.mark.parametrize("c,h,w,block,stride", [
    (32, 70, 70, 32, 1),      # a plane above PLANE_BYTES
    (16, 13, 10, 16, 2),      # stride 2, odd rows, a small plane
])
@pytest.mark.parametrize("pad_rows,parallel", [("inline", "planes"), ("inline", "rows"), (0, "planes"),
                                               (0, "rows"), (4, "planes"), (2, "rows")])
def test_compiled_depthwise_pad_choices(c, h, w, block, stride, pad_rows, parallel, tmp_path):
    """Every place the padded input can be built (nowhere, per plane, per tile of rows), with the
    fused bias + relu epilogue."""
    wt = _rng("w", c).standard_normal((c, 1, 3, 3)).astype("float32")
    attrs = {"strides": (stride, stride), "padding": (1, 1, 1, 1)}
    config = {"pad_rows": pad_rows, "parallel": parallel}
    model, xb, x, bias = _compile_blocked(c, h, w, block, "depthwise_conv2d_nchwc", attrs, pack_weight(wt, block),
                                          config=config, tmp_path=tmp_path)
    want = np.maximum(get("conv2d").run_reference([x, wt], dict(attrs, groups=c))[0] + bias, 0)
    np.testing.assert_allclose(to_nchw(model(xb)[0]), want, rtol=1e-4, atol=1e-4)
    _check_vector_writes(model.source)
    copies = re.search(r"^\s*\*\(tf_float32x\d+\*\)\(pad\b", model.source, re.M)
    assert bool(copies) == (pad_rows != "inline")


@pytest.mark.parametrize("kind,attrs", [
    ("max", {"kernel": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1)}),      # ResNet's stem pool
    ("avg", {"kernel": (3, 3), "strides": (1, 1), "padding": (1, 1, 1, 1), "ceil_mode": False}),
])
def test_compiled_window_pools(kind, attrs):
    model, xb, x, bias = _compile_blocked(32, 15, 12, 16, f"{kind}_pool2d_nchwc", attrs)
    want = np.maximum(get(f"{kind}_pool2d").run_reference([x], attrs)[0] + bias, 0)
    np.testing.assert_allclose(to_nchw(model(xb)[0]), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["avg", "max"])
def test_compiled_global_pools(kind):
    model, xb, x, bias = _compile_blocked(64, 7, 7, 32, f"global_{kind}_pool_nchwc", {})
    want = np.maximum(get(f"global_{kind}_pool").run_reference([x], {})[0] + bias, 0)
    np.testing.assert_allclose(to_nchw(model(xb)[0]), want, rtol=1e-5, atol=1e-5)
