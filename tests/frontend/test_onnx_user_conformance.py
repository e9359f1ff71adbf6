"""A fixed subset of the ONNX backend conformance suite, run the way a user runs a model:
`from_onnx(path)` with no shapes and no constants, `tensorforge.compile`, call.  Every listed case
must pass; the list (user_conformance_cases.txt) covers every operator that passes at all.

The cases come from the installed onnx package's own generators
(`onnx.backend.test.loader.load_model_tests`), with the inputs, reference outputs and tolerances
they define; integer and bool outputs must match exactly.  The whole suite runs with
`python ../shared/onnx_conformance.py run --backend tests/onnx_backend.py:run_user --strict-int`.
"""
from __future__ import annotations

import functools
import warnings
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

CASES_FILE = Path(__file__).with_name("user_conformance_cases.txt")
# random outputs: only their shape and dtype are defined (as the suite's runner checks them)
RANDOM = ("test_bernoulli", "test_training_dropout")
CASES = [line.split()[0] for line in CASES_FILE.read_text().splitlines() if line.strip() and not line.startswith("#")]


@functools.lru_cache(maxsize=1)
def _suite() -> dict:
    from onnx.backend.test.loader import load_model_tests
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {c.name: c for c in load_model_tests(kind="node")}


def _value(v):
    """A data set's value as a user holds it: TensorProto (how the generators store bfloat16,
    float8, ...) as an array, a NumPy scalar as a 0-d array, sequences element-wise."""
    from onnx import numpy_helper
    if isinstance(v, onnx.TensorProto):
        return numpy_helper.to_array(v)
    if isinstance(v, (list, tuple)):
        return [_value(x) for x in v]
    return np.asarray(v) if isinstance(v, np.generic) else v


def _compare(got, want, rtol: float, atol: float, where: str, shape_only: bool = False) -> None:
    if want is None:
        assert got is None, f"{where}: expected an empty optional, got {type(got).__name__}"
        return
    if isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), f"{where}: expected a sequence of {len(want)}"
        for k, (g, w) in enumerate(zip(got, want)):
            _compare(g, w, rtol, atol, f"{where}[{k}]", shape_only)
        return
    want, got = np.asarray(want), np.asarray(got)
    assert got.shape == want.shape, f"{where}: shape {got.shape}, expected {want.shape}"
    if want.dtype == object:
        np.testing.assert_array_equal(got, want, err_msg=where)
        return
    assert got.dtype == want.dtype, f"{where}: dtype {got.dtype}, expected {want.dtype}"
    if shape_only:
        return
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=where)
        return
    if want.dtype.name not in ("float16", "float32", "float64"):     # bfloat16, float8, int4, ...
        got, want = got.astype(np.float32), want.astype(np.float32)
        rtol = max(rtol, 2 ** -6) if want.dtype.name == "bfloat16" else rtol
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=where)


def test_the_list_is_large_enough():
    assert len(CASES) >= 400 and len(set(CASES)) == len(CASES)


@pytest.mark.parametrize("name", CASES)
def test_case(name, tmp_path):
    import tensorforge
    from tensorforge.frontend import from_onnx
    case = _suite().get(name)
    if case is None:
        pytest.skip(f"the installed onnx package has no case {name}")
    path = tmp_path / "model.onnx"
    path.write_bytes(case.model.SerializeToString())
    model = tensorforge.compile(from_onnx(str(path)), target="c -O1")
    for k, (inputs, outputs) in enumerate(case.data_sets):
        got = model(*[_value(v) for v in inputs])
        assert len(got) == len(outputs), f"{name}: {len(got)} outputs, expected {len(outputs)}"
        for j, (g, w) in enumerate(zip(got, outputs)):
            _compare(g, _value(w), case.rtol, case.atol, f"{name} data set {k} output {j}", name.startswith(RANDOM))
