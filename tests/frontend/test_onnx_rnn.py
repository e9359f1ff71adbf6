"""ONNX LSTM / GRU / RNN converters: from_onnx + run_reference against ONNX Runtime, the shape of
the decomposed graph, and clear errors for bad attributes."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper  # noqa: E402

from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.reference import run_reference  # noqa: E402

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
OUTPUTS = {"LSTM": ("Y", "Y_h", "Y_c"), "GRU": ("Y", "Y_h"), "RNN": ("Y", "Y_h")}
INPUTS = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P")


def rnn_case(op: str, seq=5, batch=3, inp=4, hidden=6, direction="forward", layout=0, bias=False,
             init_h=False, init_c=False, peep=False, lens=None, lens_const=True, weights_const=True,
             dtype=np.float32, seed=0, **attrs):
    """(model, feeds) for one recurrent node with random weights."""
    rng = np.random.default_rng(seed)
    dirs = 2 if direction == "bidirectional" else 1
    gates = GATES[op]
    x_shape = (seq, batch, inp) if layout == 0 else (batch, seq, inp)
    state_shape = (dirs, batch, hidden) if layout == 0 else (batch, dirs, hidden)
    arrays = {"X": rng.normal(0, 1, x_shape), "W": rng.normal(0, 0.5, (dirs, gates * hidden, inp)),
              "R": rng.normal(0, 0.5, (dirs, gates * hidden, hidden))}
    if bias:
        arrays["B"] = rng.normal(0, 0.5, (dirs, 2 * gates * hidden))
    if lens is not None:
        arrays["sequence_lens"] = np.asarray(lens, np.int32)
    if init_h:
        arrays["initial_h"] = rng.normal(0, 1, state_shape)
    if init_c:
        arrays["initial_c"] = rng.normal(0, 1, state_shape)
    if peep:
        arrays["P"] = rng.normal(0, 0.5, (dirs, 3 * hidden))
    arrays = {k: (a if a.dtype == np.int32 else a.astype(dtype)) for k, a in arrays.items()}
    used = max(INPUTS.index(k) for k in arrays) + 1
    names = [k if k in arrays else "" for k in INPUTS[:used]]
    as_const = {"W", "R", "B", "P"} if weights_const else set()
    if lens_const:
        as_const.add("sequence_lens")
    inits = [numpy_helper.from_array(arrays[k], k) for k in names if k in as_const]
    feeds = {k: arrays[k] for k in names if k and k not in as_const}
    graph_inputs = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                    for k, a in feeds.items()]
    outs = OUTPUTS[op]
    node = helper.make_node(op, names, list(outs), hidden_size=hidden, direction=direction, layout=layout, **attrs)
    graph = helper.make_graph([node], "rnn", graph_inputs,
                              [helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), None)
                               for o in outs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model, feeds


def ort_run(model, feeds) -> list:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def ort_expected(model, feeds) -> list:
    """ONNX Runtime's outputs.  It lacks layout=1 (batch-major), so a batch-major node runs as its
    time-major twin on transposed inputs, and the outputs are transposed back."""
    node = model.graph.node[0]
    layout = next((a.i for a in node.attribute if a.name == "layout"), 0)
    if layout == 0:
        return ort_run(model, feeds)
    twin = onnx.ModelProto()
    twin.CopyFrom(model)
    for a in twin.graph.node[0].attribute:
        if a.name == "layout":
            a.i = 0
    swap = {"X": (1, 0, 2), "initial_h": (1, 0, 2), "initial_c": (1, 0, 2)}
    for init in twin.graph.initializer:
        if init.name in swap:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).transpose(swap[init.name]), init.name))
    for vi in twin.graph.input:
        if vi.name in swap:
            dims = vi.type.tensor_type.shape.dim
            d0, d1 = dims[0].dim_value, dims[1].dim_value
            dims[0].dim_value, dims[1].dim_value = d1, d0
    outs = ort_run(twin, {k: a.transpose(swap[k]) if k in swap else a for k, a in feeds.items()})
    return [outs[0].transpose(2, 0, 1, 3)] + [o.transpose(1, 0, 2) for o in outs[1:]]


def check_against_ort(model, feeds, rtol=1e-5, atol=1e-5):
    want = ort_expected(model, feeds)
    graph = from_onnx(model)
    got = run_reference(graph, *[feeds[v.name] for v in graph.inputs])
    assert len(got) == len(want)
    for name, g, w in zip([o.name for o in model.graph.output], got, want):
        assert g.shape == w.shape, f"{name}: shape {g.shape} != {w.shape}"
        assert g.dtype == w.dtype, f"{name}: dtype {g.dtype} != {w.dtype}"
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=name)
    return graph


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
def test_directions_and_layouts(op, direction, layout):
    check_against_ort(*rnn_case(op, direction=direction, layout=layout, bias=True, init_h=True,
                                init_c=op == "LSTM"))


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_defaults_without_optional_inputs(op):
    check_against_ort(*rnn_case(op))


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_weights_given_at_run_time(op):
    check_against_ort(*rnn_case(op, bias=True, init_h=True, weights_const=False, direction="bidirectional"))


def test_lstm_peepholes_and_input_forget():
    check_against_ort(*rnn_case("LSTM", bias=True, init_h=True, init_c=True, peep=True,
                                direction="bidirectional"))
    check_against_ort(*rnn_case("LSTM", bias=True, peep=True, input_forget=1))


@pytest.mark.parametrize("before_reset", [0, 1])
@pytest.mark.parametrize("init_h", [False, True])
def test_gru_linear_before_reset(before_reset, init_h):
    check_against_ort(*rnn_case("GRU", bias=True, init_h=init_h, linear_before_reset=before_reset,
                                direction="bidirectional"))


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_clip(op):
    check_against_ort(*rnn_case(op, bias=True, init_h=True, clip=0.7, seed=3))


@pytest.mark.parametrize("op,acts,alpha,beta", [
    ("RNN", ["Relu"], None, None),
    ("RNN", ["LeakyRelu"], [0.2], None),
    ("RNN", ["Sigmoid", "Affine"], [0.5], [0.1]),
    ("GRU", ["HardSigmoid", "Softsign"], [0.3], [0.4]),
    ("GRU", ["Sigmoid", "Elu"], [0.7], None),
    ("LSTM", ["HardSigmoid", "ScaledTanh", "Tanh"], [0.25, 0.9], [0.45, 1.1]),
    ("LSTM", ["Sigmoid", "Softplus", "ThresholdedRelu"], [0.2], None),
])
def test_activation_functions(op, acts, alpha, beta):
    direction = "bidirectional" if len(acts) == 2 * {"RNN": 1, "GRU": 2, "LSTM": 3}[op] else "forward"
    attrs = {"activations": acts}
    if alpha:
        attrs["activation_alpha"] = alpha
    if beta:
        attrs["activation_beta"] = beta
    check_against_ort(*rnn_case(op, bias=True, init_h=True, direction=direction, **attrs))


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("lens_const", [True, False])
def test_sequence_lengths(op, lens_const):
    check_against_ort(*rnn_case(op, bias=True, init_h=True, lens=[5, 3, 1], lens_const=lens_const,
                                direction="bidirectional"))


def test_full_sequence_lengths_add_no_mask():
    model, feeds = rnn_case("LSTM", lens=[5, 5, 5])
    graph = check_against_ort(model, feeds)
    assert not any(n.op == "where" for n in graph.nodes)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_float64_against_the_onnx_reference_evaluator(op):
    """ONNX Runtime's LSTM has no float64 kernel; the ONNX reference evaluator checks float64."""
    from onnx.reference import ReferenceEvaluator
    model, feeds = rnn_case(op, bias=True, init_h=True, dtype=np.float64, direction="bidirectional")
    want = ReferenceEvaluator(model).run(None, feeds)
    graph = from_onnx(model)
    got = run_reference(graph, *[feeds[v.name] for v in graph.inputs])
    for g, w in zip(got, want):
        assert g.dtype == np.float64
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-10)


def test_graph_is_unrolled_with_a_hoisted_input_projection():
    """Forward LSTM with peepholes, 5 steps, zero initial state: one dense for the input projection
    of all steps plus one recurrent dense per step after the first; the gate math is elementwise ops."""
    graph = from_onnx(rnn_case("LSTM", seq=5, peep=True, weights_const=True)[0])
    dense = [n for n in graph.nodes if n.op == "dense"]
    assert len(dense) == 1 + 4
    assert dense[0].inputs[0].shape == (5 * 3, 4)              # [seq * batch, input]
    assert sum(n.op == "sigmoid" for n in graph.nodes) == 3 * 5
    assert sum(n.op == "tanh" for n in graph.nodes) == 2 * 5
    assert not any(n.op in ("transpose",) for n in graph.nodes)   # weight layout folded away


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_the_default_cell_is_one_lstm_cell_per_step(direction):
    """The cell torch.nn.LSTM exports (default activations, no peepholes): the input projection of
    all steps as one dense per direction, then one lstm_cell op per step, reading its step's rows
    of the projection and the previous state; no per-step matmul or gate ops."""
    dirs = 2 if direction == "bidirectional" else 1
    graph = from_onnx(rnn_case("LSTM", seq=5, bias=True, init_h=True, direction=direction)[0])
    cells = [n for n in graph.nodes if n.op == "lstm_cell"]
    assert len(cells) == 5 * dirs
    assert sum(n.op == "dense" for n in graph.nodes) == dirs
    assert not any(n.op in ("matmul", "sigmoid", "tanh") for n in graph.nodes)
    assert sorted(n.attrs["step"] for n in cells) == sorted(list(range(5)) * dirs)
    assert all(n.inputs[0].shape == (5 * 3, 4 * 6) and n.outputs[0].shape == (3, 2, 6) for n in cells)


@pytest.mark.parametrize("attrs,match", [
    ({"direction": "sideways"}, "direction"),
    ({"activations": ["Sigmoid", "Tanh"]}, "activations must list 3"),
    ({"activations": ["Sigmoid", "Tanh", "Gelu"]}, "Gelu"),
    ({"activations": ["Affine", "Tanh", "Tanh"]}, "activation_alpha"),
    ({"layout": 2}, "layout"),
    ({"clip": -1.0}, "clip"),
])
def test_bad_attributes_give_clear_errors(attrs, match):
    model, _ = rnn_case("LSTM")
    node = model.graph.node[0]
    for key in list(attrs):
        for a in list(node.attribute):
            if a.name == key:
                node.attribute.remove(a)
    node.attribute.extend([helper.make_attribute(k, v) for k, v in attrs.items()])
    with pytest.raises((ValueError, NotImplementedError), match=match):
        from_onnx(model)


def test_bad_weight_shape():
    model, _ = rnn_case("GRU", hidden=6)
    for a in model.graph.node[0].attribute:
        if a.name == "hidden_size":
            a.i = 5
    with pytest.raises(ValueError, match="W must have shape"):
        from_onnx(model)


def _kernels(op, direction, seq, batch, hidden):
    """(ONNX Runtime's outputs, ours, kernel labels) of a compiled default cell."""
    import tensorforge

    extra = {"init_c": True} if op == "LSTM" else {"linear_before_reset": 1}
    model, feeds = rnn_case(op, seq=seq, batch=batch, inp=5, hidden=hidden, direction=direction,
                            bias=True, init_h=True, **extra)
    want = ort_run(model, feeds)
    graph = from_onnx(model)
    compiled = tensorforge.compile(graph, target="c")
    return want, compiled(*[feeds[v.name] for v in graph.inputs]), compiled.spec.labels


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
@pytest.mark.parametrize("direction, batch, hidden", [("forward", 1, 40), ("bidirectional", 3, 21)])
def test_default_cell_compiles_to_one_kernel_per_step(op, direction, batch, hidden):
    """The cells torch exports, compiled: every output against ONNX Runtime, and one kernel per
    step (the recurrent product and the gates together); the other kernels (input projection,
    initial state, assembling Y and the final states) do not grow with the sequence."""
    dirs = 2 if direction == "bidirectional" else 1
    others = []
    for seq in (6, 3):
        want, got, labels = _kernels(op, direction, seq, batch, hidden)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
        steps = [lab for lab in labels if f"{op.lower()}_cell_packed" in lab]
        assert len(steps) == seq * dirs
        others.append(len(labels) - len(steps))
    assert others[0] == others[1]


def test_the_gru_cell_torch_exports_is_one_gru_cell_per_step():
    graph = from_onnx(rnn_case("GRU", seq=4, bias=True, linear_before_reset=1)[0])
    assert sum(n.op == "gru_cell" for n in graph.nodes) == 4
    assert not any(n.op in ("matmul", "sigmoid", "tanh") for n in graph.nodes)
    # linear_before_reset=0 needs the reset gate before the recurrent product: decomposed
    graph = from_onnx(rnn_case("GRU", seq=4, bias=True)[0])
    assert not any(n.op == "gru_cell" for n in graph.nodes)
