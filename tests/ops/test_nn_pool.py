"""Window and global pooling: the TE compute, compiled to C, against the NumPy reference; a few
hand-computed windows (ceil_mode, count_include_pad); errors for bad attributes."""
from __future__ import annotations

import numpy as np
import pytest

from tensorforge.ops import get
from tensorforge.ops.nn_window import resolve_auto_pad, window_out_size
from tensorforge.ops.registry import OpError, TensorType
from tensorforge.ops.testing import check_op

POOL_CASES = [
    # (shape, kernel, strides, padding, dilations, ceil_mode)
    ((2, 3, 9), (3,), (2,), (1, 1), (1,), False),
    ((1, 2, 7, 6), (3, 2), (2, 2), (1, 0, 1, 1), (1, 1), True),
    ((1, 2, 8, 8), (2, 3), (1, 2), (0, 1, 0, 1), (2, 1), False),
    ((1, 1, 5, 6, 5), (2, 2, 3), (2, 1, 2), (0, 1, 1, 1, 0, 1), (1, 1, 1), True),
]


@pytest.mark.parametrize("kind", ["max", "avg", "lp"])
@pytest.mark.parametrize("shape, kernel, strides, padding, dilations, ceil_mode", POOL_CASES)
def test_pool(kind, shape, kernel, strides, padding, dilations, ceil_mode):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype("float32")
    attrs = dict(kernel=kernel, strides=strides, padding=padding, dilations=dilations, ceil_mode=ceil_mode)
    name = f"{kind}_pool{len(shape) - 2}d"
    check_op(name, [x], attrs, rtol=1e-5, atol=1e-5, interpreter=True)
    if kind == "avg":
        check_op(name, [x], dict(attrs, count_include_pad=True), rtol=1e-5, atol=1e-5)
    if kind == "lp":
        check_op(name, [x], dict(attrs, p=3), rtol=1e-4, atol=1e-5)
        check_op(name, [x], dict(attrs, p=1), rtol=1e-5, atol=1e-5)


def test_pool_hand_computed():
    x = np.arange(1, 6, dtype="float32").reshape(1, 1, 5)          # 1 2 3 4 5
    attrs = dict(kernel=(2,), strides=(2,), padding=(1, 0), ceil_mode=True)
    # windows over [pad, 1], [2, 3], [4, 5]; ceil_mode adds none past the end here
    avg = check_op("avg_pool1d", [x], attrs)[0]
    np.testing.assert_allclose(avg[0, 0], [1.0, 2.5, 4.5])
    avg_pad = check_op("avg_pool1d", [x], dict(attrs, count_include_pad=True))[0]
    np.testing.assert_allclose(avg_pad[0, 0], [0.5, 2.5, 4.5])
    # ceil_mode keeps a last partial window [5] that count_include_pad does not widen
    tail = check_op("avg_pool1d", [x], dict(kernel=(2,), strides=(2,), ceil_mode=True, count_include_pad=True))[0]
    np.testing.assert_allclose(tail[0, 0], [1.5, 3.5, 5.0])
    mx = check_op("max_pool1d", [-x], dict(kernel=(3,), strides=(1,), padding=(1, 1)))[0]
    np.testing.assert_allclose(mx[0, 0], [-1, -1, -2, -3, -4])       # padding never wins


@pytest.mark.parametrize("dtype", ["uint8", "int32", "float16", "float64"])
def test_max_pool_dtypes(dtype):
    rng = np.random.default_rng(1)
    x = rng.integers(0, 200, (1, 2, 5, 5)).astype(dtype)
    check_op("max_pool2d", [x], dict(kernel=(2, 2), strides=(2, 2), padding=(1, 1, 0, 0)))


@pytest.mark.parametrize("kind", ["max", "avg", "lp"])
@pytest.mark.parametrize("shape", [(2, 3, 7), (1, 2, 4, 5), (1, 2, 2, 3, 3)])
def test_global_pool(kind, shape):
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype("float32")
    out = check_op(f"global_{kind}_pool", [x], dict(p=3) if kind == "lp" else {}, rtol=1e-4, atol=1e-5)[0]
    assert out.shape == shape[:2] + (1,) * (len(shape) - 2)


def test_window_arithmetic():
    assert window_out_size(5, 2, 2, 1, 0, 0) == 2
    assert window_out_size(5, 2, 2, 1, 0, 0, ceil_mode=True) == 3
    # the last window would start in the end padding: ceil_mode drops it
    assert window_out_size(4, 2, 2, 1, 0, 1, ceil_mode=True) == 2
    assert resolve_auto_pad("SAME_UPPER", (5,), (4,), (2,), (1,), None) == (1, 2)
    assert resolve_auto_pad("SAME_LOWER", (5,), (4,), (2,), (1,), None) == (2, 1)
    assert resolve_auto_pad("VALID", (5, 5), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)) == (0, 0, 0, 0)
    assert resolve_auto_pad("NOTSET", (5,), (3,), (1,), (1,), (1, 2)) == (1, 2)
    with pytest.raises(OpError, match="auto_pad"):
        resolve_auto_pad("SAME", (5,), (3,), (1,), (1,), None)


def test_pool_errors():
    x = TensorType((1, 2, 5, 5), "float32")
    with pytest.raises(OpError, match="kernel must be 2"):
        get("max_pool2d").infer_types([x], dict(kernel=(2,)))
    with pytest.raises(OpError, match="does not fit"):
        get("max_pool2d").infer_types([x], dict(kernel=(6, 6)))
    with pytest.raises(OpError, match="float tensor"):
        get("avg_pool2d").infer_types([TensorType((1, 2, 5, 5), "int32")], dict(kernel=(2, 2)))
    with pytest.raises(OpError, match="p must be positive"):
        get("lp_pool2d").infer_types([x], dict(kernel=(2, 2), p=0))
    with pytest.raises(OpError, match="rank 4"):
        get("max_pool2d").infer_types([TensorType((2, 5), "float32")], dict(kernel=(2, 2)))
    with pytest.raises(OpError, match=r"\(N, C, D1"):
        get("global_avg_pool").infer_types([TensorType((2, 5), "float32")], {})
