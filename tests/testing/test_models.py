"""The model zoo: every model is a valid ONNX model that ONNX Runtime runs, builds are
deterministic, and tensorforge's frontend + NumPy references agree with ONNX Runtime."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from tensorforge.testing import models  # noqa: E402

EXPECTED_OUTPUT = {
    "resnet18": (2, 1000), "mobilenet_v1": (2, 1000), "lstm_lm": (35, 2, 10000), "dqn": (2, 18),
    "dcgan_generator": (2, 3, 64, 64), "bert_encoder": (2, 128, 256),
}


def _ort_run(model, inputs: dict) -> list:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, inputs)


@pytest.fixture(scope="module")
def built():
    """Every model at batch 2, built once for the module."""
    return {name: models.get(name, batch=2, seed=0) for name in models.NAMES}


def test_names_cover_the_papers_workloads():
    assert set(models.NAMES) == set(EXPECTED_OUTPUT)


@pytest.mark.parametrize("name", models.NAMES)
def test_model_is_valid_and_runs_in_onnxruntime(built, name):
    model, inputs = built[name]
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == 17
    (out,) = _ort_run(model, inputs)
    assert out.shape == EXPECTED_OUTPUT[name]
    assert np.all(np.isfinite(out))
    assert out.std() > 1e-2, f"{name}: output is nearly constant (std {out.std()})"


@pytest.mark.parametrize("name", ["dqn", "dcgan_generator"])
def test_same_seed_same_model_other_seed_other_weights(name):
    a, ia = models.get(name, batch=1, seed=3)
    b, ib = models.get(name, batch=1, seed=3)
    c, _ = models.get(name, batch=1, seed=4)
    assert a.SerializeToString() == b.SerializeToString()
    assert all(np.array_equal(ia[k], ib[k]) for k in ia)
    assert a.graph.initializer[0].raw_data != c.graph.initializer[0].raw_data


def test_outputs_depend_on_the_input():
    model, inputs = models.get("dqn", batch=1)
    (a,) = _ort_run(model, inputs)
    (b,) = _ort_run(model, {"frames": inputs["frames"][:, ::-1].copy()})
    assert not np.allclose(a, b)


def test_unknown_model_and_bad_batch():
    with pytest.raises(KeyError, match="resnet18"):
        models.get("resnet19")
    with pytest.raises(ValueError, match="batch"):
        models.get("dqn", batch=0)


@pytest.mark.parametrize("name", models.NAMES)
def test_frontend_reference_matches_onnxruntime(built, name):
    from tensorforge.frontend import from_onnx
    from tensorforge.graph.reference import run_reference

    model, inputs = built[name]
    (want,) = _ort_run(model, inputs)
    graph = from_onnx(model)
    (got,) = run_reference(graph, *[inputs[v.name] for v in graph.inputs])
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in ("lstm_lm", "resnet18") else n
                                  for n in models.NAMES])
def test_compiled_model_matches_onnxruntime(built, name):
    """The whole pipeline: frontend, graph passes, fusion, lowering, C backend, executor."""
    import tensorforge
    from tensorforge.frontend import from_onnx

    model, inputs = built[name]
    (want,) = _ort_run(model, inputs)
    graph = from_onnx(model)
    out = tensorforge.compile(graph, target="c -O1")(*[inputs[v.name] for v in graph.inputs])
    got = out[0] if isinstance(out, (list, tuple)) else out
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
