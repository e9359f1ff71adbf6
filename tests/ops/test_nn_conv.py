"""conv{1,2,3}d and conv_transpose{1,2,3}d: the TE compute, compiled to C, against the NumPy
reference; the references against a direct loop; and errors for bad attributes."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from tensorforge.ops import get
from tensorforge.ops.registry import OpError, TensorType
from tensorforge.ops.testing import check_op


def rand(rng, shape, dtype="float32"):
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-3 if np.dtype(dtype).kind == "i" else 0, 4, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def naive_conv(x, w, strides, padding, dilations, groups):
    """Direct loop over every output element: the definition, for checking the reference."""
    rank = x.ndim - 2
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(padding[i], padding[rank + i]) for i in range(rank)])
    m, cg = w.shape[0], w.shape[1]
    out_sp = [(xp.shape[2 + i] - (w.shape[2 + i] - 1) * dilations[i] - 1) // strides[i] + 1 for i in range(rank)]
    out = np.zeros((x.shape[0], m, *out_sp))
    for n, co, *o in itertools.product(range(x.shape[0]), range(m), *[range(s) for s in out_sp]):
        g = co // (m // groups)
        for k in itertools.product(*[range(s) for s in w.shape[2:]]):
            pos = tuple(o[i] * strides[i] + k[i] * dilations[i] for i in range(rank))
            out[(n, co, *o)] += np.dot(xp[(n, slice(g * cg, (g + 1) * cg), *pos)], w[(co, slice(None), *k)])
    return out


CONV_CASES = [
    # (data shape, weight shape, strides, padding, dilations, groups)
    ((2, 3, 9), (4, 3, 3), (2,), (1, 2), (1,), 1),
    ((1, 4, 7), (4, 1, 2), (1,), (0, 0), (3,), 4),                       # depthwise 1-D, dilated
    ((1, 3, 7, 6), (5, 3, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((2, 4, 8, 7), (6, 2, 3, 2), (2, 1), (1, 0, 2, 1), (1, 2), 2),         # groups, asymmetric padding
    ((1, 6, 6, 6), (6, 1, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 6),         # depthwise
    ((1, 4, 5, 5), (8, 1, 3, 3), (1, 1), (0, 0, 0, 0), (2, 2), 4),         # depthwise with a multiplier
    ((1, 2, 5, 4, 6), (3, 2, 2, 3, 2), (1, 2, 2), (1, 0, 1, 0, 1, 1), (2, 1, 1), 1),
]


@pytest.mark.parametrize("xs, ws, strides, padding, dilations, groups", CONV_CASES)
def test_conv(xs, ws, strides, padding, dilations, groups):
    rng = np.random.default_rng(0)
    x, w = rand(rng, xs), rand(rng, ws)
    attrs = dict(strides=strides, padding=padding, dilations=dilations, groups=groups)
    got = check_op(f"conv{len(xs) - 2}d", [x, w], attrs, rtol=1e-4, atol=1e-4, interpreter=True)[0]
    np.testing.assert_allclose(got, naive_conv(x, w, strides, padding, dilations, groups), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["float64", "float16", "int32", "int8"])
def test_conv_dtypes(dtype):
    rng = np.random.default_rng(1)
    x, w = rand(rng, (1, 2, 5, 5), dtype), rand(rng, (3, 2, 2, 2), dtype)
    tol = 1e-3 if dtype == "float16" else 1e-6      # float16 sums in float32, as the reference does
    check_op("conv2d", [x, w], dict(padding=(1, 0, 0, 1)), rtol=tol, atol=tol)


def test_float16_conv_sums_in_float32():
    """A long float16 sum (a 64-tap conv1d over 32 channels) stays within an ulp of the float32
    sum; summed in float16 it drifts by several."""
    rng = np.random.default_rng(2)
    x, w = rand(rng, (1, 32, 80), "float16"), rand(rng, (4, 32, 64), "float16")
    check_op("conv1d", [x, w], {}, rtol=2e-3, atol=2e-3)


def test_conv_compute_stages():
    from tensorforge import te
    x, w = te.placeholder((1, 3, 8, 8), name="x"), te.placeholder((4, 3, 3, 3), name="w")
    out = get("conv2d").build_compute([x, w], dict(padding=(1, 1, 1, 1)))[0]
    assert out.op.tag == "conv2d" and out.op.name == "conv2d"
    assert [t.op.name for t in out.op.input_tensors()] == ["pad", "w"]
    unpadded = get("conv2d").build_compute([x, w], {})[0]
    assert [t.op.name for t in unpadded.op.input_tensors()] == ["x", "w"]


def test_conv_errors():
    conv = get("conv2d")
    x, w = TensorType((1, 4, 8, 8), "float32"), TensorType((6, 2, 3, 3), "float32")
    with pytest.raises(OpError, match="groups=3"):
        conv.infer_types([x, w], dict(groups=3))
    with pytest.raises(OpError, match="expects 2 input channels"):
        conv.infer_types([x, w], {})
    with pytest.raises(OpError, match="strides"):
        conv.infer_types([x, w], dict(groups=2, strides=(0, 1)))
    with pytest.raises(OpError, match="padding must hold 4"):
        conv.infer_types([x, w], dict(groups=2, padding=(1, 1)))
    with pytest.raises(OpError, match="does not fit"):
        conv.infer_types([TensorType((1, 4, 2, 2), "float32"), w], dict(groups=2))
    with pytest.raises(OpError, match="rank 4"):
        conv.infer_types([TensorType((1, 4, 8), "float32"), w], dict(groups=2))


def naive_conv_transpose(x, w, strides, padding, output_padding, dilations, groups):
    """Scatter every input element through the kernel, then crop: the definition."""
    rank = x.ndim - 2
    cg, mg = x.shape[1] // groups, w.shape[1]
    full = [(x.shape[2 + i] - 1) * strides[i] + (w.shape[2 + i] - 1) * dilations[i] + 1 for i in range(rank)]
    out_sp = [full[i] + output_padding[i] - padding[i] - padding[rank + i] for i in range(rank)]
    out = np.zeros((x.shape[0], mg * groups, *out_sp))
    for n, c, *i in itertools.product(range(x.shape[0]), range(x.shape[1]), *[range(s) for s in x.shape[2:]]):
        g = c // cg
        for m, *k in itertools.product(range(mg), *[range(s) for s in w.shape[2:]]):
            pos = [i[a] * strides[a] + k[a] * dilations[a] - padding[a] for a in range(rank)]
            if all(0 <= pos[a] < out_sp[a] for a in range(rank)):
                out[(n, g * mg + m, *pos)] += x[(n, c, *i)] * w[(c, m, *k)]
    return out


TRANSPOSE_CASES = [
    # (data, weight, strides, padding, output_padding, dilations, groups)
    ((2, 2, 4), (2, 3, 3), (2,), (0, 0), (1,), (1,), 1),
    ((1, 4, 3), (4, 1, 2), (3,), (1, -2), (0,), (2,), 2),                  # negative end padding grows
    ((1, 2, 3, 4), (2, 3, 3, 2), (2, 1), (1, 0, 0, 1), (1, 0), (1, 2), 1),
    ((1, 4, 3, 3), (4, 2, 2, 3), (1, 2), (0, 1, 1, 0), (0, 1), (2, 1), 2),
    ((1, 2, 2, 3, 2), (2, 2, 2, 2, 3), (2, 1, 2), (0, 0, 1, 1, 0, 0), (1, 0, 0), (1, 1, 1), 1),
]


@pytest.mark.parametrize("xs, ws, strides, padding, output_padding, dilations, groups", TRANSPOSE_CASES)
def test_conv_transpose(xs, ws, strides, padding, output_padding, dilations, groups):
    rng = np.random.default_rng(2)
    x, w = rand(rng, xs), rand(rng, ws)
    attrs = dict(strides=strides, padding=padding, output_padding=output_padding, dilations=dilations, groups=groups)
    got = check_op(f"conv_transpose{len(xs) - 2}d", [x, w], attrs, rtol=1e-4, atol=1e-4,
                   interpreter=True)[0]
    want = naive_conv_transpose(x, w, strides, padding, output_padding, dilations, groups)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_conv_transpose_dtypes_and_errors():
    rng = np.random.default_rng(3)
    check_op("conv_transpose2d", [rand(rng, (1, 2, 3, 3), "float64"), rand(rng, (2, 2, 2, 2), "float64")],
             dict(strides=(2, 2)))
    check_op("conv_transpose1d", [rand(rng, (1, 2, 4), "int32"), rand(rng, (2, 1, 3), "int32")], dict(strides=(2,)))
    op = get("conv_transpose2d")
    x, w = TensorType((1, 4, 3, 3), "float32"), TensorType((4, 2, 3, 3), "float32")
    with pytest.raises(OpError, match="groups=3"):
        op.infer_types([x, w], dict(groups=3))
    with pytest.raises(OpError, match="input channels first"):
        op.infer_types([x, TensorType((2, 4, 3, 3), "float32")], {})
    with pytest.raises(OpError, match="output_padding"):
        op.infer_types([x, w], dict(output_padding=(1,)))
    with pytest.raises(OpError, match="leaves no output"):
        op.infer_types([x, w], dict(padding=(3, 3, 3, 3)))


def test_half_conv_sums_in_float32_and_the_cpu_schedule_keeps_it_per_row():
    """float16 conv2d: a float32 reduction stage and its "_cast" rounding; complex.cpu computes the
    reduction per output row of the rounding (compute_at), as for any epilogue."""
    from tensorforge import te
    from tensorforge.ops.registry import get
    from tensorforge.ops.schedules import get_template
    from tensorforge.target import Target

    x = te.placeholder((1, 4, 10, 10), "float16", name="x")
    w = te.placeholder((8, 4, 3, 3), "float16", name="w")
    (out,) = get("conv2d").build_compute([x, w], {})
    (conv,) = out.op.input_tensors()
    assert out.dtype == "float16" and conv.dtype == "float32" and out.op.name == "conv2d_cast"
    s = te.create_schedule(out.op)
    get_template("complex.cpu")(s, [out], [out], Target.parse("c"), None)
    assert s[conv].attach_type == "scope" and s[conv].attach_stage is s[out]
