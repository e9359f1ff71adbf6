"""quantize_linear, dequantize_linear, requantize, matmul_integer and conv_integer: the TE compute,
compiled to C, against the NumPy reference; the references against hand-computed values (round
half to even, saturation, per-axis and blocked parameters, zero points) and NumPy."""
from __future__ import annotations

import numpy as np
import pytest

from tensorforge.ops import get
from tensorforge.ops.nn_conv import conv_reference
from tensorforge.ops.registry import OpError, TensorType
from tensorforge.ops.testing import check_op


def test_quantize_rounds_half_to_even_and_saturates():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 300.0, -300.0, 1000.0], np.float32)
    scale = np.array(1.0, np.float32)
    got = check_op("quantize_linear", [x, scale, np.array(0, np.int8)], {"dtype": "int8"})[0]
    np.testing.assert_array_equal(got, [0, 2, 2, 0, -2, 127, -128, 127])
    got = check_op("quantize_linear", [x, scale, np.array(10, np.uint8)], {"dtype": "uint8"})[0]
    np.testing.assert_array_equal(got, [10, 12, 12, 10, 8, 255, 0, 255])


def test_quantize_without_zero_point_is_uint8():
    x = np.array([-1.0, 0.2, 3.0], np.float32)
    got = check_op("quantize_linear", [x, np.array(0.1, np.float32), None])[0]
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, [0, 2, 30])


def test_per_axis_parameters():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    scale = np.array([0.01, 0.02, 0.05], np.float32)
    zp = np.array([-3, 0, 7], np.int8)
    q = check_op("quantize_linear", [x, scale, zp], {"axis": 1, "dtype": "int8"})[0]
    want = np.clip(np.rint(x / scale[:, None]) + zp[:, None], -128, 127).astype(np.int8)
    np.testing.assert_array_equal(q, want)
    back = check_op("dequantize_linear", [q, scale, zp], {"axis": 1}, rtol=1e-6)[0]
    np.testing.assert_allclose(back, (q.astype(np.float32) - zp[:, None]) * scale[:, None], rtol=1e-6)


def test_blocked_parameters():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 5)).astype(np.float32)
    scale = np.array([[0.1, 0.2, 0.3]] * 3, np.float32)            # blocks of 2 along axis 1
    q = check_op("quantize_linear", [x, scale, None], {"axis": 1, "block_size": 2, "dtype": "int16"})[0]
    full = np.repeat(scale, 2, axis=1)[:, :5]
    np.testing.assert_array_equal(q, np.rint(x / full).astype(np.int16))


def test_requantize_is_round_of_product():
    acc = np.array([[100, -100, 7, 5000]], np.int32)
    mult = np.array([0.5, 0.5, 0.5, 0.5], np.float32)
    got = check_op("requantize", [acc, mult, np.array(3, np.int8)], {"axis": 1, "dtype": "int8"})[0]
    np.testing.assert_array_equal(got, [[53, -47, 7, 127]])                 # 3.5 -> 4 (+3 = 7)


def test_bad_parameter_shape_names_the_op():
    with pytest.raises(OpError, match="quantize_linear: scale of shape \\(2,\\)"):
        get("quantize_linear").infer_types([TensorType((4, 3), "float32"), TensorType((2,), "float32"), None],
                                           {"axis": 1, "dtype": "uint8"})


@pytest.mark.parametrize("a_dtype, b_dtype", [("uint8", "int8"), ("int8", "int8"), ("uint8", "uint8")])
@pytest.mark.parametrize("a_shape, b_shape", [((5, 7), (7, 3)), ((2, 4, 6), (6, 5)), ((7,), (7, 2))])
def test_matmul_integer(a_dtype, b_dtype, a_shape, b_shape):
    rng = np.random.default_rng(2)
    a = rng.integers(np.iinfo(a_dtype).min, np.iinfo(a_dtype).max + 1, a_shape).astype(a_dtype)
    b = rng.integers(np.iinfo(b_dtype).min, np.iinfo(b_dtype).max + 1, b_shape).astype(b_dtype)
    za, zb = np.array(3, a_dtype), np.arange(b_shape[-1]).astype(b_dtype)
    got = check_op("matmul_integer", [a, b, za, zb])[0]
    want = np.matmul(a.astype(np.int64) - 3, b.astype(np.int64) - zb.astype(np.int64))
    np.testing.assert_array_equal(got, want.astype(np.int32))


def test_matmul_integer_per_row_zero_point():
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 255, (4, 6)).astype(np.uint8), rng.integers(-128, 127, (6, 3)).astype(np.int8)
    za = np.array([1, 2, 3, 4], np.uint8)
    got = check_op("matmul_integer", [a, b, za, None])[0]
    np.testing.assert_array_equal(got, (a.astype(np.int32) - za[:, None]) @ b.astype(np.int32))


@pytest.mark.parametrize("groups, padding, strides", [(1, (1, 1, 1, 1), (1, 1)), (2, (0, 1, 2, 0), (2, 1)),
                                                       (4, (1, 1, 1, 1), (1, 1))])
def test_conv_integer(groups, padding, strides):
    rng = np.random.default_rng(4)
    x = rng.integers(0, 256, (1, 4, 6, 5)).astype(np.uint8)
    w = rng.integers(-128, 128, (4, 4 // groups, 3, 3)).astype(np.int8)
    zx, zw = np.array(128, np.uint8), np.array([1, -2, 3, 0], np.int8)
    attrs = {"groups": groups, "padding": padding, "strides": strides}
    got = check_op("conv_integer", [x, w, zx, zw], attrs)[0]
    # padding pads x with its zero point: the padded cells contribute nothing
    want = conv_reference(x.astype(np.int64) - 128, w.astype(np.int64) - zw[:, None, None, None],
                          strides, padding, (1, 1), groups)
    np.testing.assert_array_equal(got, want.astype(np.int32))


@pytest.mark.parametrize("m, k, n", [(1, 64, 16), (5, 70, 20), (12, 130, 48)])
def test_matmul_integer_vnni_equals_matmul_integer(m, k, n):
    """The packed form with the zero-point correction is matmul_integer(a, b, za, 0)."""
    from tensorforge.ops.schedules.cpu_matmul_int8 import pack_b_vnni
    rng = np.random.default_rng(6)
    a = rng.integers(0, 256, (m, k)).astype(np.uint8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    za = np.array(77, np.uint8)
    corr = (77 * b.astype(np.int64).sum(axis=0)).astype(np.int32)
    want = get("matmul_integer").run_reference([a, b, za, None], {})[0]
    got = check_op("matmul_integer_vnni", [a, pack_b_vnni(b, 16), corr], {"units": n})[0]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("strides, padding, dilations", [((1, 1), (1, 1, 1, 1), (1, 1)), ((2, 1), (0, 2, 1, 0), (1, 2))])
def test_im2col_times_weights_is_the_convolution(strides, padding, dilations):
    rng = np.random.default_rng(7)
    x = rng.integers(0, 256, (2, 3, 7, 6)).astype(np.uint8)
    w = rng.integers(-128, 128, (5, 3, 3, 2)).astype(np.int8)
    attrs = {"kernel": (3, 2), "strides": strides, "padding": padding, "dilations": dilations, "pad_value": 9}
    cols = check_op("im2col", [x], attrs)[0]
    conv = get("conv_integer").run_reference([x, w, np.array(9, np.uint8), None],
                                             {"strides": strides, "padding": padding, "dilations": dilations})[0]
    n, m, oh, ow = conv.shape
    prod = (cols.astype(np.int64) - 9) @ w.reshape(5, -1).T.astype(np.int64)
    np.testing.assert_array_equal(prod.reshape(n, oh, ow, m).transpose(0, 3, 1, 2), conv)


@pytest.mark.parametrize("dtype", ["uint8", "float32"])
@pytest.mark.parametrize("strides, padding, dilations", [((1, 1), (1, 1, 1, 1), (1, 1)), ((2, 3), (0, 2, 1, 0), (1, 2))])
def test_im2col_per_image_is_each_images_window_matrix(dtype, strides, padding, dilations):
    """per_image: (N, C * KH * KW, OH * OW), so W @ cols[n] is image n's output in NCHW."""
    rng = np.random.default_rng(17)
    x = rng.integers(0, 256, (2, 3, 9, 7)).astype(dtype)
    attrs = {"kernel": (3, 2), "strides": strides, "padding": padding, "dilations": dilations, "pad_value": 0}
    rows = get("im2col").run_reference([x], attrs)[0]
    cols = check_op("im2col", [x], {**attrs, "per_image": True})[0]
    assert cols.shape == (2, 18, rows.shape[0] // 2)
    np.testing.assert_array_equal(cols, rows.reshape(2, -1, 18).transpose(0, 2, 1))
    with pytest.raises(OpError, match="per_image"):
        get("im2col").infer_types([TensorType((2, 3, 9, 7), dtype)], {**attrs, "per_image": True, "columns": 20})


@pytest.mark.parametrize("strides, padding, dilations", [((1, 1), (1, 1, 1, 1), (1, 1)), ((2, 1), (0, 2, 1, 0), (1, 2))])
def test_im2col_of_an_image_as_rows_is_the_convolution(strides, padding, dilations):
    """With image=(N, H, W) x is the image as rows (NHWC) and the columns run (kh, kw, c)."""
    rng = np.random.default_rng(8)
    x = rng.integers(0, 256, (2, 3, 7, 6)).astype(np.uint8)
    w = rng.integers(-128, 128, (5, 3, 3, 2)).astype(np.int8)
    rows = np.ascontiguousarray(x.transpose(0, 2, 3, 1).reshape(-1, 3))
    attrs = {"kernel": (3, 2), "strides": strides, "padding": padding, "dilations": dilations, "pad_value": 9,
             "image": (2, 7, 6)}
    cols = check_op("im2col", [rows], attrs)[0]
    conv = get("conv_integer").run_reference([x, w, np.array(9, np.uint8), None],
                                             {"strides": strides, "padding": padding, "dilations": dilations})[0]
    n, m, oh, ow = conv.shape
    prod = (cols.astype(np.int64) - 9) @ w.transpose(0, 2, 3, 1).reshape(5, -1).T.astype(np.int64)
    np.testing.assert_array_equal(prod.reshape(n, oh, ow, m).transpose(0, 3, 1, 2), conv)


@pytest.mark.parametrize("image", [None, (2, 7, 6)])
def test_im2col_pads_columns_past_the_window(image):
    """columns=K writes the window's 18 columns and then pad_value up to K (the padded depth of
    an int8 product); fewer columns than the window has is an error."""
    from tensorforge.ops.registry import OpError
    rng = np.random.default_rng(10)
    x = rng.integers(0, 256, (2, 3, 7, 6)).astype(np.uint8)
    if image is not None:
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1).reshape(-1, 3))
    attrs = {"kernel": (3, 2), "strides": (2, 1), "padding": (1, 0, 1, 0), "pad_value": 9, "image": image}
    plain = check_op("im2col", [x], attrs)[0]
    padded = check_op("im2col", [x], {**attrs, "columns": 20})[0]
    assert plain.shape[1] == 18 and padded.shape == (plain.shape[0], 20)
    np.testing.assert_array_equal(padded[:, :18], plain)
    assert np.all(padded[:, 18:] == 9)
    with pytest.raises(OpError, match="fewer than"):
        check_op("im2col", [x], {**attrs, "columns": 17})


@pytest.mark.parametrize("channels, strides, padding, dilations", [
    (16, (1, 1), (1, 1, 1, 1), (1, 1)), (5, (2, 1), (0, 2, 1, 0), (1, 2))])
def test_depthwise_integer_rows_is_the_depthwise_conv_integer(channels, strides, padding, dilations):
    """On the image as rows, with the zero-point correction, it is conv_integer with groups=C."""
    rng = np.random.default_rng(9)
    x = rng.integers(0, 256, (2, channels, 7, 6)).astype(np.uint8)
    w = rng.integers(-128, 128, (channels, 1, 3, 2)).astype(np.int8)
    conv = get("conv_integer").run_reference([x, w, np.array(9, np.uint8), None],
                                             {"strides": strides, "padding": padding, "dilations": dilations,
                                              "groups": channels})[0]
    rows = np.ascontiguousarray(x.transpose(0, 2, 3, 1).reshape(-1, channels))
    taps = np.ascontiguousarray(w.reshape(channels, -1).T)
    corr = (9 * taps.astype(np.int64).sum(axis=0)).astype(np.int32)
    attrs = {"image": (2, 7, 6), "kernel": (3, 2), "strides": strides, "padding": padding, "dilations": dilations,
             "pad_value": 9}
    got = check_op("depthwise_integer_rows", [rows, taps.astype(np.float32), corr], attrs)[0]
    n, c, oh, ow = conv.shape
    np.testing.assert_array_equal(got, conv.transpose(0, 2, 3, 1).reshape(-1, c))


def test_depthwise_integer_rows_pads_a_copy_of_the_8_bit_image():
    """The padded copy of the image keeps x's 8-bit type (a float32 copy is 4x the memory traffic:
    MobileNet's stride-2 layers read a 3.3 MB one); taps convert to float on the way to the sum."""
    from tensorforge import te
    from tensorforge.ops.schedules.cpu_matmul_int8_group import _stage
    x = te.placeholder((2 * 7 * 6, 16), "uint8", name="x")
    w = te.placeholder((6, 16), "float32", name="w")
    corr = te.placeholder((16,), "int32", name="corr")
    out = get("depthwise_integer_rows").compute(x, w, corr, image=(2, 7, 6), kernel=(3, 2), strides=(2, 1),
                                                padding=(1, 0, 1, 0), pad_value=9)
    pad = _stage(out, "dw_pad")
    assert pad is not None and pad.dtype == "uint8"


@pytest.mark.parametrize("dtype, strides, padding", [("uint8", (2, 2), (1, 1, 1, 1)), ("int8", (1, 2), (0, 1, 2, 0))])
def test_max_pool_rows_is_max_pool_on_the_image(dtype, strides, padding):
    rng = np.random.default_rng(10)
    lo, hi = (0, 256) if dtype == "uint8" else (-128, 128)
    x = rng.integers(lo, hi, (2, 5, 7, 6)).astype(dtype)
    want = get("max_pool2d").run_reference([x.astype(np.float32)], {"kernel": (3, 2), "strides": strides,
                                                                     "padding": padding})[0]
    rows = np.ascontiguousarray(x.transpose(0, 2, 3, 1).reshape(-1, 5))
    got = check_op("max_pool_rows", [rows], {"image": (2, 7, 6), "kernel": (3, 2), "strides": strides,
                                             "padding": padding})[0]
    np.testing.assert_array_equal(got, want.transpose(0, 2, 3, 1).reshape(-1, 5).astype(dtype))


def test_dequantize_of_a_quantize_reads_the_float_before_the_cast():
    """A dequantize of a quantize's result reads the saturated float the quantize casts (so the
    fused loop has no float -> uint8 -> float round trip, which GCC leaves scalar), and computes
    the same values as the two references one after the other."""
    from tensorforge import build, te
    x = te.placeholder((4, 16), "float32", name="x")
    s = te.placeholder((1,), "float32", name="s")
    z = te.placeholder((1,), "uint8", name="z")
    (q,) = get("quantize_linear").build_compute([x, s, z], {"dtype": "uint8"})
    (d,) = get("dequantize_linear").build_compute([q, s, z], {})
    assert q.op not in [t.op for t in d.op.input_tensors()]
    sched = te.create_schedule(d.op)
    f = build(sched, [x, s, z, d], target="c -O1")
    xs = (np.random.default_rng(11).standard_normal((4, 16)) * 3).astype(np.float32)
    sv, zv = np.array([0.02], np.float32), np.array([120], np.uint8)
    got = np.full((4, 16), np.nan, np.float32)
    f(xs, sv, zv, got)
    want = get("dequantize_linear").run_reference(
        [get("quantize_linear").run_reference([xs, sv, zv], {"dtype": "uint8"})[0], sv, zv], {})[0]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("b_dtype, batch, m, k, n, za, zb", [
    ("uint8", (2,), 5, 7, 20, 3, 131),          # padded rows, depth and columns
    ("uint8", (1, 2), 12, 64, 32, 0, 128),      # attention's shapes, scaled down
    ("int8", (3,), 9, 130, 48, 200, -5),
])
def test_matmul_act_vnni_of_packed_activations_is_matmul_integer(b_dtype, batch, m, k, n, za, zb):
    """pack_act_vnni moves b to int8 in the unit's layout; matmul_act_vnni's row and column sums
    put the shift and both zero points back: the result is matmul_integer(a, b, za, zb)."""
    rng = np.random.default_rng(11)
    a = rng.integers(0, 256, (*batch, m, k)).astype(np.uint8)
    lo, hi = (0, 256) if b_dtype == "uint8" else (-128, 128)
    b = rng.integers(lo, hi, (*batch, k, n)).astype(b_dtype)
    shift = 128 if b_dtype == "uint8" else 0
    (bp,) = check_op("pack_act_vnni", [b], {"lanes": 16, "shift": shift})
    assert bp.shape == (*batch, -(-n // 16), -(-k // 4), 16, 4) and bp.dtype == np.int8
    want = get("matmul_integer").run_reference([a, b, np.array(za, np.uint8), np.array(zb, b.dtype)], {})[0]
    got = check_op("matmul_act_vnni", [a, bp], {"units": n, "za": za, "zb": zb, "shift": shift})[0]
    np.testing.assert_array_equal(got, want)


def test_pack_act_vnni_refuses_a_shift_that_does_not_make_int8():
    with pytest.raises(OpError, match="needs shift 128"):
        get("pack_act_vnni").infer_types([TensorType((4, 8), "uint8")], {"lanes": 16, "shift": 0})


@pytest.mark.parametrize("padding, columns", [((3, 3, 3, 3), None), ((0, 2, 1, 0), 40), ((0, 0, 0, 0), None)])
def test_im2col_of_a_padded_nchw_image_gathers_from_a_padded_copy(padding, columns):
    """An NCHW image with padding is copied once with its border ("im2col_pad"), so the gather
    tests no borders; the columns are the window's as before (extra columns hold pad_value)."""
    from tensorforge import te
    x = np.random.default_rng(8).integers(0, 256, (1, 3, 9, 8)).astype(np.uint8)
    attrs = {"kernel": (3, 4), "strides": (2, 1), "padding": padding, "pad_value": 125, "columns": columns}
    check_op("im2col", [x], attrs)
    cols = get("im2col").build_compute([te.placeholder(x.shape, "uint8", name="x")], attrs)[0]
    producers = [t.op.name for t in cols.op.input_tensors()]
    assert producers == (["im2col_pad"] if any(padding) else ["x"])


@pytest.mark.parametrize("kernel, vectorized", [((7, 7), True), ((3, 3), False)])
def test_im2col_copies_long_window_rows_of_the_padded_image_as_vectors(kernel, vectorized):
    """From the padded copy, a window row of 7 bytes (ResNet's stem) is one vector copy; one of
    3 stays scalar (faster at that length); the result is the reference either way."""
    import tensorforge
    from tensorforge import te
    from tensorforge.ops.schedules import get_template
    from tensorforge.target import Target
    x = np.random.default_rng(9).integers(0, 256, (1, 3, 20, 20)).astype(np.uint8)
    attrs = {"kernel": kernel, "strides": (2, 2), "padding": (3, 3, 3, 3), "pad_value": 125, "columns": None}
    xp = te.placeholder(x.shape, "uint8", name="x")
    (cols,) = get("im2col").build_compute([xp], attrs)
    s = te.create_schedule(cols.op)
    get_template("im2col.cpu")(s, [cols], [cols], Target.parse("c"))
    mod = tensorforge.build(s, [xp, cols])
    assert ("omp simd" in mod.source) == vectorized
    got = np.full(tuple(int(d.value) for d in cols.shape), 7, np.uint8)
    mod(x, got)
    np.testing.assert_array_equal(got, get("im2col").run_reference([x], attrs)[0])
