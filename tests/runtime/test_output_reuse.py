"""Output buffers: a call writes into the array the last call returned only when nothing
references it any more (runtime/executor.py `_reusable`); a result the caller keeps, or any
view or tensor of it, is never overwritten."""
import numpy as np
import pytest

import tensorforge
from tensorforge.graph.builder import GraphBuilder


def _model(shape):
    b = GraphBuilder("reuse")
    x = b.input("x", shape, "float32")
    return tensorforge.compile(b.finish([b.add1("relu", [x]), b.add1("sigmoid", [x])]))


@pytest.mark.parametrize("shape", [(3, 5), (256, 1024)])       # small (heap) and large (mmap) outputs
def test_kept_results_and_their_views_are_never_overwritten(shape):
    rng = np.random.default_rng(0)
    model = _model(shape)
    xs = [rng.standard_normal(shape).astype("float32") for _ in range(4)]
    kept = model(xs[0])
    view = model(xs[1])[0][1:]                  # only a view of the first output survives
    row = model(xs[2])[1][0]                     # a row of the second output
    for _ in range(3):
        model(xs[3])
    np.testing.assert_array_equal(kept[0], np.maximum(xs[0], 0))
    np.testing.assert_allclose(kept[1], 1 / (1 + np.exp(-xs[0])), rtol=1e-6)
    np.testing.assert_array_equal(view, np.maximum(xs[1], 0)[1:])
    np.testing.assert_allclose(row, (1 / (1 + np.exp(-xs[2])))[0], rtol=1e-6)


def test_a_dropped_result_is_written_again_with_the_new_values():
    rng = np.random.default_rng(1)
    model = _model((256, 1024))
    x1, x2 = (rng.standard_normal((256, 1024)).astype("float32") for _ in range(2))
    first = model(x1)[0]
    address = first.ctypes.data
    del first
    again = model(x2)[0]
    assert again.ctypes.data == address            # the same memory: no new pages
    np.testing.assert_array_equal(again, np.maximum(x2, 0))


def test_a_torch_tensor_sharing_a_result_keeps_it():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    model = _model((64, 64))
    x1, x2 = (rng.standard_normal((64, 64)).astype("float32") for _ in range(2))
    t = torch.from_numpy(model(x1)[0])
    model(x2)
    np.testing.assert_array_equal(t.numpy(), np.maximum(x1, 0))


def _batched_matmul_model():
    """A 3-D MatMul plus bias whose product goes back to (B, M, N) as the graph output."""
    rng = np.random.default_rng(3)
    b = GraphBuilder("batched")
    x = b.input("x", (4, 16, 7), "float32")
    w = b.const(rng.standard_normal((7, 96)).astype("float32"), "w")
    bias = b.const(rng.standard_normal((96,)).astype("float32"), "bias")
    graph = b.finish([b.add1("add", [b.add1("matmul", [x, w]), bias])])
    return graph, rng.standard_normal((4, 16, 7)).astype("float32")


def test_an_output_reshaped_from_a_computed_value_is_that_values_buffer(tmp_path):
    from tensorforge.graph.reference import run_reference
    graph, x = _batched_matmul_model()
    model = tensorforge.compile(graph)
    views = {n: v for n, v in model.spec.values.items() if v["where"] == "output_view"}
    assert list(views) == model.spec.outputs                     # the caller still gets (4, 16, 96)
    (source,) = [v["source"] for v in views.values()]
    assert model.spec.values[source]["where"] == "output"
    assert all("reshape" not in label for label in model.spec.labels)   # no reshape in any kernel
    want = run_reference(graph, x)[0]
    got = model(x)[0]
    assert got.shape == (4, 16, 96)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    kept = model(x)[0]
    other = model(np.zeros_like(x))[0]                             # a new buffer: `kept` is held
    np.testing.assert_allclose(kept, want, rtol=1e-5, atol=1e-5)
    assert not np.shares_memory(kept, other)
    again = tensorforge.load(model.export(str(tmp_path / "batched.tfm")))
    np.testing.assert_array_equal(again(x)[0], got)


def test_an_output_view_of_an_output_that_is_not_one_is_refused_at_load():
    import dataclasses

    from tensorforge.runtime.validate import SpecError, validate_spec
    graph, _ = _batched_matmul_model()
    model = tensorforge.compile(graph)
    values = {n: dict(v) for n, v in model.spec.values.items()}
    (name,) = [n for n, v in values.items() if v["where"] == "output_view"]
    values[name]["source"] = model.spec.inputs[0]
    with pytest.raises(SpecError, match="not an output"):
        validate_spec(dataclasses.replace(model.spec, values=values), model.params)
