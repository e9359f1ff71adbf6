"""ONNX Attention converter: from_onnx + run_reference against ONNX Runtime, the decomposition,
and clear errors.  ONNX Runtime is the oracle and its errors fail the test; the one feature it
refuses (a mask shorter than the keys) is checked against the ONNX reference evaluator, by name.
float16 and bfloat16, which round at each node of the operator's function body (ONNX Runtime
rounds once), are compiled and checked against the ONNX reference of the op and of its body."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from onnx import helper  # noqa: E402
from onnx_compiled_helpers import compile_and_run  # noqa: E402
from onnx_function_helpers import assert_close, expanded, onnx_reference  # noqa: E402

from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.reference import run_reference  # noqa: E402

NAMES = ("Q", "K", "V", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen")


def attention_case(opset=23, q=(2, 4, 5, 8), k=(2, 4, 6, 8), v=None, mask=None, past=None, nonpad=None,
                   outputs=("Y",), dtype=np.float32, seed=0, **attrs):
    """(model, feeds): one Attention node.  mask is a shape (float) or ("bool", shape); past is the
    past sequence length; nonpad the per-batch key lengths."""
    rng = np.random.default_rng(seed)
    v = v or k
    arrays = {"Q": rng.normal(0, 1, q).astype(dtype), "K": rng.normal(0, 1, k).astype(dtype),
              "V": rng.normal(0, 1, v).astype(dtype)}
    if mask is not None:
        if mask[0] == "bool":
            m = rng.random(mask[1]) > 0.3
            m[..., 0] = True                   # keep at least one key per row
            arrays["attn_mask"] = m
        else:
            arrays["attn_mask"] = rng.normal(0, 1, mask).astype(dtype)
    if past is not None:
        heads = k[1] if len(k) == 4 else attrs["kv_num_heads"]
        size_k = k[3] if len(k) == 4 else k[2] // heads
        size_v = v[3] if len(v) == 4 else v[2] // heads
        arrays["past_key"] = rng.normal(0, 1, (q[0], heads, past, size_k)).astype(dtype)
        arrays["past_value"] = rng.normal(0, 1, (q[0], heads, past, size_v)).astype(dtype)
    if nonpad is not None:
        arrays["nonpad_kv_seqlen"] = np.asarray(nonpad, np.int64)
    used = max(NAMES.index(n) for n in arrays) + 1
    names = [n if n in arrays else "" for n in NAMES[:used]]
    out_names = list(outputs)
    node = helper.make_node("Attention", names, out_names, **attrs)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    graph = helper.make_graph(
        [node], "attention",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in arrays.items()],
        [helper.make_tensor_value_info(o, elem, None) for o in out_names if o])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), arrays


def expected(model, feeds, oracle: str = "onnxruntime") -> list:
    """The outputs of `oracle`: ONNX Runtime (its errors fail the test), or "reference", the
    ONNX reference evaluator, for a case ONNX Runtime is known to refuse."""
    if oracle == "reference":
        from onnx.reference import ReferenceEvaluator
        return ReferenceEvaluator(model).run(None, feeds)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    try:
        return sess.run(None, feeds)
    except Exception as e:
        pytest.fail(f"ONNX Runtime cannot run the test model: {e}")


def check(model, feeds, rtol=1e-5, atol=1e-5, oracle: str = "onnxruntime"):
    want = expected(model, feeds, oracle)
    graph = from_onnx(model)
    got = run_reference(graph, *[feeds[v.name] for v in graph.inputs])
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype, f"output {k}: {g.shape} {g.dtype} vs {w.shape} {w.dtype}"
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"output {k}")
    return graph


@pytest.mark.parametrize("opset", [23, 24])
@pytest.mark.parametrize("attrs", [{}, {"is_causal": 1}, {"scale": 0.05}, {"softcap": 2.0}])
def test_4d(opset, attrs):
    check(*attention_case(opset, **attrs))


@pytest.mark.parametrize("attrs", [{}, {"is_causal": 1}])
def test_3d_heads_and_gqa(attrs):
    check(*attention_case(q=(2, 5, 32), k=(2, 6, 16), v=(2, 6, 24), q_num_heads=4, kv_num_heads=2, **attrs))
    check(*attention_case(q=(2, 5, 24), k=(2, 5, 24), q_num_heads=3, kv_num_heads=3, **attrs))


def test_gqa_4d_and_different_value_size():
    check(*attention_case(q=(2, 6, 3, 8), k=(2, 2, 7, 8), v=(2, 2, 7, 5), is_causal=1))


@pytest.mark.parametrize("mask", [(5, 6), (2, 1, 5, 6), (2, 4, 5, 6), ("bool", (5, 6)), ("bool", (2, 4, 5, 6))])
@pytest.mark.parametrize("causal", [0, 1])
def test_masks(mask, causal):
    check(*attention_case(mask=mask, is_causal=causal))


def test_short_mask_is_padded():
    # The spec pads a mask shorter than the keys (-inf / False); ONNX Runtime refuses it.
    for mask in [(5, 4), ("bool", (5, 4))]:
        model, feeds = attention_case(mask=mask, k=(2, 4, 6, 8))
        with pytest.raises(ort.capi.onnxruntime_pybind11_state.Fail, match="inconsistent total_sequence_length"):
            ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
        check(model, feeds, oracle="reference")


@pytest.mark.parametrize("causal", [0, 1])
def test_past_and_present(causal):
    check(*attention_case(q=(2, 4, 3, 8), k=(2, 4, 3, 8), past=4, mask=(3, 7), is_causal=causal,
                          outputs=("Y", "present_key", "present_value")))
    check(*attention_case(q=(2, 3, 24), k=(2, 3, 12), past=2, q_num_heads=4, kv_num_heads=2,
                          is_causal=causal, outputs=("Y", "present_key", "present_value")))


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_qk_matmul_output_modes(mode):
    check(*attention_case(mask=(5, 6), softcap=1.5, qk_matmul_output_mode=mode,
                          outputs=("Y", "", "", "qk_matmul_output")))


def test_fully_masked_rows_give_zeros():
    model, feeds = attention_case(mask=("bool", (5, 6)), outputs=("Y", "", "", "qk_matmul_output"),
                                  qk_matmul_output_mode=3)
    feeds["attn_mask"][1] = False
    graph = from_onnx(model)
    y, probs = run_reference(graph, *[feeds[v.name] for v in graph.inputs])
    assert np.all(y[:, :, 1] == 0) and np.all(probs[:, :, 1] == 0)
    assert np.all(np.isfinite(y))


@pytest.mark.parametrize("causal", [0, 1])
def test_nonpad_kv_seqlen(causal):
    check(*attention_case(opset=24, q=(3, 2, 2, 8), k=(3, 2, 6, 8), nonpad=[6, 4, 2], is_causal=causal))


@pytest.mark.parametrize("left,right,causal", [(2, -1, 1), (1, 2, 0), (-1, -1, 0), (0, 0, 0)])
def test_sliding_windows(left, right, causal):
    check(*attention_case(opset=25, q=(2, 3, 4, 8), k=(2, 3, 6, 8), left_window_size=left,
                          right_window_size=right, is_causal=causal))


def test_window_with_nonpad():
    check(*attention_case(opset=25, q=(2, 3, 4, 8), k=(2, 3, 8, 8), nonpad=[8, 5], mask=(1, 8),
                          left_window_size=2, is_causal=1))


def test_float16_with_softmax_precision():
    check(*attention_case(opset=24, dtype=np.float16, softmax_precision=1, mask=("bool", (5, 6)),
                          qk_matmul_output_mode=3, outputs=("Y", "", "", "qk_matmul_output")),
          rtol=2e-3, atol=2e-3)


HALF_CASES = [
    dict(q=(2, 3, 4, 8), k=(2, 3, 6, 8), is_causal=1),
    dict(q=(2, 4, 5, 8), k=(2, 2, 7, 8), mask=(5, 7)),                  # grouped-query, float mask
    dict(q=(1, 3, 6, 16), k=(1, 3, 6, 16), softcap=2.0, is_causal=1),
    dict(q=(2, 6, 24), k=(2, 9, 24), q_num_heads=3, kv_num_heads=3),    # 3-D inputs
]


@settings(max_examples=24, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(range(len(HALF_CASES))), dtype=st.sampled_from(["float16", "bfloat16"]),
       seed=st.integers(0, 2 ** 16))
def test_16bit_attention_rounds_as_its_function_body(case, dtype, seed):
    """Attention in float16 (bfloat16) is its function body of float16 nodes, each rounded to the
    dtype: compiled, the op and its expanded body give the same bits, within rtol 1e-3 of the ONNX
    reference of the body and of the op (computing in float32 and rounding once, as ONNX Runtime
    does, is not).  With softcap the reference's op goes on in float32 after the soft cap (its
    float32 attribute promotes the scores), so there only the body is the oracle."""
    dtype = np.dtype(dtype) if dtype == "float16" else pytest.importorskip("ml_dtypes").bfloat16
    model, feeds = attention_case(opset=23, dtype=dtype, seed=seed, **HALF_CASES[case])
    body = expanded(model)
    got = compile_and_run(model, feeds)[0]
    assert_close(got, onnx_reference(body, feeds)[0], rtol=1e-3, what="Attention against its body")
    if "softcap" not in HALF_CASES[case]:
        assert_close(got, onnx_reference(model, feeds)[0], rtol=1e-3, what="Attention against the op")
    np.testing.assert_array_equal(got.astype(np.float32), compile_and_run(body, feeds)[0].astype(np.float32))


def test_decomposition_uses_two_batched_matmuls_and_a_softmax():
    graph = from_onnx(attention_case(is_causal=1)[0])
    ops = [n.op for n in graph.nodes]
    assert ops.count("matmul") == 2 and ops.count("softmax") == 1
    assert "where" not in ops            # a constant causal mask masks no whole row: no guard


@pytest.mark.parametrize("kwargs,match", [
    (dict(q=(2, 5, 32), k=(2, 6, 16)), "q_num_heads"),
    (dict(q=(2, 3, 5, 8), k=(2, 2, 6, 8)), "grouped"),
    (dict(q=(2, 4, 5, 8), k=(2, 4, 6, 7)), "do not fit"),
    (dict(mask=(5, 9)), "longer"),
])
def test_errors(kwargs, match):
    model, _ = attention_case(**kwargs)
    with pytest.raises(ValueError, match=match):
        from_onnx(model)
