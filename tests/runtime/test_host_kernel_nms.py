"""The non_max_suppression host kernel (ONNX NonMaxSuppression semantics) on hand-computed
cases: IoU suppression, both box encodings, corners in any order, score ties by index, the
strict score and IoU thresholds, per-class limits, batch/class order, degenerate boxes, errors;
then random cases against ONNX Runtime."""
from __future__ import annotations

import numpy as np
import pytest

from tensorforge.runtime.host_kernels import KERNELS, non_max_suppression

# Six unit-height boxes as [y1, x1, y2, x2]: 0, 1, 2 overlap pairwise with IoU 0.9 / 1.1 = 0.82
# (or 0.8 / 1.2 = 0.67 for 1 and 2), as do 3 and 4; box 5 overlaps nothing.
BOXES = np.array([[[0.0, 0.0, 1.0, 1.0], [0.0, 0.1, 1.0, 1.1], [0.0, -0.1, 1.0, 0.9],
                   [0.0, 10.0, 1.0, 11.0], [0.0, 10.1, 1.0, 11.1], [0.0, 100.0, 1.0, 101.0]]], np.float32)
SCORES = np.array([[[0.9, 0.75, 0.6, 0.95, 0.5, 0.3]]], np.float32)


def nms(boxes, scores, limit, iou, score=None, center=0):
    return non_max_suppression(boxes, scores, np.array([limit], np.int64), np.array([iou], np.float32),
                               None if score is None else np.array([score], np.float32), center)


def test_registered_as_a_host_kernel():
    assert KERNELS["non_max_suppression"] is non_max_suppression


def test_suppresses_overlapping_boxes_in_score_order():
    # by score: 3 (0.95) selected, 0 (0.9) selected, 1 and 2 overlap 0, 4 overlaps 3, 5 selected
    got = nms(BOXES, SCORES, 3, 0.5, 0.0)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, [[0, 0, 3], [0, 0, 0], [0, 0, 5]])
    # a limit of 2 stops after two selections
    np.testing.assert_array_equal(nms(BOXES, SCORES, 2, 0.5), [[0, 0, 3], [0, 0, 0]])


def test_center_point_encoding_and_flipped_corners_give_the_same_boxes():
    y1, x1, y2, x2 = (BOXES[0, :, i] for i in range(4))
    centers = np.stack([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1], axis=1)[None]
    np.testing.assert_array_equal(nms(centers, SCORES, 3, 0.5, 0.0, center=1), [[0, 0, 3], [0, 0, 0], [0, 0, 5]])
    flipped = BOXES[:, :, [2, 3, 0, 1]]           # the other two corners: [y2, x2, y1, x1]
    np.testing.assert_array_equal(nms(flipped, SCORES, 3, 0.5, 0.0), [[0, 0, 3], [0, 0, 0], [0, 0, 5]])


def test_no_suppression_at_threshold_one_keeps_score_order():
    np.testing.assert_array_equal(nms(BOXES, SCORES, 10, 1.0)[:, 2], [3, 0, 1, 2, 4, 5])


def test_equal_scores_are_taken_by_ascending_index():
    boxes = np.array([[[0, 0, 1, 1], [0, 5, 1, 6], [0, 10, 1, 11], [0, 15, 1, 16]]], np.float32)
    scores = np.array([[[0.5, 0.7, 0.5, 0.7]]], np.float32)
    np.testing.assert_array_equal(nms(boxes, scores, 4, 0.5)[:, 2], [1, 3, 0, 2])


def test_score_threshold_is_strict():
    np.testing.assert_array_equal(nms(BOXES, SCORES, 10, 0.5, 0.9), [[0, 0, 3]])       # 0.9 is not > 0.9
    np.testing.assert_array_equal(nms(BOXES, SCORES, 10, 0.5, 0.4)[:, 2], [3, 0])       # 0.3 filtered


def test_iou_threshold_is_strict():
    # [0, 0, 1, 1] and [0, 0, 1, 2]: intersection 1, union 2, IoU exactly 0.5
    boxes = np.array([[[0, 0, 1, 1], [0, 0, 1, 2]]], np.float32)
    scores = np.array([[[0.9, 0.8]]], np.float32)
    np.testing.assert_array_equal(nms(boxes, scores, 5, 0.5)[:, 2], [0, 1])      # 0.5 is not > 0.5
    np.testing.assert_array_equal(nms(boxes, scores, 5, 0.49)[:, 2], [0])


def test_touching_and_empty_boxes_never_suppress():
    # box 1 touches box 0 along an edge (zero overlap); box 2 has zero area inside box 0
    boxes = np.array([[[0, 0, 1, 1], [0, 1, 1, 2], [0.5, 0.5, 0.5, 0.5]]], np.float32)
    scores = np.array([[[0.9, 0.8, 0.7]]], np.float32)
    np.testing.assert_array_equal(nms(boxes, scores, 5, 0.0)[:, 2], [0, 1, 2])


def test_rows_are_ordered_by_batch_then_class_and_limited_per_class():
    boxes = np.concatenate([BOXES, BOXES[:, ::-1]])           # batch 1: the boxes in reverse order
    scores = np.concatenate([SCORES, SCORES]).repeat(2, axis=1)
    scores[:, 1] = scores[:, 1, ::-1]                          # class 1: the scores in reverse order
    got = nms(boxes, scores, 2, 0.5)
    # b0 c0: 3 (0.95), 0 (0.9).  b0 c1 scores [.3 .5 .95 .6 .75 .9]: 2, then 5 (apart from 2).
    # b1 box k is b0 box 5 - k.  b1 c0: 3 (= b0 box 2), 0 (= box 5).  b1 c1: 2 (= box 3), 5 (= box 0).
    np.testing.assert_array_equal(got, [[0, 0, 3], [0, 0, 0], [0, 1, 2], [0, 1, 5],
                                        [1, 0, 3], [1, 0, 0], [1, 1, 2], [1, 1, 5]])


def test_defaults_select_nothing():
    for limit in (None, np.zeros((0,), np.int64), np.array([0], np.int64), np.array([-3], np.int64)):
        got = non_max_suppression(BOXES, SCORES, limit)
        assert got.shape == (0, 3) and got.dtype == np.int64
    # iou_threshold defaults to 0: any positive overlap suppresses
    np.testing.assert_array_equal(non_max_suppression(BOXES, SCORES, np.array([9]))[:, 2], [3, 0, 5])


@pytest.mark.parametrize("args, message", [
    ((BOXES[0], SCORES, 3), "boxes must have shape"),
    ((BOXES, SCORES[:, :, :4], 3), "scores must have shape"),
    ((BOXES, SCORES, 3, 1.5), r"iou_threshold must be in \[0, 1\]"),
    ((BOXES, SCORES, np.array([1, 2])), "must hold one value"),
])
def test_bad_inputs_are_reported(args, message):
    with pytest.raises(ValueError, match=message):
        non_max_suppression(*args)
    with pytest.raises(ValueError, match="center_point_box must be 0 or 1"):
        non_max_suppression(BOXES, SCORES, 3, center_point_box=2)


@pytest.mark.parametrize("center", [0, 1])
def test_random_cases_match_onnxruntime(center):
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper
    rng = np.random.default_rng(center)
    node = helper.make_node("NonMaxSuppression", ["b", "s", "m", "i", "t"], ["y"], center_point_box=center)
    graph = helper.make_graph([node], "nms", [
        helper.make_tensor_value_info("b", TensorProto.FLOAT, None),
        helper.make_tensor_value_info("s", TensorProto.FLOAT, None),
        helper.make_tensor_value_info("m", TensorProto.INT64, None),
        helper.make_tensor_value_info("i", TensorProto.FLOAT, None),
        helper.make_tensor_value_info("t", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 8
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for _ in range(5):
        boxes = rng.uniform(0, 10, (2, 40, 4)).astype(np.float32)
        scores = rng.choice(np.linspace(0, 1, 11), (2, 3, 40)).astype(np.float32)   # many ties
        feeds = {"b": boxes, "s": scores, "m": np.array([7], np.int64),
                 "i": np.array([0.3], np.float32), "t": np.array([0.2], np.float32)}
        want = session.run(None, feeds)[0]
        np.testing.assert_array_equal(non_max_suppression(*feeds.values(), center_point_box=center), want)
