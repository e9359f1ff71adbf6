"""Sequence buckets (tensorforge/sequence_buckets.py): a model with a symbolic length, compiled
with `sequence_buckets`, runs a length that is not a bucket padded to the next bucket and
compiles nothing once that bucket exists, where padding leaves the outputs as they are (an
attention mask marks the padding); a model whose outputs read the padding (a mean over the
length, attention with no mask) is found out on its first padded call and compiled per length.
Every result is compared with the ONNX reference evaluator."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import tensorforge
from tensorforge.frontend import from_onnx
from tensorforge.sequence_buckets import _pad_array, checked_sequence_buckets

OPTS = {"target": "c -O1"}
WIDTH = 8


def attention(masked: bool = True, pooled: bool = False):
    """One self-attention layer over x[batch, seq, 8]; with `masked`, keys whose mask is 0 get
    -1e9 added to their scores, as BERT's exports do; with `pooled`, the output is its mean over
    the sequence."""
    r = np.random.default_rng(0)
    inits = {n: (r.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32) for n in ("wq", "wk", "wv")}
    inits.update(one=np.array(1.0, np.float32), big=np.array(-1e9, np.float32), axis1=np.array([1], np.int64))
    nodes = [helper.make_node("MatMul", ["x", w], [w[1]]) for w in ("wq", "wk", "wv")]
    nodes += [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
              helper.make_node("MatMul", ["q", "kt"], ["scores"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", WIDTH])]
    if masked:
        inputs.append(helper.make_tensor_value_info("mask", TensorProto.INT64, ["batch", "seq"]))
        nodes += [helper.make_node("Cast", ["mask"], ["maskf"], to=TensorProto.FLOAT),
                  helper.make_node("Sub", ["one", "maskf"], ["off"]),
                  helper.make_node("Mul", ["off", "big"], ["bias2"]),
                  helper.make_node("Unsqueeze", ["bias2", "axis1"], ["bias"]),
                  helper.make_node("Add", ["scores", "bias"], ["masked"])]
    nodes += [helper.make_node("Softmax", ["masked" if masked else "scores"], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "v"], ["ctx"]),
              helper.make_node("Add", ["ctx", "x"], ["y" if not pooled else "h"])]
    out_dims: list = ["batch", "seq", WIDTH]
    if pooled:
        nodes.append(helper.make_node("ReduceMean", ["h", "axis1"], ["y"], keepdims=0))
        out_dims = ["batch", WIDTH]
    graph = helper.make_graph(nodes, "attention", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                                          out_dims)],
                              initializer=[numpy_helper.from_array(np.asarray(a), n) for n, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


def _feeds(seq: int, masked: bool = True, batch: int = 2) -> dict:
    r = np.random.default_rng(seq)
    feeds = {"x": r.standard_normal((batch, seq, WIDTH)).astype(np.float32)}
    if masked:
        feeds["mask"] = np.ones((batch, seq), np.int64)
        feeds["mask"][0, seq // 2:] = 0           # the first sentence is padded by its user already
    return feeds


def _check(model, onnx_model, seq: int, masked: bool = True) -> None:
    feeds = _feeds(seq, masked)
    want = ReferenceEvaluator(onnx_model).run(None, feeds)[0]
    got = model.run(**feeds)[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_lengths_that_are_not_buckets_compile_nothing_once_their_bucket_exists():
    onnx_model = attention()
    model = tensorforge.compile(from_onnx(onnx_model), sequence_buckets=(8, 16), **OPTS)
    compiled = []
    for seq in (5, 7, 3, 8, 11, 16, 13, 20):
        before = model.info["specializations"]
        _check(model, onnx_model, seq)
        compiled.append(model.info["specializations"] - before)
    # 5: padded to 8 and, the first time, also run at 5 to check (two); 7 and 3 run at 8 (none);
    # 8 is a bucket; 11 compiles 16, which 16 and 13 reuse; 20 is above the largest bucket
    assert compiled == [2, 0, 0, 0, 1, 0, 0, 1]
    info = model.info["sequence_buckets"]
    assert info["symbol"] == "seq" and info["status"] == "verified"
    assert info["runs_as"] == {5: 8, 7: 8, 3: 8, 11: 16, 13: 16}


def test_a_model_whose_outputs_read_the_padding_is_compiled_per_length():
    for onnx_model, masked in ((attention(pooled=True), True), (attention(masked=False), False)):
        model = tensorforge.compile(from_onnx(onnx_model), sequence_buckets={"seq": (8,)}, **OPTS)
        with pytest.warns(RuntimeWarning, match="padding 'seq' to a sequence bucket changes its outputs"):
            _check(model, onnx_model, 5, masked)
        before = model.info["specializations"]
        _check(model, onnx_model, 6, masked)           # no more padding: its own specialization
        assert model.info["specializations"] == before + 1
        info = model.info["sequence_buckets"]
        assert info["status"] == "refused" and "output 0 differs" in info["reason"], info


def test_pad_values_fill_the_padding():
    """A model that masks with mask == 1 as padding: padding with 0 would attend to the padded
    keys, so the check refuses it; pad_values={"mask": 1} is right."""
    onnx_model = attention()
    inverted = onnx_model.graph
    for node in inverted.node:                       # scores + (mask) * -1e9: 1 marks padding
        if node.op_type == "Sub":
            node.CopyFrom(helper.make_node("Identity", ["maskf"], ["off"]))
    r = np.random.default_rng(3)
    feeds = {"x": r.standard_normal((2, 5, WIDTH)).astype(np.float32), "mask": np.zeros((2, 5), np.int64)}
    want = ReferenceEvaluator(onnx_model).run(None, feeds)[0]
    model = tensorforge.compile(from_onnx(onnx_model), sequence_buckets=(8,), pad_values={"mask": 1}, **OPTS)
    np.testing.assert_allclose(model.run(**feeds)[0], want, rtol=1e-4, atol=1e-5)
    assert model.info["sequence_buckets"]["status"] == "verified"
    wrong = tensorforge.compile(from_onnx(onnx_model), sequence_buckets=(8,), **OPTS)
    with pytest.warns(RuntimeWarning, match="changes its outputs"):
        np.testing.assert_allclose(wrong.run(**feeds)[0], want, rtol=1e-4, atol=1e-5)


def test_bad_options_say_what_is_wrong():
    program = from_onnx(attention())
    with pytest.raises(ValueError, match="'length', which is not a symbolic dimension"):
        tensorforge.compile(program, sequence_buckets={"length": (8,)}, **OPTS)
    with pytest.raises(ValueError, match="positive integers"):
        tensorforge.compile(program, sequence_buckets=(8, 0), **OPTS)
    with pytest.raises(ValueError, match="pad_values names \\['y'\\]"):
        tensorforge.compile(program, sequence_buckets=(8,), pad_values={"y": 0}, **OPTS)
    with pytest.raises(ValueError, match="pad_values needs sequence_buckets"):
        tensorforge.compile(program, sequence_buckets=None, pad_values={"mask": 0}, **OPTS)
    with pytest.raises(ValueError, match="'auto' or None; got 'sometimes'"):
        tensorforge.compile(program, sequence_buckets="sometimes", **OPTS)
    batch_only = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "relu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])]), opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(ValueError, match="no symbolic length besides the batch"):
        tensorforge.compile(from_onnx(batch_only), pad_values={"x": 0}, **OPTS)
    static = from_onnx(attention(), shapes={"x": (1, 4, WIDTH), "mask": (1, 4)})
    with pytest.raises(ValueError, match="this graph has none"):
        tensorforge.compile(static, sequence_buckets=(8,), **OPTS)


def test_the_symbol_is_found_when_there_is_one_besides_the_batch():
    assert checked_sequence_buckets((16, 8, 8), ["batch", "seq"], "batch") == (("seq",), (8, 16))
    assert checked_sequence_buckets({("past", "total"): (8,)}, ["batch", "past", "total"], "batch") == \
        (("past", "total"), (8,))
    assert checked_sequence_buckets((), ["batch", "seq"], "batch") is None
    with pytest.raises(ValueError, match="say which symbolic dimension"):
        checked_sequence_buckets((8,), ["batch", "seq", "past"], "batch")
    with pytest.raises(ValueError, match="names 'totl', which is not a symbolic dimension"):
        checked_sequence_buckets({("past", "totl"): (8,)}, ["batch", "past", "total"], "batch")
    with pytest.raises(ValueError, match="tuple of distinct symbols"):
        checked_sequence_buckets({("past", "past"): (8,)}, ["batch", "past"], "batch")


def test_a_torch_program_pads_the_dim_the_user_named():
    """from_torch with a torch.export.Dim("seq"): sequence_buckets={"seq": ...} names it (the
    program's own symbol is s0, s1, ...); a bucket above the Dim's maximum is not used."""
    torch = pytest.importorskip("torch")
    from tensorforge.frontend import from_torch

    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.query = torch.nn.Linear(WIDTH, WIDTH)

        def forward(self, x, mask):
            scores = self.query(x) @ x.transpose(1, 2) + (1.0 - mask[:, None, :].float()) * -1e9
            return scores.softmax(-1) @ x

    torch.manual_seed(0)
    module = Attention().eval()
    seq = torch.export.Dim("seq", min=2, max=12)
    x, mask = torch.randn(2, 5, WIDTH), torch.ones(2, 5, dtype=torch.int64)
    program = from_torch(module, (x, mask), dynamic_shapes={"x": {1: seq}, "mask": {1: seq}})
    model = tensorforge.compile(program, sequence_buckets={"seq": (8, 16)}, **OPTS)
    for n in (5, 7, 11):              # 11 would pad to 16, above the Dim's maximum: runs as 11
        x, mask = torch.randn(2, n, WIDTH), torch.ones(2, n, dtype=torch.int64)
        mask[0, n // 2:] = 0
        with torch.no_grad():
            want = module(x, mask).numpy()
        np.testing.assert_allclose(model(x, mask)[0], want, rtol=1e-4, atol=1e-5)
    info = model.info["sequence_buckets"]
    assert info["symbol"] == "seq" and info["status"] == "verified" and info["runs_as"] == {5: 8, 7: 8}
    assert model.info["specializations"] == 3        # 8, 5 (the check) and 11


def test_a_length_that_keeps_coming_earns_its_own_specialization():
    """Padding costs a length (its calls' time x (1 - n / bucket)); once that reaches the mean
    compile time, the length compiles as it is and runs so from then on."""
    onnx_model = attention()
    model = tensorforge.compile(from_onnx(onnx_model), sequence_buckets=(16,), **OPTS)
    _check(model, onnx_model, 5)                    # verifies padding: compiles 16 and 5
    padding = model._padding
    padding.paid(12, 16, seconds=0.5, compile_seconds=1.0)       # 0.125 s wasted: not yet
    assert padding.bucket_for(_feeds(12)) == (12, 16)
    padding.paid(12, 16, seconds=4.0, compile_seconds=1.0)       # 1.125 s: 12 runs as it is
    assert padding.bucket_for(_feeds(12)) is None
    before = model.info["specializations"]
    _check(model, onnx_model, 12)
    assert model.info["specializations"] == before + 1
    assert model.info["sequence_buckets"]["own"] == [12] and model.info["sequence_buckets"]["runs_as"][12] == 12
    padding.own_limit = 1                                        # the limit holds
    padding.paid(9, 16, seconds=100.0, compile_seconds=1.0)
    assert padding.bucket_for(_feeds(9)) == (9, 16)


def test_a_cache_that_grows_at_its_end_is_padded_at_its_start():
    """A decoder step with a key/value cache: present = Concat(past, new) along the length.
    Padding the past length at its end puts the padding in the middle of present, which no cut
    undoes; padded at its start, present keeps it at its front, where it is cut: the check
    finds the side that is right."""
    nodes = [helper.make_node("Concat", ["past", "x"], ["present"], axis=1)]
    graph = helper.make_graph(nodes, "step",
                              [helper.make_tensor_value_info("past", TensorProto.FLOAT, ["batch", "past", WIDTH]),
                               helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 1, WIDTH])],
                              [helper.make_tensor_value_info("present", TensorProto.FLOAT, ["batch", "total", WIDTH])])
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model = tensorforge.compile(from_onnx(onnx_model), sequence_buckets={"past": (8,)}, **OPTS)
    r = np.random.default_rng(0)
    for n in (5, 6):
        past, x = r.standard_normal((1, n, WIDTH)).astype(np.float32), r.standard_normal((1, 1, WIDTH)).astype(np.float32)
        np.testing.assert_array_equal(model(past, x)[0], np.concatenate([past, x], axis=1))
    info = model.info["sequence_buckets"]
    assert info["status"] == "verified" and info["side"] == "start" and info["runs_as"] == {5: 8, 6: 8}


def cached_attention(mask_dim: str):
    """One decoder step with a key/value cache, as generation exports run it: x[batch, seq, 8]
    the new tokens, past_k and past_v [batch, past, 8] the cache, mask[batch, mask_dim] over the
    past and new tokens (0: no weight); outputs y and the cache with the new keys appended."""
    r = np.random.default_rng(2)
    inits = {n: (r.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32) for n in ("wq", "wk", "wv")}
    inits.update(one=np.array(1.0, np.float32), big=np.array(-1e9, np.float32), axis1=np.array([1], np.int64))
    nodes = [helper.make_node("MatMul", ["x", w], [w[1]]) for w in ("wq", "wk", "wv")]
    nodes += [helper.make_node("Concat", ["past_k", "k"], ["present_k"], axis=1),
              helper.make_node("Concat", ["past_v", "v"], ["present_v"], axis=1),
              helper.make_node("Transpose", ["present_k"], ["kt"], perm=[0, 2, 1]),
              helper.make_node("MatMul", ["q", "kt"], ["scores"]),
              helper.make_node("Cast", ["mask"], ["maskf"], to=TensorProto.FLOAT),
              helper.make_node("Sub", ["one", "maskf"], ["off"]),
              helper.make_node("Mul", ["off", "big"], ["bias2"]),
              helper.make_node("Unsqueeze", ["bias2", "axis1"], ["bias"]),
              helper.make_node("Add", ["scores", "bias"], ["masked"]),
              helper.make_node("Softmax", ["masked"], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "present_v"], ["ctx"]),
              helper.make_node("Add", ["ctx", "x"], ["y"])]
    value = lambda name, dims: helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)  # noqa: E731
    graph = helper.make_graph(
        nodes, "cached_attention",
        [value("x", ["batch", "seq", WIDTH]), value("past_k", ["batch", "past", WIDTH]),
         value("past_v", ["batch", "past", WIDTH]),
         helper.make_tensor_value_info("mask", TensorProto.INT64, ["batch", mask_dim])],
        [value("y", ["batch", "seq", WIDTH]), value("present_k", ["batch", "total", WIDTH]),
         value("present_v", ["batch", "total", WIDTH])],
        initializer=[numpy_helper.from_array(np.asarray(a), n) for n, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("mask_dim, key", [("total", ("past", "total")), ("past + seq", "past")])
def test_a_generation_loop_with_a_key_value_cache_compiles_per_bucket(mask_dim, key):
    """A decoder with a key/value cache, stepped as generation runs it: a prompt of 3 tokens,
    then one token per step, the cache it returns passed back.  Each step's past length is new;
    with buckets, the past is padded at its start (the mask's 0 hides it) together with the mask
    over past and new tokens, named with it or written as an expression of it, and only the
    buckets compile.  Every step matches the ONNX reference evaluator."""
    onnx_model = cached_attention(mask_dim)
    reference = ReferenceEvaluator(onnx_model)
    model = tensorforge.compile(from_onnx(onnx_model), sequence_buckets={key: (8, 16)}, **OPTS)
    r = np.random.default_rng(3)
    past_k = past_v = np.zeros((2, 0, WIDTH), np.float32)
    compiled = {}
    for step in range(14):
        x = r.standard_normal((2, 3 if step == 0 else 1, WIDTH)).astype(np.float32)
        mask = np.ones((2, past_k.shape[1] + x.shape[1]), np.int64)
        mask[1, :2] = 0                                  # the second prompt was padded by its user
        feeds = {"x": x, "past_k": past_k, "past_v": past_v, "mask": mask}
        want = reference.run(None, feeds)
        before = model.info["specializations"]
        got = model.run(**feeds)
        compiled[past_k.shape[1]] = model.info["specializations"] - before
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
        past_k, past_v = got[1], got[2]
    info = model.info["sequence_buckets"]
    assert info["status"] == "verified" and info["side"] == "start", info
    assert info["runs_as"] == {n: 8 for n in range(3, 8)} | {n: 16 for n in range(9, 16)}
    # the prompt (past 0) compiles; past 3 compiles its bucket 8 and itself (the check); past 8
    # runs on the bucket 8; past 9 compiles 16; nothing else
    assert {n: c for n, c in compiled.items() if c} == {0: 1, 3: 2, 9: 1}, compiled


def test_a_length_that_grows_with_the_padded_one_unnamed_is_refused_with_a_hint():
    """The cache's mask over past and new tokens has a symbol of its own: padding the past
    alone gives the graph shapes it cannot take; padding is refused and the warning says to
    name the mask's symbol with the past's."""
    onnx_model = cached_attention("total")
    model = tensorforge.compile(from_onnx(onnx_model), sequence_buckets={"past": (8,)}, **OPTS)
    r = np.random.default_rng(4)
    feeds = {"x": r.standard_normal((1, 1, WIDTH)).astype(np.float32),
             "past_k": r.standard_normal((1, 5, WIDTH)).astype(np.float32),
             "past_v": r.standard_normal((1, 5, WIDTH)).astype(np.float32), "mask": np.ones((1, 6), np.int64)}
    with pytest.warns(RuntimeWarning, match=r"padded call failed.*name both: sequence_buckets=\{\('past', 'total'\)"):
        got = model.run(**feeds)
    for g, w in zip(got, ReferenceEvaluator(onnx_model).run(None, feeds)):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    assert model.info["sequence_buckets"]["status"] == "refused"


@pytest.mark.parametrize("direction, verified", [("forward", True), ("bidirectional", False)])
def test_an_lstm_over_time_pads_forward_only(direction, verified):
    """An ONNX LSTM over x[seq, batch, 8]: a forward LSTM's outputs at the first n steps do not
    read the steps after them, so padding is verified; a bidirectional one reads them backwards
    from the end, and the check refuses it."""
    dirs, hidden = (1 if direction == "forward" else 2), 6
    r = np.random.default_rng(1)
    inits = {"w": r.standard_normal((dirs, 4 * hidden, WIDTH)).astype(np.float32) * 0.3,
             "r": r.standard_normal((dirs, 4 * hidden, hidden)).astype(np.float32) * 0.3,
             "b": r.standard_normal((dirs, 8 * hidden)).astype(np.float32) * 0.1}
    node = helper.make_node("LSTM", ["x", "w", "r", "b"], ["y"], hidden_size=hidden, direction=direction)
    graph = helper.make_graph([node], "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                              ["seq", 1, WIDTH])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["seq", dirs, 1, hidden])],
                              initializer=[numpy_helper.from_array(a, n) for n, a in inits.items()])
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model = tensorforge.compile(from_onnx(onnx_model), sequence_buckets={"seq": (8, 16)}, **OPTS)
    reference = ReferenceEvaluator(onnx_model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for seq in (5, 7, 12):
            x = r.standard_normal((seq, 1, WIDTH)).astype(np.float32)
            np.testing.assert_allclose(model(x)[0], reference.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)
    info = model.info["sequence_buckets"]
    assert info["status"] == ("verified" if verified else "refused"), info
    assert bool(caught) != verified
    if verified:
        assert info["runs_as"] == {5: 8, 7: 8, 12: 16}


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(0, 4), min_size=1, max_size=4), data=st.data(),
       grow=st.integers(1, 3), side=st.sampled_from(["end", "start"]))
def test_padding_an_array_is_np_pad(shape, data, grow, side):
    """The padding of inputs equals np.pad with a constant, on either side, over any axes."""
    axes = data.draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, unique=True))
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    widths = [((0, grow) if side == "end" else (grow, 0)) if k in axes else (0, 0) for k in range(len(shape))]
    np.testing.assert_array_equal(_pad_array(a, axes, grow, side, -1.0), np.pad(a, widths, constant_values=-1.0))


def _generate(model, onnx_model, steps: int, seed: int = 3) -> dict:
    """`steps` decoder steps of cached_attention (a prompt of 3 tokens, then one token each),
    every output checked against the ONNX reference evaluator; {past length: specializations
    its step compiled}."""
    reference = ReferenceEvaluator(onnx_model)
    r = np.random.default_rng(seed)
    past_k = past_v = np.zeros((1, 0, WIDTH), np.float32)
    compiled = {}
    for step in range(steps):
        x = r.standard_normal((1, 3 if step == 0 else 1, WIDTH)).astype(np.float32)
        feeds = {"x": x, "past_k": past_k, "past_v": past_v,
                 "mask": np.ones((1, past_k.shape[1] + x.shape[1]), np.int64)}
        before = model.info["specializations"]
        got = model.run(**feeds)
        compiled[past_k.shape[1]] = model.info["specializations"] - before
        for g, w in zip(got, reference.run(None, feeds)):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
        past_k, past_v = got[1], got[2]
    return compiled


def test_by_default_a_length_that_keeps_changing_gets_buckets_of_its_own(capfd):
    """compile's default, sequence_buckets="auto": a generation loop over a key/value cache
    compiles per length for its first 8 past lengths, then pads them to AUTO_BUCKETS (16, 32,
    48, ...), with the mask's symbol, which kept a fixed distance from the past's, linked;
    padding is compared with the exact length on 3 calls before it is trusted.  40 steps
    compile 16 specializations instead of 40, each matching the ONNX reference."""
    onnx_model = cached_attention("total")
    model = tensorforge.compile(from_onnx(onnx_model), **OPTS)
    compiled = _generate(model, onnx_model, 40)
    info = model.info["sequence_buckets"]
    assert info["auto"] and info["symbol"] == "past" and info["linked"] == ("total",), info
    assert info["status"] == "verified" and info["side"] == "start" and info["checked"] == 3, info
    assert "has met 8 values of 'past'" in capfd.readouterr().err
    # past 0, 3..9: 8 lengths compiled as they came; then 10, 11, 12 each compile itself (the
    # check) and 10 its bucket 16; 13..15 run at 16, 16 is a bucket; 17 compiles 32, 33 compiles 48
    assert {n for n, c in compiled.items() if c} == {0, *range(3, 13), 17, 33}, compiled
    assert info["runs_as"][13] == 16 and info["runs_as"][40] == 48


def test_automatic_buckets_that_change_the_outputs_stop_quietly(capfd):
    """A model that averages over the length: the automatic buckets find on their first padded
    call that padding changes its outputs, say so in one line (no warning: the user asked for
    nothing) and compile per length as before."""
    onnx_model = attention(masked=False, pooled=True)
    model = tensorforge.compile(from_onnx(onnx_model), **OPTS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for seq in range(2, 14):
            _check(model, onnx_model, seq, masked=False)
    info = model.info["sequence_buckets"]
    assert info["auto"] and info["status"] == "refused" and "differs" in info["reason"], info
    assert "padding 'seq' to a sequence bucket changes its outputs" in capfd.readouterr().err
    assert model.info["specializations"] == 12 + 1       # every length, and the one bucket tried


def test_sequence_buckets_none_compiles_every_length():
    onnx_model = attention()
    model = tensorforge.compile(from_onnx(onnx_model), sequence_buckets=None, **OPTS)
    for seq in range(2, 12):
        _check(model, onnx_model, seq)
    assert "sequence_buckets" not in model.info and model.info["specializations"] == 10
