"""Batch buckets (tensorforge/batch_buckets.py): a model with a symbolic batch, compiled once and
called with batch sizes that are not buckets, runs them as chunks on the buckets' specializations,
compiling nothing once those exist; a model that mixes batch rows is compiled per batch size as
before.  Every result is compared with the ONNX reference evaluator."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import tensorforge
from tensorforge.batch_buckets import DEFAULT_BATCH_BUCKETS, batch_chunks, checked_buckets
from tensorforge.frontend import from_onnx

OPTS = {"target": "c -O1"}


def _model(nodes, inits: dict, out_dims: list, in_dims=("batch", 3, 6, 6)):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(in_dims))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, out_dims)
    graph = helper.make_graph(nodes, "m", [x], [y],
                              initializer=[numpy_helper.from_array(np.asarray(a), n) for n, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def classifier():
    """Conv, ReLU, a flatten through Shape/Gather/Concat/Reshape as torch.onnx.export writes
    x.view(x.size(0), -1), Gemm, Softmax over the classes."""
    r = np.random.default_rng(0)
    inits = {"w": r.standard_normal((4, 3, 3, 3)).astype(np.float32), "wb": r.standard_normal(4).astype(np.float32),
             "fc": r.standard_normal((5, 144)).astype(np.float32), "fcb": r.standard_normal(5).astype(np.float32),
             "zero": np.array([0], np.int64), "minus1": np.array([-1], np.int64)}
    nodes = [helper.make_node("Conv", ["x", "w", "wb"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Shape", ["r"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Concat", ["n", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["r", "target"], ["flat"]),
             helper.make_node("Gemm", ["flat", "fc", "fcb"], ["logits"], transB=1),
             helper.make_node("Softmax", ["logits"], ["y"], axis=1)]
    return _model(nodes, inits, ["batch", 5])


def centered():
    """x minus its mean over the batch: every row reads every other."""
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[0], keepdims=1),
             helper.make_node("Sub", ["x", "m"], ["y"])]
    return _model(nodes, {}, ["batch", 3, 6, 6])


def scaled_by_batch():
    """x times its batch size, read from Shape: a size-dependent constant."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], end=1),
             helper.make_node("Cast", ["s"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["x", "f"], ["y0"]),
             helper.make_node("Relu", ["y0"], ["y"])]
    return _model(nodes, {}, ["batch", 3, 6, 6], in_dims=("batch", 3, 6, 6))


def _check(model, onnx_model, rows: int) -> None:
    x = np.random.default_rng(rows).standard_normal((rows, 3, 6, 6)).astype(np.float32)
    want = ReferenceEvaluator(onnx_model).run(None, {"x": x})[0]
    np.testing.assert_allclose(model(x)[0], want, rtol=1e-4, atol=1e-5)


def test_batch_sizes_that_are_not_buckets_compile_nothing_once_the_buckets_exist():
    onnx_model = classifier()
    model = tensorforge.compile(from_onnx(onnx_model), batch_buckets=(1, 2, 4), **OPTS)
    compiled = []
    for rows in (3, 5, 7, 6, 4, 9, 1):
        before = model.info["specializations"]
        _check(model, onnx_model, rows)
        compiled.append(model.info["specializations"] - before)
    # no call compiles more than one model: 3 runs as 4[3] (bucket 4 padded), 5 as 4 + 1
    # (compiles 1), 7 as 4 + 2 + 1 (compiles 2); then nothing: 6 = 4 + 2, 4, 9 = 4 + 4 + 1, 1
    # (the five batch sizes that are not buckets ran in chunks)
    assert compiled == [1, 1, 1, 0, 0, 0, 0]
    assert model.info["batch_split"]["calls"] == 5 and not model.info["batch_split"]["not_split"]


def test_without_buckets_every_batch_size_compiles():
    onnx_model = classifier()
    model = tensorforge.compile(from_onnx(onnx_model), batch_buckets=(), **OPTS)
    for rows in (3, 5, 3):
        _check(model, onnx_model, rows)
    assert model.info["specializations"] == 2 and model.info["batch_split"]["calls"] == 0


@pytest.mark.parametrize("build, says", [(centered, "reduce_mean"),
                                         (scaled_by_batch, "converts to another graph")])
def test_a_model_that_mixes_batch_rows_is_compiled_per_batch_size(build, says):
    onnx_model = build()
    model = tensorforge.compile(from_onnx(onnx_model), batch_buckets=(1, 2), **OPTS)
    for rows in (3, 5):
        _check(model, onnx_model, rows)
    assert model.info["batch_split"]["calls"] == 0
    assert any(says in why for why in model.info["batch_split"]["not_split"].values())


def test_bad_bucket_sets_are_refused():
    program = from_onnx(classifier())
    with pytest.raises(ValueError, match="must include 1"):
        tensorforge.compile(program, batch_buckets=(2, 4))
    with pytest.raises(ValueError, match="positive integers"):
        tensorforge.compile(program, batch_buckets=(1, 0))
    assert checked_buckets(None) == () and checked_buckets([4, 1, 2, 2]) == (1, 2, 4)


@given(st.integers(0, 1000), st.sets(st.integers(2, 100), max_size=5))
def test_chunks_add_up_to_the_batch_from_the_largest_bucket_down(rows, others):
    buckets = checked_buckets({1, *others})
    chunks = batch_chunks(rows, buckets)
    assert sum(chunks) == rows and all(c in buckets for c in chunks)
    assert chunks == sorted(chunks, reverse=True)
    assert all(rows - sum(chunks[:k]) < b or b > chunks[k]                  # never a smaller bucket
               for k in range(len(chunks)) for b in buckets if b > chunks[k])


def test_a_padded_chunk_gives_the_rows_it_carries(monkeypatch):
    """Batch 3 padded to one chunk of 4 (its last row repeated): the outputs of the 3 rows, as
    the reference computes them; the chunk ran on the specialization for 4."""
    from tensorforge.batch_buckets import BatchSplit
    monkeypatch.setattr(BatchSplit, "plan", lambda self, rows, plans, missing=None: plans[-1])
    onnx_model = classifier()
    model = tensorforge.compile(from_onnx(onnx_model), batch_buckets=(1, 2, 4), **OPTS)
    for _ in range(2):
        _check(model, onnx_model, 3)
    assert model.info["specializations"] == 1 and model.info["batch_split"]["calls"] == 2
    (split,) = [v for v in model._splits.values() if not isinstance(v, str)]
    assert list(split.timings[3]) == [((4, 3),)]


def test_candidate_plans_and_the_choice_between_them():
    from tensorforge.batch_buckets import BatchSplit, candidate_plans
    assert candidate_plans(3, (1, 2, 4)) == [((2, 2), (1, 1)), ((4, 3),)]
    assert candidate_plans(5, (1, 2, 4, 8)) == [((4, 4), (1, 1))]                 # 8 is 1.6x the rows
    assert candidate_plans(7, (1, 2, 4)) == [((4, 4), (2, 2), (1, 1)), ((4, 4), (4, 3))]
    assert candidate_plans(6, (1, 2, 4)) == [((4, 4), (2, 2))]                     # 2 left: a bucket
    split = BatchSplit(graph=None, inputs=(0,), axes={}, rows=3)
    exact, pad = candidate_plans(3, (1, 2, 4))
    assert split.plan(3, [exact, pad]) == exact
    flat = BatchSplit(graph=None, inputs=(0,), axes={}, rows=3)    # a row costs the same in any bucket
    for _ in range(3):
        flat.record(3, exact, [2.0, 1.0])
    flat.warm = {1: [1.0], 2: [2.0]}
    assert flat.plan(3, [exact, pad]) == exact                     # 4 rows at 1.0 cannot beat 3.0
    # a model whose chunks evict each other's weights: 2 + 1 takes 1.8 s where bucket 2 alone
    # takes 0.5 and bucket 1 0.4: padding to 4 (guessed at 4 x 0.25) is tried; after HOT_CALLS
    # calls, batch 3's own specialization, which is kept when it is the fastest.  Each plan runs
    # three times before it is judged, by its median
    split.warm = {1: [0.4, 0.45], 2: [0.5, 0.55]}
    for seconds in ([1.2, 0.6], [1.1, 0.7]):
        split.record(3, exact, seconds)
    assert split.plan(3, [exact, pad]) == exact                    # two runs are not enough
    split.record(3, exact, [1.2, 0.5])
    assert split.plan(3, [exact, pad]) == pad
    for seconds in (1.5, 1.4, 1.4):
        split.record(3, pad, [seconds])
    assert split.plan(3, [exact, pad]) == pad                      # the faster of the two
    for _ in range(2):
        split.record(3, pad, [1.4])
    assert split.plan(3, [exact, pad]) == ((3, 3),)
    # its first run after its compile is slow; the median of its three is its warm time
    for seconds in (2.5, 0.8, 0.75):
        assert split.plan(3, [exact, pad]) == ((3, 3),)
        split.record(3, ((3, 3),), [seconds])
    assert split.plan(3, [exact, pad]) == ((3, 3),) and split.best(3) == ((3, 3),)


def test_no_call_compiles_more_than_one_model():
    from tensorforge.batch_buckets import BatchSplit, candidate_plans
    have: set = set()

    def missing(plan):
        return len({b for b, _ in plan} - have)

    split = BatchSplit(graph=None, inputs=(0,), axes={}, rows=5)
    exact, = candidate_plans(5, (1, 2, 4, 8))
    assert split.plan(5, [exact], missing) == ((5, 5),)          # 4 + 1 would compile two
    have |= {1}
    assert split.plan(5, [exact], missing) == exact               # now one


def test_default_buckets_cut_a_batch_into_few_chunks():
    assert batch_chunks(7, DEFAULT_BATCH_BUCKETS) == [4, 2, 1]
    assert batch_chunks(100, DEFAULT_BATCH_BUCKETS) == [64, 32, 4]
    assert batch_chunks(16, DEFAULT_BATCH_BUCKETS) == [16]


def test_a_torch_program_with_a_batch_dim_runs_in_buckets():
    """from_torch with torch.export.Dim on the batch: the same buckets, each result as eager."""
    torch = pytest.importorskip("torch")
    from tensorforge.frontend import from_torch
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                              torch.nn.Linear(144, 5), torch.nn.Softmax(dim=1)).eval()
    batch = torch.export.Dim("batch", min=1, max=64)
    model = tensorforge.compile(from_torch(net, (torch.randn(2, 3, 6, 6),), dynamic_shapes={"input": {0: batch}}),
                                batch_buckets=(1, 2, 4), **OPTS)
    compiled = []
    for rows in (3, 5, 7):
        x = torch.randn(rows, 3, 6, 6)
        before = model.info["specializations"]
        with torch.no_grad():
            want = net(x).numpy()
        np.testing.assert_allclose(model(x)[0], want, rtol=1e-4, atol=1e-5)
        compiled.append(model.info["specializations"] - before)
    assert compiled == [1, 1, 1] and model.info["batch_split"]["calls"] == 3      # 4[3], 4 + 1, 4 + 2 + 1
