"""col2im: compiled to C against the NumPy reference for 1-D to 3-D images with strides, pads
and dilations; hand-computed overlap counts; the inverse of non-overlapping blocks; the reference
against ONNX Runtime; errors."""
from __future__ import annotations

import numpy as np
import pytest

from tensorforge.ops import get
from tensorforge.ops.registry import OpError, TensorType
from tensorforge.ops.testing import check_op

RNG = np.random.default_rng(4)


def _blocks(image, block, strides, pads, dilations) -> int:
    r = len(image)
    return int(np.prod([(image[i] + pads[i] + pads[r + i] - dilations[i] * (block[i] - 1) - 1) // strides[i] + 1
                        for i in range(r)]))


@pytest.mark.parametrize("image, block, strides, pads, dilations", [
    ((7,), (3,), (2,), (1, 0), (1,)),
    ((5, 5), (2, 2), (1, 1), (0, 0, 0, 0), (1, 1)),
    ((6, 5), (2, 3), (2, 1), (1, 0, 1, 2), (1, 2)),
    ((4, 3, 5), (2, 1, 2), (1, 2, 2), (0, 1, 0, 1, 0, 1), (2, 1, 1)),
])
def test_compiled_matches_reference(image, block, strides, pads, dilations):
    x = RNG.standard_normal((2, 3 * int(np.prod(block)), _blocks(image, block, strides, pads, dilations)))
    attrs = {"image_shape": image, "block_shape": block, "strides": strides, "pads": pads, "dilations": dilations}
    check_op("col2im", [x.astype("float32")], attrs)
    check_op("col2im", [RNG.integers(-5, 5, x.shape).astype("int32")], attrs)


def test_overlap_counts_by_hand():
    # 1-D image of 5, blocks of 3 at stride 1: 3 blocks cover pixels [0-2], [1-3], [2-4]
    got = check_op("col2im", [np.ones((1, 3, 3), np.float32)], {"image_shape": (5,), "block_shape": (3,)})[0]
    np.testing.assert_array_equal(got.reshape(-1), [1, 2, 3, 2, 1])
    # pad 1 on each side: 5 blocks start at -1..3; the end pixels are covered twice, the rest 3 times
    got = check_op("col2im", [np.ones((1, 3, 5), np.float32)], {"image_shape": (5,), "block_shape": (3,),
                                                               "pads": (1, 1)})[0]
    np.testing.assert_array_equal(got.reshape(-1), [2, 3, 3, 3, 2])


def test_inverts_non_overlapping_blocks():
    img = RNG.standard_normal((1, 2, 4, 6)).astype(np.float32)
    blocks = img.reshape(1, 2, 2, 2, 3, 2).transpose(0, 1, 3, 5, 2, 4).reshape(1, 2 * 2 * 2, 2 * 3)
    got = check_op("col2im", [blocks], {"image_shape": (4, 6), "block_shape": (2, 2), "strides": (2, 2)})[0]
    np.testing.assert_array_equal(got, img)


def test_reference_against_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    from onnx import helper, numpy_helper
    image, block, strides, pads, dilations = (6, 5), (2, 3), (2, 1), (1, 0, 1, 2), (1, 2)
    x = RNG.standard_normal((1, 2 * 6, _blocks(image, block, strides, pads, dilations))).astype(np.float32)
    node = helper.make_node("Col2Im", ["x", "i", "b"], ["y"], strides=strides, pads=pads, dilations=dilations)
    graph = helper.make_graph([node], "col2im", [helper.make_tensor_value_info("x", 1, x.shape)],
                              [helper.make_tensor_value_info("y", 1, None)],
                              [numpy_helper.from_array(np.array(image, np.int64), "i"),
                               numpy_helper.from_array(np.array(block, np.int64), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = get("col2im").run_reference([x], {"image_shape": image, "block_shape": block, "strides": strides,
                                            "pads": pads, "dilations": dilations})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape, attrs, message", [
    ((1, 5, 9), {"image_shape": (5, 5), "block_shape": (2, 2)}, "must be"),
    ((1, 4, 16), {"image_shape": (5, 5), "block_shape": (2,)}, "same length"),
    ((1, 4, 16), {"image_shape": (5, 5), "block_shape": (2, 2), "strides": (0, 1)}, ">= 1"),
    ((1, 4, 1), {"image_shape": (1, 1), "block_shape": (2, 2)}, "does not fit"),
])
def test_errors(shape, attrs, message):
    with pytest.raises(OpError, match=message):
        get("col2im").infer_types([TensorType(shape, "float32")], attrs)
