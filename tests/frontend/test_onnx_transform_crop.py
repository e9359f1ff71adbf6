"""ONNX CenterCropPad (crop, pad, both, odd differences, axes) and ReverseSequence (time-major
and batch-major, run-time lengths): the converted graph against ONNX Runtime and hand-written
expectations, one compiled model, errors."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
from onnx_transform_helpers import check_ort, i64, one_node, rand  # noqa: E402

import tensorforge  # noqa: E402
from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.ir import GraphError  # noqa: E402
from tensorforge.graph.reference import run_reference  # noqa: E402


@pytest.mark.parametrize("shape, axes", [
    ((3, 2, 5), None),         # crop odd, keep, ... every axis
    ((6, 9, 4), None),         # pad odd and even
    ((2, 8, 1), None),         # crop and pad together
    ((3, 7), (0, 2)),
    ((6, 1), (-1, 1)),
])
def test_center_crop_pad_against_onnxruntime(shape, axes):
    attrs = {"axes": list(axes)} if axes is not None else {}
    check_ort(*one_node("CenterCropPad", {"x": rand((4, 5, 4))}, {"shape": i64(*shape)}, attrs))


def test_center_crop_pad_hand_computed():
    x = np.arange(1, 6, dtype=np.float32)                     # [1 2 3 4 5]
    for want_len, want in [(2, [2, 3]), (3, [2, 3, 4]), (8, [0, 1, 2, 3, 4, 5, 0, 0]), (5, [1, 2, 3, 4, 5])]:
        model, _ = one_node("CenterCropPad", {"x": x}, {"shape": i64(want_len)})
        np.testing.assert_array_equal(run_reference(from_onnx(model), x)[0], want)


@pytest.mark.parametrize("time_axis, batch_axis", [(0, 1), (1, 0)])
def test_reverse_sequence_against_onnxruntime(time_axis, batch_axis):
    shape = (5, 4, 3) if time_axis == 0 else (4, 5, 3)
    lens = np.array([1, 5, 3, 0], np.int64)
    attrs = {"time_axis": time_axis, "batch_axis": batch_axis}
    check_ort(*one_node("ReverseSequence", {"x": rand(shape)}, {"lens": lens}, attrs))
    check_ort(*one_node("ReverseSequence", {"x": rand(shape, "int32"), "lens": lens}, attrs=attrs))  # run-time


def test_reverse_sequence_hand_computed_and_compiled():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)            # (time 4, batch 3)
    lens = np.array([4, 2, 1], np.int64)
    model, _ = one_node("ReverseSequence", {"x": x, "lens": lens}, attrs={"time_axis": 0, "batch_axis": 1})
    want = np.array([[9, 4, 2], [6, 1, 5], [3, 7, 8], [0, 10, 11]], np.float32)
    graph = from_onnx(model)
    np.testing.assert_array_equal(run_reference(graph, x, lens)[0], want)
    np.testing.assert_array_equal(tensorforge.compile(graph, target="c")(x, lens)[0], want)


def test_errors_are_reported():
    model, _ = one_node("CenterCropPad", {"x": rand((4, 5))}, {"shape": i64(2, 2, 2)})
    with pytest.raises(GraphError, match="one length per axis"):
        from_onnx(model)
    model, _ = one_node("ReverseSequence", {"x": rand((4, 3))}, {"lens": i64(1, 2)})
    with pytest.raises(GraphError, match="one length per batch entry"):
        from_onnx(model)
