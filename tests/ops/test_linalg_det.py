"""det: hand-computed determinants, batches, float16 / float64, the executor's host kernel in a
compiled model (ONNX Det), errors."""
from __future__ import annotations

import numpy as np
import pytest

from tensorforge.ops import get
from tensorforge.ops.registry import OPAQUE, OpError, TensorType
from tensorforge.ops.testing import check_op


def test_hand_computed():
    assert get("det").pattern == OPAQUE
    x = np.array([[[1, 2], [3, 4]], [[2, 0], [0, 3]], [[1, 2], [2, 4]]], np.float32)
    np.testing.assert_allclose(check_op("det", [x])[0], [-2, 6, 0], atol=1e-6)
    three = np.array([[2, -3, 1], [2, 0, -1], [1, 4, 5]], np.float64)     # 2*4 + 3*11 + 1*8 = 49
    assert check_op("det", [three])[0].shape == ()
    np.testing.assert_allclose(check_op("det", [three])[0], 49.0)


def test_batches_and_dtypes():
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 4))
    got = check_op("det", [x.astype("float32")], rtol=1e-4)[0]
    np.testing.assert_allclose(got, np.linalg.det(x), rtol=1e-4, atol=1e-5)
    assert check_op("det", [x.astype("float16")], rtol=1e-2, atol=1e-2)[0].dtype == np.float16


def test_onnx_det_compiled():
    pytest.importorskip("onnx")
    from onnx import helper

    import tensorforge
    from tensorforge.frontend import from_onnx
    node = helper.make_node("Det", ["x"], ["y"])
    graph = helper.make_graph([node], "det", [helper.make_tensor_value_info("x", 1, (3, 2, 2))],
                              [helper.make_tensor_value_info("y", 1, (3,))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    x = np.array([[[1, 2], [3, 4]], [[2, 0], [0, 3]], [[0, 1], [1, 0]]], np.float32)
    got = tensorforge.compile(from_onnx(model), target="c")(x)[0]
    np.testing.assert_allclose(got, [-2, 6, -1], atol=1e-6)


@pytest.mark.parametrize("t, message", [(TensorType((2, 3), "float32"), "square"),
                                        (TensorType((3,), "float32"), "square"),
                                        (TensorType((2, 2), "int32"), "floating point")])
def test_errors(t, message):
    with pytest.raises(OpError, match=message):
        get("det").infer_types([t], {})
