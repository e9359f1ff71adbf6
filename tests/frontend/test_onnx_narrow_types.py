"""ONNX models on the narrow element types (float8 variants, float8e8m0, float4e2m1, int4, uint4,
int2, uint2), converted with from_onnx, compiled to C and run, against ONNX's reference
evaluator on random inputs (NaN, infinities and out-of-range values included): Cast / CastLike
with `saturate` and `round_mode`, QuantizeLinear / DequantizeLinear (per axis, blocked), BitCast,
and data movement kernels (Transpose, Concat, Gather, an int4 initializer) that carry the types
as bytes.  Also float16 convolutions, which sum in float32 and round once."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import tensorforge
from tensorforge.frontend import from_onnx
from tensorforge.ir import dtype as dt

RNG = np.random.default_rng(7)
NARROW = {"float8_e4m3fn": TensorProto.FLOAT8E4M3FN, "float8_e4m3fnuz": TensorProto.FLOAT8E4M3FNUZ,
          "float8_e5m2": TensorProto.FLOAT8E5M2, "float8_e5m2fnuz": TensorProto.FLOAT8E5M2FNUZ,
          "float8_e8m0fnu": TensorProto.FLOAT8E8M0, "float4_e2m1fn": TensorProto.FLOAT4E2M1,
          "int4": TensorProto.INT4, "uint4": TensorProto.UINT4, "int2": TensorProto.INT2, "uint2": TensorProto.UINT2}


def _model(nodes, inputs, outputs, inits=(), opset=25):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, elem, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def _run(model, *arrays):
    compiled = tensorforge.compile(from_onnx(model), target="c")
    out = compiled(*arrays)
    return out if isinstance(out, list) else [out]


def _expected(model, feeds):
    return ReferenceEvaluator(model).run(None, feeds)


def _same(got, want):
    """Equal values (NaN equal to NaN), compared through float64 for the narrow floats."""
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


def _wild(shape, scale=300.0):
    x = (RNG.standard_normal(shape) * scale).astype(np.float32)
    flat = x.reshape(-1)
    flat[:4] = [np.nan, np.inf, -np.inf, 1e9]
    return x


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float4_e2m1fn"])
@pytest.mark.parametrize("saturate", [0, 1])
def test_cast_float_to_narrow_float_and_back(dtype, saturate):
    x = _wild((4, 6))
    elem = NARROW[dtype]
    model = _model([helper.make_node("Cast", ["x"], ["q"], to=elem, saturate=saturate),
                    helper.make_node("Cast", ["q"], ["y"], to=TensorProto.FLOAT)],
                   [_vi("x", TensorProto.FLOAT, [4, 6])], [_vi("q", elem), _vi("y", TensorProto.FLOAT)])
    got, want = _run(model, x), _expected(model, {"x": x})
    for g, w in zip(got, want):
        _same(g, w)


@pytest.mark.parametrize("dtype", ["int4", "uint4", "int2", "uint2"])
def test_cast_integers_to_small_ints_wrap(dtype):
    x = RNG.integers(-300, 300, size=(5, 7)).astype(np.int32)
    model = _model([helper.make_node("Cast", ["x"], ["y"], to=NARROW[dtype])],
                   [_vi("x", TensorProto.INT32, [5, 7])], [_vi("y", NARROW[dtype])])
    (got,), (want,) = _run(model, x), _expected(model, {"x": x})
    _same(got, want)


@pytest.mark.parametrize("mode", ["up", "down", "nearest"])
def test_cast_to_e8m0_with_round_mode(mode):
    x = np.abs(RNG.standard_normal((3, 8)) * 1000).astype(np.float32) + 1e-3
    model = _model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E8M0, saturate=1, round_mode=mode)],
                   [_vi("x", TensorProto.FLOAT, [3, 8])], [_vi("y", TensorProto.FLOAT8E8M0)])
    (got,), (want,) = _run(model, x), _expected(model, {"x": x})
    _same(got, want)


def test_castlike_from_float8_input_to_float16():
    x = RNG.standard_normal((2, 5)).astype(np.float32).astype(ml_dtypes.float8_e5m2)
    like = np.zeros((1,), np.float16)
    model = _model([helper.make_node("CastLike", ["x", "like"], ["y"])],
                   [_vi("x", TensorProto.FLOAT8E5M2, [2, 5])], [_vi("y", TensorProto.FLOAT16)],
                   [numpy_helper.from_array(like, "like")])
    (got,), (want,) = _run(model, x), _expected(model, {"x": x})
    _same(got, want)


@pytest.mark.parametrize("dtype", ["int4", "uint4", "int2", "float8_e4m3fn"])
def test_quantize_dequantize_blocked(dtype):
    x = (RNG.standard_normal((3, 8)) * 6).astype(np.float32)
    scale = (np.abs(RNG.standard_normal((3, 2))) + 0.2).astype(np.float32)
    if dtype.startswith("float8"):
        zp = np.zeros((3, 2), np.float32).astype(ml_dtypes.float8_e4m3fn)
    else:
        lo, hi = {"int4": (-8, 7), "uint4": (0, 15), "int2": (-2, 1)}[dtype]
        zp = RNG.integers(lo, hi + 1, size=(3, 2)).astype(np.int8).astype(getattr(ml_dtypes, dtype))
    model = _model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1, block_size=4),
                    helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1, block_size=4)],
                   [_vi("x", TensorProto.FLOAT, [3, 8])], [_vi("q", NARROW[dtype]), _vi("y", TensorProto.FLOAT)],
                   [numpy_helper.from_array(scale, "s"), numpy_helper.from_array(zp, "z")])
    got, want = _run(model, x), _expected(model, {"x": x})
    for g, w in zip(got, want):
        _same(g, w)


def test_dequantize_int4_weight_per_axis_feeds_matmul():
    w = RNG.integers(-8, 8, size=(4, 3)).astype(np.int8).astype(ml_dtypes.int4)
    scale = np.array([0.5, 0.25, 2.0], np.float32)
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    model = _model([helper.make_node("DequantizeLinear", ["w", "s"], ["wf"], axis=1),
                    helper.make_node("MatMul", ["x", "wf"], ["y"])],
                   [_vi("x", TensorProto.FLOAT, [2, 4])], [_vi("y", TensorProto.FLOAT)],
                   [numpy_helper.from_array(w, "w"), numpy_helper.from_array(scale, "s")])
    (got,), (want,) = _run(model, x), _expected(model, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.filterwarnings("ignore:model g declares ONNX opset 26")
def test_bitcast_float_to_int_and_nibbles():
    x = _wild((3, 4))
    model = _model([helper.make_node("BitCast", ["x"], ["y"], to=TensorProto.INT32)],
                   [_vi("x", TensorProto.FLOAT, [3, 4])], [_vi("y", TensorProto.INT32)], opset=26)
    (got,) = _run(model, x)
    np.testing.assert_array_equal(got, x.view(np.int32))
    n = np.arange(16, dtype=np.uint8).reshape(4, 4).astype(ml_dtypes.uint4)
    model = _model([helper.make_node("BitCast", ["n"], ["y"], to=TensorProto.INT4)],
                   [_vi("n", TensorProto.UINT4, [4, 4])], [_vi("y", TensorProto.INT4)], opset=26)
    (got,) = _run(model, n)
    assert got.dtype == np.dtype(ml_dtypes.int4)
    assert got.astype(np.int64).reshape(-1).tolist() == list(range(8)) + list(range(-8, 0))


@pytest.mark.parametrize("dtype", sorted(NARROW))
def test_data_movement_kernels_carry_narrow_types(dtype, tmp_path):
    """Transpose, Concat (with an initializer of the type) and Gather run as generated C kernels
    that copy the types' bytes."""
    np_type = np.dtype(getattr(ml_dtypes, dtype))
    x, const = (RNG.integers(0, 256, size=shape).astype(np.uint8).view(np_type) for shape in ((3, 4), (4, 2)))
    x, const = (a.astype(np.float32).astype(np_type) for a in (x, const))     # canonical bytes of the type
    idx = np.array([4, 0, 2], np.int64)
    elem = NARROW[dtype]
    model = _model([helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
                    helper.make_node("Concat", ["t", "c"], ["u"], axis=1),
                    helper.make_node("Gather", ["u", "i"], ["y"], axis=1)],
                   [_vi("x", elem, [3, 4]), _vi("i", TensorProto.INT64, [3])], [_vi("y", elem)],
                   [numpy_helper.from_array(const, "c")])
    compiled = tensorforge.compile(from_onnx(model), target="c")
    assert "uint8_t" in compiled.source and not compiled.info.get("host_steps")
    (got,) = compiled(x, idx)
    want = np.concatenate([x.T, const], axis=1)[:, idx]
    assert got.dtype == np_type
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    again = tensorforge.load(_export(compiled, tmp_path))
    np.testing.assert_array_equal(again(x, idx)[0].view(np.uint8), want.view(np.uint8))


def _export(model, folder) -> str:
    path = str(folder / "m.tfm")
    model.export(path)
    return path


def test_arithmetic_on_a_narrow_type_names_the_node():
    model = _model([helper.make_node("Add", ["x", "x"], ["y"], name="add_f8")],
                   [_vi("x", TensorProto.FLOAT8E4M3FN, [3])], [_vi("y", TensorProto.FLOAT8E4M3FN)])
    with pytest.raises(Exception, match="add_f8.*float8_e4m3fn, a storage-only type"):
        from_onnx(model)


def test_float16_conv_sums_in_float32_and_rounds_once():
    x = RNG.standard_normal((2, 4, 40)).astype(np.float16)
    w = RNG.standard_normal((4, 1, 9)).astype(np.float16)
    model = _model([helper.make_node("Conv", ["x", "w"], ["y"], group=4)],
                   [_vi("x", TensorProto.FLOAT16, [2, 4, 40]), _vi("w", TensorProto.FLOAT16, [4, 1, 9])],
                   [_vi("y", TensorProto.FLOAT16)], opset=21)
    (got,) = _run(model, x, w)
    xf, wf = x.astype(np.float64), w.astype(np.float64)
    exact = np.stack([(xf[:, :, t:t + 9] * wf[:, 0]).sum(-1) for t in range(32)], -1)
    half_ulp = np.spacing(np.abs(got)).astype(np.float64) / 2
    assert (np.abs(got.astype(np.float64) - exact) <= half_ulp * 1.001 + 1e-12).all()   # one rounding


def test_bfloat16_model_with_params_survives_export(tmp_path):
    """.npy files cannot describe bfloat16 (or the narrow types): export stores their bytes and
    load gives them their dtype back."""
    bf16 = np.dtype(ml_dtypes.bfloat16)
    w = RNG.standard_normal((3, 4)).astype(np.float32).astype(bf16)
    x = RNG.standard_normal((3, 4)).astype(np.float32).astype(bf16)
    model = _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", TensorProto.BFLOAT16, [3, 4])],
                   [_vi("y", TensorProto.BFLOAT16)], [numpy_helper.from_array(w, "w")])
    compiled = tensorforge.compile(from_onnx(model), target="c")
    (want,) = compiled(x)
    (got,) = tensorforge.load(_export(compiled, tmp_path))(x)
    assert got.dtype == bf16
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


def _one_input_model(nodes, elem, outputs, inits=()):
    return _model(nodes, [_vi("x", elem, [2, 4])], outputs, inits)


@pytest.mark.parametrize("dtype", ["float8_e5m2", "float8_e4m3fn", "float8_e8m0fnu", "float4_e2m1fn"])
def test_isnan_isinf_shape_size_on_narrow_floats(dtype):
    np_type = np.dtype(getattr(ml_dtypes, dtype))
    x = np.array([[1, np.nan, np.inf, -2], [0.5, 3, -np.inf, 0]], np.float32).astype(np_type)
    elem = NARROW[dtype]
    model = _one_input_model([helper.make_node("IsNaN", ["x"], ["n"]), helper.make_node("IsInf", ["x"], ["i"]),
                              helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Size", ["x"], ["z"])],
                             elem, [_vi("n", TensorProto.BOOL), _vi("i", TensorProto.BOOL),
                                    _vi("s", TensorProto.INT64), _vi("z", TensorProto.INT64)])
    got, want = _run(model, x), _expected(model, {"x": x})
    for g, w in zip(got, want):
        _same(np.asarray(g), np.asarray(w))


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e8m0fnu", "int4", "uint2"])
@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
def test_pad_on_narrow_types(dtype, mode):
    np_type = np.dtype(getattr(ml_dtypes, dtype))
    lo, hi = (0, 3) if dtype == "uint2" else (-8, 7) if dtype == "int4" else (1, 40)
    x = RNG.integers(lo, hi + 1, size=(2, 4)).astype(np.float32).astype(np_type)
    fill = np.array(2 if dtype == "int4" else 1, np.float32).astype(np_type)
    inputs = ["x", "p", "v"] if mode == "constant" else ["x", "p"]
    inits = [numpy_helper.from_array(np.array([1, 2, 0, 1], np.int64), "p")]
    if mode == "constant":
        inits.append(numpy_helper.from_array(fill, "v"))
    model = _one_input_model([helper.make_node("Pad", inputs, ["y"], mode=mode)], NARROW[dtype],
                             [_vi("y", NARROW[dtype])], inits)
    (got,), (want,) = _run(model, x), _expected(model, {"x": x})
    _same(got, want)


def test_constant_and_constant_of_shape_of_a_narrow_type():
    x = RNG.standard_normal((2, 4)).astype(np.float32).astype(ml_dtypes.float8_e5m2)
    value = numpy_helper.from_array(np.array([2.5], np.float32).astype(ml_dtypes.float8_e5m2))
    ones = numpy_helper.from_array(np.ones((1, 4), np.float32).astype(ml_dtypes.float8_e5m2))
    model = _one_input_model([helper.make_node("ConstantOfShape", ["s"], ["c"], value=value),
                              helper.make_node("Constant", [], ["o"], value=ones),
                              helper.make_node("Concat", ["x", "c", "o"], ["y"], axis=0)],
                             TensorProto.FLOAT8E5M2, [_vi("y", TensorProto.FLOAT8E5M2)],
                             [numpy_helper.from_array(np.array([1, 4], np.int64), "s")])
    (got,), (want,) = _run(model, x), _expected(model, {"x": x})
    _same(got, want)


def test_int8_quantization_with_a_float8e8m0_scale():
    """MX-style blocks: an int8 result whose per-block scale is a power of two (float8e8m0)."""
    x = (RNG.standard_normal((3, 8)) * 50).astype(np.float32)
    scale = np.array([[0.25, 2.0], [1.0, 4.0], [0.5, 8.0]], np.float32).astype(ml_dtypes.float8_e8m0fnu)
    zp = RNG.integers(-5, 5, (3, 2)).astype(np.int8)
    model = _model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1, block_size=4),
                    helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1, block_size=4,
                                     output_dtype=TensorProto.FLOAT)],
                   [_vi("x", TensorProto.FLOAT, [3, 8])], [_vi("q", TensorProto.INT8), _vi("y", TensorProto.FLOAT)],
                   [numpy_helper.from_array(scale, "s"), numpy_helper.from_array(zp, "z")])
    got, want = _run(model, x), _expected(model, {"x": x})
    for g, w in zip(got, want):
        _same(g, w)


_CAST_MODELS: dict = {}


def _compiled_cast(dtype: str, saturate: int):
    """One compiled float32 -> dtype -> float32 model per case (hypothesis then only feeds data)."""
    key = (dtype, saturate)
    if key not in _CAST_MODELS:
        model = _model([helper.make_node("Cast", ["x"], ["q"], to=NARROW[dtype], saturate=saturate),
                        helper.make_node("Cast", ["q"], ["y"], to=TensorProto.FLOAT)],
                       [_vi("x", TensorProto.FLOAT, [32])], [_vi("q", NARROW[dtype]), _vi("y", TensorProto.FLOAT)])
        _CAST_MODELS[key] = (model, tensorforge.compile(from_onnx(model), target="c"))
    return _CAST_MODELS[key]


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast")
@settings(max_examples=25, deadline=None)
@given(hnp.arrays(np.float32, (32,), elements=st.floats(width=32)),
       st.sampled_from(["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float4_e2m1fn",
                        "int4", "uint4", "int2", "uint2"]),
       st.sampled_from([0, 1]))
def test_cast_round_trip_matches_onnx_on_random_values(x, dtype, saturate):
    if dtype in dt.NARROW_INTS:
        x = np.where(np.isfinite(x), np.clip(x, -1e9, 1e9), 0).astype(np.float32)   # float -> int is undefined on NaN/inf
    model, compiled = _compiled_cast(dtype, saturate)
    got, want = compiled(x), _expected(model, {"x": x})
    for g, w in zip(got, want):
        _same(g, w)
