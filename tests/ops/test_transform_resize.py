"""resize: every mode / coordinate transformation / nearest rounding mode compiled to C against
the NumPy reference (which the ONNX conformance suite checks), the output-size resolution from
scales or sizes (keep_aspect_ratio_policy, axes), hand-checked values, and errors."""
from __future__ import annotations

import numpy as np
import pytest

from tensorforge.ops import get
from tensorforge.ops.registry import OpError, TensorType
from tensorforge.ops.testing import check_op
from tensorforge.ops.transform_resize import resize_output

X = np.random.default_rng(2).standard_normal((1, 2, 4, 5)).astype("float32")
CTMS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
        "tf_crop_and_resize"]


def attrs_for(scales, **extra):
    sizes, full = resize_output(X.shape, scales=scales)
    a = dict(sizes=sizes, scales=full, **extra)
    if extra.get("coordinate_transformation_mode") == "tf_crop_and_resize":
        a.update(roi=(0, 0, 0.1, 0.2, 1, 1, 0.9, 1.1), extrapolation_value=7.0)
    return a


@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_modes(mode, ctm):
    for scales in ((1, 1, 2.0, 1.5), (1, 1, 0.6, 0.5)):
        check_op("resize", [X], attrs_for(scales, mode=mode, coordinate_transformation_mode=ctm))


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "legacy"])
def test_nearest_modes(nearest_mode):
    check_op("resize", [X], attrs_for((1, 1, 1.5, 0.7), mode="nearest", nearest_mode=nearest_mode))


@pytest.mark.parametrize("ctm", ["asymmetric", "half_pixel", "pytorch_half_pixel", "align_corners"])
@pytest.mark.parametrize("nearest_mode", ["floor", "round_prefer_floor", "round_prefer_ceil", "ceil"])
def test_integer_upsampling_in_integer_arithmetic(ctm, nearest_mode):
    """Integer scales take the j // s index where that is exact (asymmetric + floor, half_pixel +
    rounding); every combination still equals the reference."""
    from tensorforge.ops.transform_resize import _integer_upsampling
    from tensorforge.ops.transform_resize_math import AxisPlan
    for scales in ((1, 1, 2.0, 3.0), (1, 1, 4.0, 2.0)):
        check_op("resize", [X], attrs_for(scales, mode="nearest", coordinate_transformation_mode=ctm,
                                          nearest_mode=nearest_mode))
    fast = _integer_upsampling(AxisPlan(4, 8, 2.0), ctm, nearest_mode)
    assert fast == (2 if (ctm, nearest_mode) in {("asymmetric", "floor"), ("half_pixel", "round_prefer_floor"),
                                                 ("half_pixel", "round_prefer_ceil"),
                                                 ("pytorch_half_pixel", "round_prefer_floor"),
                                                 ("pytorch_half_pixel", "round_prefer_ceil")} else 0)


@pytest.mark.parametrize("mode, taps", [("linear", 2), ("cubic", 4)])
def test_interpolation_reads_its_taps_from_tables_per_axis(mode, taps):
    """Each resized axis reads, per tap, a clamped index and a weight from a table of one entry
    per output position (computed once), not from its source coordinate worked out per element;
    tf_crop_and_resize, which extrapolates, keeps the per-element form."""
    from tensorforge import te
    x = te.placeholder(X.shape, "float32", name="x")
    (out,) = get("resize").build_compute([x], attrs_for((1, 1, 2.0, 1.5), mode=mode))
    (axis3,) = out.op.input_tensors()
    tables = sorted(t.op.name for t in axis3.op.input_tensors() if t.op.name != "resize_axis2")
    assert tables == sorted([f"resize_index3_{t}" for t in range(taps)] + [f"resize_weight3_{t}" for t in range(taps)])
    (crop,) = get("resize").build_compute([x], attrs_for((1, 1, 2.0, 1.5), mode=mode,
                                                      coordinate_transformation_mode="tf_crop_and_resize"))
    assert not any(t.op.name.startswith("resize_index") for t in crop.op.input_tensors()[0].op.input_tensors())


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_antialias_and_exclude_outside(mode):
    for scales in ((1, 1, 0.6, 0.35), (1, 1, 2.0, 0.5)):
        check_op("resize", [X], attrs_for(scales, mode=mode, antialias=1), interpreter=True)
        check_op("resize", [X], attrs_for(scales, mode=mode, exclude_outside=1, cubic_coeff_a=-0.5))


def test_integer_input_rounds_and_saturates():
    x = np.array([[0, 255, 0, 255]], "uint8")
    sizes, scales = resize_output(x.shape, scales=(1, 2))
    got = check_op("resize", [x], dict(sizes=sizes, scales=scales, mode="cubic"))[0]
    assert got.dtype == np.uint8 and got.max() == 255 and got.min() == 0


def test_hand_checked_linear_half_pixel():
    x = np.array([[1.0, 2.0]], "float32")
    sizes, scales = resize_output(x.shape, scales=(1, 2))
    got = check_op("resize", [x], dict(sizes=sizes, scales=scales, mode="linear"))[0]
    np.testing.assert_allclose(got, [[1.0, 1.25, 1.75, 2.0]])


def test_output_sizes():
    assert resize_output((1, 1, 4, 4), scales=(1, 1, 0.6, 0.6)) == ((1, 1, 2, 2), (1.0, 1.0, 0.6, 0.6))
    sizes, scales = resize_output((1, 1, 4, 6), sizes=(3, 7), axes=(2, 3), policy="not_larger")
    assert sizes == (1, 1, 3, 5) and scales[2] == scales[3] == 0.75
    sizes, _ = resize_output((1, 1, 4, 6), sizes=(3, 7), axes=(2, 3), policy="not_smaller")
    assert sizes == (1, 1, 5, 7)


@pytest.mark.parametrize("attrs, message", [
    ({"mode": "area"}, "mode"),
    ({"coordinate_transformation_mode": "center"}, "coordinate_transformation_mode"),
    ({"nearest_mode": "round"}, "nearest_mode"),
])
def test_errors(attrs, message):
    with pytest.raises(OpError, match=message):
        get("resize").infer_types([TensorType((1, 4), "float32")], dict(sizes=(1, 8), scales=(1.0, 2.0), **attrs))
    with pytest.raises(OpError, match="exactly one"):
        resize_output((1, 4))


def test_channel_operand_of_a_merged_input_reads_at_the_channel():
    """A per-channel bias added to a product's (C, H * W) output, reshaped to (C, H, W) and
    resized: the index tables hold 32-bit clamped indices, so the bias is read at the channel the
    output row belongs to, not at a 64-bit division and remainder of the flat offset per element
    (which made a DeepLab head's 8x up-sampling take 9.5 ms against ONNX Runtime's 0.6)."""
    import tensorforge
    from tensorforge.graph.builder import GraphBuilder
    from tensorforge.graph.reference import run_reference

    c, h = 5, 8
    rng = np.random.default_rng(3)
    b = GraphBuilder("head")
    x = b.input("x", (1, c, h * h), "float32")
    bias = rng.standard_normal((1, c, 1)).astype("float32")
    y = b.add1("add", [x, b.const(bias, "bias")])
    y = b.add1("reshape", [y], {"shape": (1, c, h, h)})
    sizes, scales = resize_output((1, c, h, h), scales=(1, 1, 4.0, 4.0))
    y = b.add1("resize", [y], {"sizes": sizes, "scales": scales, "mode": "linear"})
    graph = b.finish([y])
    model = tensorforge.compile(graph, target="c -mcpu=x86-64-v4")
    assert "tf_floordiv_int64" not in model.source and f"% {c}" not in model.source
    xs = rng.standard_normal((1, c, h * h)).astype("float32")
    np.testing.assert_allclose(model(xs)[0], run_reference(graph, xs)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ctm, integer", [("half_pixel", True), ("pytorch_half_pixel", True), ("asymmetric", True),
                                          ("align_corners", False)])
@pytest.mark.parametrize("factor", [2, 3, 4])
def test_linear_upsampling_by_an_integer_factor_in_integer_arithmetic(ctm, integer, factor):
    """Linear resizing by an integer factor with a coordinate transform of the form (a j + b) / d
    takes its taps and weights from integer arithmetic on the output index (no index and weight
    tables); the values are the reference's, borders included."""
    from tensorforge import te

    def stages(t, seen):
        if t.op.name not in seen:
            seen.add(t.op.name)
            for u in t.op.input_tensors():
                stages(u, seen)
        return seen

    x = te.placeholder(X.shape, "float32", name="x")
    attrs = attrs_for((1, 1, factor, factor), mode="linear", coordinate_transformation_mode=ctm)
    (out,) = get("resize").build_compute([x], attrs)
    assert (not any(n.startswith("resize_index") for n in stages(out, set()))) == integer
    check_op("resize", [X], attrs)
