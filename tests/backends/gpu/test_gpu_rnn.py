"""The recurrent step on GPUs (ops/schedules/gpu_rnn.py): an LSTM / GRU step with a constant R is
packed by alter_layout_rnn and scheduled by rnn_cell_packed.gpu, one kernel per step with every
gate of a thread's units in registers.  Checked on OpenCL against NumPy (each knob setting) and
ONNX Runtime (whole ONNX LSTMs), and compiled to a cubin for sm_90 with NVRTC."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

import tensorforge
from tensorforge.autotune import extract_tasks
from tensorforge.autotune.records import Record, RecordWriter
from tensorforge.graph.builder import GraphBuilder

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "frontend"))
from test_onnx_rnn import ort_run, rnn_case  # noqa: E402


def _sig(v):
    return 1 / (1 + np.exp(-v))


def lstm_step(xw, state, r, step):
    """The ONNX LSTM equations for one step (gate order i, o, f, c)."""
    batch, _, hidden = state.shape
    z = xw[step * batch:(step + 1) * batch] + state[:, 0] @ r.T
    i, o, f, c = (z[:, k * hidden:(k + 1) * hidden] for k in range(4))
    c_new = _sig(f) * state[:, 1] + _sig(i) * np.tanh(c)
    return np.stack([_sig(o) * np.tanh(c_new), c_new], axis=1)


def gru_step(xw, h, r, rbh, step):
    """The ONNX GRU equations for one step, linear_before_reset (gate order z, r, h)."""
    batch, hidden = h.shape
    x = xw[step * batch:(step + 1) * batch]
    g = h @ r.T
    z = _sig(x[:, :hidden] + g[:, :hidden])
    rr = _sig(x[:, hidden:2 * hidden] + g[:, hidden:2 * hidden])
    cand = np.tanh(x[:, 2 * hidden:] + rr * (g[:, 2 * hidden:] + rbh))
    return (1 - z) * cand + z * h


def _cell_graph(kind: str, batch: int, hidden: int, steps: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    gates = 4 if kind == "lstm" else 3
    xw = rng.standard_normal((steps * batch, gates * hidden)).astype("float32")
    state = rng.standard_normal((batch, 2, hidden) if kind == "lstm" else (batch, hidden)).astype("float32")
    r = (rng.standard_normal((gates * hidden, hidden)) * 0.3).astype("float32")
    b = GraphBuilder("cell")
    x, s = b.input("xw", xw.shape, "float32"), b.input("state", state.shape, "float32")
    if kind == "lstm":
        y = b.add1("lstm_cell", [x, s, b.const(r, "r")], {"step": steps - 1})
        expected = lstm_step(xw, state, r, steps - 1)
    else:
        rbh = rng.standard_normal(hidden).astype("float32")
        y = b.add1("gru_cell", [x, s, b.const(r, "r"), b.const(rbh, "rbh")], {"step": steps - 1})
        expected = gru_step(xw, state, r, rbh, steps - 1)
    return b.finish([y]), (xw, state), expected


def _compile(graph, target, config=None, tmp_path=None):
    records = None
    if config is not None:
        (task,) = [t for t in extract_tasks(graph, target=target) if t.template == "rnn_cell_packed.gpu"]
        records = str(tmp_path / "tune.jsonl")
        full = task.config_space.from_json({**task.config_space.default_config().to_json(), **config})
        with RecordWriter(records) as writer:
            writer.write(Record(task=task, config=full.to_json(), costs=(1e-6,)))
    model = tensorforge.compile(graph, target=target, records=records)
    if config is not None:
        assert model.info["tuned_groups"] == 1
    return model


def _kernel_symbols(model) -> list[str]:
    return [s["symbol"] for s in model.spec.steps if s["kind"] == "kernel"]


@pytest.mark.parametrize("kind,batch,hidden,config", [
    ("lstm", 1, 7, None),                              # hidden not a multiple of the block's lanes
    ("lstm", 3, 20, {"rows": 2, "threads": 32}),       # several blocks of threads
    ("lstm", 2, 9, {"rows": 4, "threads": 64}),
    ("gru", 2, 10, None),
    ("gru", 1, 13, {"rows": 2, "threads": 32}),
])
def test_recurrent_step_on_gpu_matches_numpy(gpu, tmp_path, kind, batch, hidden, config):
    graph, inputs, expected = _cell_graph(kind, batch, hidden, steps=3)
    model = _compile(graph, gpu, config, tmp_path)
    assert len(_kernel_symbols(model)) == 1                   # the GEMV and the gate math: one kernel
    rows = (config or {}).get("rows", 1)
    gates = 4 if kind == "lstm" else 3
    # each thread holds the gate sums of its `rows` units only, in registers
    assert re.search(rf"float {kind}_cell_gates\[{gates * rows}\];", model.source), model.source
    got = model(*inputs)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_rows_and_threads_are_the_templates_knobs():
    graph, _, _ = _cell_graph("lstm", 2, 16, steps=2)
    (task,) = [t for t in extract_tasks(graph, target="opencl") if t.template == "rnn_cell_packed.gpu"]
    knobs = task.config_space.default_config().to_json()
    assert set(knobs) == {"rows", "threads"}
    assert len(task.config_space) > 4


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_onnx_lstm_on_gpu_matches_onnxruntime(gpu, direction):
    """A whole ONNX LSTM: the input projection of every step as one matmul.gpu kernel, then one
    rnn_cell_packed kernel per step (not the generic complex.gpu schedule's three)."""
    model, feeds = rnn_case("LSTM", seq=4, batch=2, inp=5, hidden=6, bias=True, init_h=True, init_c=True,
                            direction=direction)
    compiled = tensorforge.compile(tensorforge.frontend.from_onnx(model), target=gpu)
    dirs = 2 if direction == "bidirectional" else 1
    cells = [s for s in _kernel_symbols(compiled) if "lstm_cell" in s]
    assert len(cells) == 4 * dirs and all("lstm_cell_packed" in s for s in cells)
    assert compiled.source.count("lstm_cell_gates[4];") == len(set(cells))    # equal steps share a kernel
    for got, exp in zip(compiled.run(**feeds), ort_run(model, feeds), strict=True):
        np.testing.assert_allclose(got, exp, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_recurrent_step_compiles_for_sm_90(nvrtc, tmp_path, kind):
    graph, _, _ = _cell_graph(kind, 2, 24, steps=2)
    model = _compile(graph, "cuda -arch=sm_90", {"rows": 4, "threads": 32}, tmp_path)
    assert model.program[:4] == b"\x7fELF"
    assert f"{kind}_cell_gates[{(4 if kind == 'lstm' else 3) * 4}];" in model.source
