"""Normalizations: batch_norm, instance_norm, layer_norm, mean_variance_normalization,
lp_normalization, lrn: the TE compute, compiled to C, against the NumPy reference (checked
against the textbook formulas here); errors for bad attributes and parameter shapes."""
from __future__ import annotations

import numpy as np
import pytest

from tensorforge.ops import get
from tensorforge.ops.registry import OpError, TensorType
from tensorforge.ops.testing import check_op


def rand(rng, shape, dtype="float32"):
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("shape, axis", [((2, 3, 4, 5), 1), ((4, 3), 1), ((2, 5, 3), -1)])
def test_batch_norm(shape, axis):
    rng = np.random.default_rng(0)
    c = shape[axis]
    x, g, b, m, v = rand(rng, shape), rand(rng, c), rand(rng, c), rand(rng, c), np.abs(rand(rng, c)) + 0.1
    got = check_op("batch_norm", [x, g, b, m, v], dict(epsilon=1e-3, axis=axis))[0]
    view = [1] * len(shape)
    view[axis] = c
    r = [p.reshape(view) for p in (g, b, m, v)]
    np.testing.assert_allclose(got, r[0] * (x - r[2]) / np.sqrt(r[3] + 1e-3) + r[1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(2, 3, 5), (1, 2, 3, 4), (1, 2, 2, 3, 2)])
def test_instance_norm(shape):
    rng = np.random.default_rng(1)
    x, s, b = rand(rng, shape), rand(rng, shape[1]), rand(rng, shape[1])
    got = check_op("instance_norm", [x, s, b], dict(epsilon=1e-4), rtol=1e-4, atol=1e-5, interpreter=True)[0]
    axes = tuple(range(2, len(shape)))
    view = (-1,) + (1,) * len(axes)
    mean, var = x.mean(axis=axes, keepdims=True), x.var(axis=axes, keepdims=True)
    want = s.reshape(view) * (x - mean) / np.sqrt(var + 1e-4) + b.reshape(view)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("axis, scale_shape, bias", [(-1, (5,), True), (1, (3, 4, 5), False), (2, (1, 5), True),
                                                     (0, (2, 3, 4, 5), True)])
def test_layer_norm(axis, scale_shape, bias):
    rng = np.random.default_rng(2)
    x = rand(rng, (2, 3, 4, 5))
    scale = rand(rng, scale_shape)
    b = rand(rng, scale_shape) if bias else None
    y, mean, inv = check_op("layer_norm", [x, scale, b], dict(axis=axis, epsilon=1e-3, stash=True),
                            rtol=1e-4, atol=1e-5)
    axes = tuple(range(axis % 4, 4))
    want_mean = x.mean(axis=axes, keepdims=True)
    want_inv = 1 / np.sqrt(x.var(axis=axes, keepdims=True) + 1e-3)
    np.testing.assert_allclose(mean, want_mean, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(inv, want_inv, rtol=1e-4)
    np.testing.assert_allclose(y, (x - want_mean) * want_inv * scale + (b if bias else 0), rtol=1e-4, atol=1e-5)
    (only,) = check_op("layer_norm", [x, scale, b], dict(axis=axis, epsilon=1e-3), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(only, y, rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_norm_dtypes(dtype):
    rng = np.random.default_rng(3)
    x, s, b = rand(rng, (2, 3, 8), dtype), rand(rng, 3, dtype), rand(rng, 3, dtype)
    tol = 1e-2 if dtype == "float16" else 1e-10
    check_op("instance_norm", [x, s, b], {}, rtol=tol, atol=tol)
    outs = check_op("layer_norm", [x, rand(rng, 8, dtype), None], dict(stash=True), rtol=tol, atol=tol)
    assert outs[0].dtype == np.dtype(dtype) and outs[1].dtype == np.float32   # stash type float32
    check_op("batch_norm", [x, s, b, b, np.abs(s)], {}, rtol=tol, atol=tol)


@pytest.mark.parametrize("axes", [(0, 2, 3), (1,), (2, 3)])
def test_mean_variance_normalization(axes):
    rng = np.random.default_rng(4)
    x = rand(rng, (2, 3, 4, 5))
    got = check_op("mean_variance_normalization", [x], dict(axes=axes), rtol=1e-4, atol=1e-5)[0]
    mean = x.mean(axis=axes, keepdims=True)
    np.testing.assert_allclose(got, (x - mean) / (x.std(axis=axes, keepdims=True) + 1e-9), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("axis, p", [(-1, 2), (0, 1), (1, 2)])
def test_lp_normalization(axis, p):
    rng = np.random.default_rng(5)
    x = rand(rng, (3, 4, 2))
    x[0, :, 0] = 0                                  # a zero norm gives zeros, not NaN
    got = check_op("lp_normalization", [x], dict(axis=axis, p=p))[0]
    norm = np.linalg.norm(x, ord=p, axis=axis, keepdims=True)
    with np.errstate(invalid="ignore"):
        want = np.where(norm == 0, 0, x / norm)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_lrn(size):
    rng = np.random.default_rng(6)
    x = rand(rng, (2, 6, 3, 2))
    attrs = dict(size=size, alpha=1e-2, beta=0.75, bias=2.0)
    got = check_op("lrn", [x], attrs, rtol=1e-5, atol=1e-6, interpreter=True)[0]
    before, after = (size - 1) // 2, size // 2
    want = np.empty_like(x)
    for c in range(6):
        ss = (x[:, max(0, c - before):min(6, c + after + 1)] ** 2).sum(axis=1)
        want[:, c] = x[:, c] / (2.0 + 1e-2 / size * ss) ** 0.75
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_errors():
    f32 = "float32"
    x = TensorType((2, 3, 4), f32)
    c3, c4 = TensorType((3,), f32), TensorType((4,), f32)
    with pytest.raises(OpError, match=r"mean must have shape \(3,\)"):
        get("batch_norm").infer_types([x, c3, c3, c4, c3], {})
    with pytest.raises(OpError, match="float tensor"):
        get("batch_norm").infer_types([TensorType((2, 3), "int32")] + [TensorType((3,), "int32")] * 4, {})
    with pytest.raises(OpError, match="scale must have shape"):
        get("instance_norm").infer_types([x, c4, c3], {})
    with pytest.raises(OpError, match="does not broadcast to the normalized shape"):
        get("layer_norm").infer_types([x, c3, None], dict(axis=-1))
    with pytest.raises(OpError, match="axis 3 is out of range"):
        get("layer_norm").infer_types([x, c4, None], dict(axis=3))
    with pytest.raises(OpError, match="p must be 1 or 2"):
        get("lp_normalization").infer_types([x], dict(p=3))
    with pytest.raises(OpError, match="size must be positive"):
        get("lrn").infer_types([x], dict(size=0))
