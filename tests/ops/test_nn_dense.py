"""dense and matmul: the TE compute, compiled to C, against the NumPy reference (which is checked
against numpy.matmul), over shapes that exercise broadcasting, 1-D operands and transposes."""
from __future__ import annotations

import numpy as np
import pytest

from tensorforge.ops import get
from tensorforge.ops.registry import OpError, TensorType
from tensorforge.ops.testing import check_op


def rand(rng, shape, dtype="float32"):
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0 if np.dtype(dtype).kind == "u" else -50, 50, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8"])
def test_dense(dtype):
    rng = np.random.default_rng(0)
    x, w = rand(rng, (5, 7), dtype), rand(rng, (3, 7), dtype)
    got = check_op("dense", [x, w], rtol=1e-5)[0]
    np.testing.assert_allclose(got, (x @ w.T).astype(dtype), rtol=1e-5)


MATMUL_CASES = [
    # (a shape, b shape, transpose_a, transpose_b)
    ((4, 6), (6, 5), False, False),
    ((6,), (6,), False, False),                  # 1-D . 1-D -> scalar
    ((6,), (2, 6, 3), False, False),             # 1-D row vector against a batch
    ((2, 3, 4, 6), (6,), False, False),          # batch times a column vector
    ((2, 1, 4, 6), (3, 6, 5), False, False),     # batch axes broadcast both ways
    ((3, 6, 4), (6, 5), True, False),
    ((4, 6), (2, 5, 6), False, True),
    ((6, 4), (5, 6), True, True),
]


@pytest.mark.parametrize("a_shape, b_shape, ta, tb", MATMUL_CASES)
def test_matmul(a_shape, b_shape, ta, tb):
    rng = np.random.default_rng(1)
    a, b = rand(rng, a_shape), rand(rng, b_shape)
    got = check_op("matmul", [a, b], dict(transpose_a=ta, transpose_b=tb), rtol=1e-4, atol=1e-5,
                   interpreter=True)[0]
    a2 = np.swapaxes(a, -1, -2) if ta else a
    b2 = np.swapaxes(b, -1, -2) if tb else b
    np.testing.assert_allclose(got, np.matmul(a2, b2), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", ["int32", "uint64", "float16"])
def test_matmul_dtypes(dtype):
    rng = np.random.default_rng(2)
    a, b = rand(rng, (2, 3, 4), dtype), rand(rng, (4, 5), dtype)
    tol = 1e-2 if dtype == "float16" else 0
    check_op("matmul", [a, b], rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["matmul", "dense"])
def test_16bit_products_accumulate_in_float32(name, dtype):
    """float16 and bfloat16 products are summed in float32 and rounded once, bit for bit what
    numpy.matmul (and so ONNX's reference MatMul) gives; a bfloat16 accumulator drifts by several
    steps over 300 terms."""
    if dtype == "bfloat16":
        dtype = pytest.importorskip("ml_dtypes").bfloat16
    rng = np.random.default_rng(3)
    a, b = rand(rng, (3, 300)).astype(dtype), rand(rng, (300, 4)).astype(dtype)
    operands = [a, b] if name == "matmul" else [a, np.ascontiguousarray(b.T)]
    got = check_op(name, operands, rtol=0, atol=0)[0]
    assert got.dtype == np.dtype(dtype)
    want = np.matmul(a, b).astype(dtype)
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
    np.testing.assert_array_equal(want.astype(np.float32),
                                  (a.astype(np.float32) @ b.astype(np.float32)).astype(dtype).astype(np.float32))


def test_matmul_stage_is_tagged():
    from tensorforge import te
    out = get("matmul").build_compute([te.placeholder((2, 3), name="a"), te.placeholder((3, 4), name="b")], {})[0]
    assert out.op.tag == "matmul" and len(out.op.reduce_axis) == 1


def test_errors():
    f32 = "float32"
    with pytest.raises(OpError, match="disagree on the reduced axis"):
        get("dense").infer_types([TensorType((2, 3), f32), TensorType((4, 5), f32)], {})
    with pytest.raises(OpError, match="must be 2-D"):
        get("dense").infer_types([TensorType((2, 3, 4), f32), TensorType((4, 4), f32)], {})
    with pytest.raises(OpError, match="reduced axes differ"):
        get("matmul").infer_types([TensorType((2, 3), f32), TensorType((4, 5), f32)], {})
    with pytest.raises(OpError, match="do not broadcast"):
        get("matmul").infer_types([TensorType((2, 2, 3), f32), TensorType((3, 3, 4), f32)], {})
    with pytest.raises(OpError, match="dtypes differ"):
        get("matmul").infer_types([TensorType((2, 3), f32), TensorType((3, 4), "float64")], {})
    with pytest.raises(OpError, match="scalar"):
        get("matmul").infer_types([TensorType((), f32), TensorType((3,), f32)], {})
