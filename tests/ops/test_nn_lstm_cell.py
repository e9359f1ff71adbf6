"""lstm_cell, gru_cell and their packed forms (one LSTM / GRU step): the TE compute against the NumPy reference,
the packing, and the CPU template through the whole compiler (ONNX LSTMs compiled end to end:
tests/frontend/test_onnx_rnn.py)."""
from __future__ import annotations

import numpy as np
import pytest

import tensorforge
from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.reference import run_reference
from tensorforge.ops import get
from tensorforge.ops.nn_lstm_cell import pack_recurrent, unpack_recurrent
from tensorforge.ops.registry import OpError, TensorType
from tensorforge.ops.testing import check_op


def case(batch, hidden, steps, seed=0):
    rng = np.random.default_rng(seed)
    xw = rng.standard_normal((steps * batch, 4 * hidden)).astype("float32")
    state = rng.standard_normal((batch, 2, hidden)).astype("float32")
    r = (rng.standard_normal((4 * hidden, hidden)) * 0.3).astype("float32")
    return xw, state, r


def numpy_step(xw, state, r, step):
    """The ONNX LSTM equations for one step, written out (gate order i, o, f, c)."""
    batch, _, hidden = state.shape
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    z = xw[step * batch:(step + 1) * batch] + state[:, 0] @ r.T
    i, o, f, c = (z[:, k * hidden:(k + 1) * hidden] for k in range(4))
    c_new = sig(f) * state[:, 1] + sig(i) * np.tanh(c)
    return np.stack([sig(o) * np.tanh(c_new), c_new], axis=1)


def test_pack_recurrent_groups_the_four_gates_of_each_block_of_units():
    r = np.arange(4 * 5 * 5, dtype="float32").reshape(20, 5)
    rp = pack_recurrent(r, 4)                      # 2 blocks of 4 units, the second padded
    assert rp.shape == (2, 5, 4, 4)
    for ub in range(2):
        for k in range(5):
            for g in range(4):
                for ul in range(4):
                    u = ub * 4 + ul
                    assert rp[ub, k, g, ul] == (r[g * 5 + u, k] if u < 5 else 0)
    np.testing.assert_array_equal(unpack_recurrent(rp, 5), r)


@pytest.mark.parametrize("batch, hidden, step", [(1, 7, 0), (3, 20, 2)])
def test_lstm_cell_reference_and_compute(batch, hidden, step):
    xw, state, r = case(batch, hidden, 3)
    got = check_op("lstm_cell", [xw, state, r], {"step": step}, rtol=1e-5, atol=1e-5)[0]
    np.testing.assert_allclose(got, numpy_step(xw, state, r, step), rtol=1e-5, atol=1e-5)
    got = check_op("lstm_cell_packed", [xw, state, pack_recurrent(r, 8)], {"step": step}, rtol=1e-5, atol=1e-5)[0]
    np.testing.assert_allclose(got, numpy_step(xw, state, r, step), rtol=1e-5, atol=1e-5)


def test_bad_shapes_give_clear_errors():
    op = get("lstm_cell")
    with pytest.raises(OpError, match="state must have shape"):
        op.infer_types([TensorType((6, 16), "float32"), TensorType((2, 4), "float32"),
                        TensorType((16, 4), "float32")], {"step": 0})
    with pytest.raises(OpError, match="step 3 is outside the 3 steps"):
        op.infer_types([TensorType((6, 16), "float32"), TensorType((2, 2, 4), "float32"),
                        TensorType((16, 4), "float32")], {"step": 3})


@pytest.mark.parametrize("batch, hidden", [(1, 40), (3, 37), (2, 130)])
def test_compiled_step_matches_the_reference(batch, hidden):
    """Through the graph passes (R packed at compile time) and the CPU template: the gate
    registers' tail block (hidden not a multiple of the lanes) and batches above one."""
    xw, state, r = case(batch, hidden, 4)
    b = GraphBuilder("cell")
    x, s = b.input("xw", xw.shape, "float32"), b.input("state", state.shape, "float32")
    g = b.finish([b.add1("lstm_cell", [x, s, b.const(r)], {"step": 2})])
    model = tensorforge.compile(g, target="c")
    assert model.source.count("lstm_cell_gates[") > 0          # the packed template ran
    got = model(xw, state)[0]
    np.testing.assert_allclose(got, numpy_step(xw, state, r, 2), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got, run_reference(g, xw, state)[0], rtol=1e-4, atol=1e-5)


def numpy_gru_step(xw, h, r, rbh, step):
    """The ONNX GRU equations (linear_before_reset, gate order z, r, h) for one step."""
    batch, hidden = h.shape
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    x, g = xw[step * batch:(step + 1) * batch], h @ r.T
    z = sig(x[:, :hidden] + g[:, :hidden])
    reset = sig(x[:, hidden:2 * hidden] + g[:, hidden:2 * hidden])
    cand = np.tanh(x[:, 2 * hidden:] + reset * (g[:, 2 * hidden:] + rbh))
    return (1 - z) * cand + z * h


@pytest.mark.parametrize("batch, hidden", [(1, 40), (3, 37)])
def test_gru_cell_reference_compute_and_compiled(batch, hidden):
    rng = np.random.default_rng(1)
    xw = rng.standard_normal((4 * batch, 3 * hidden)).astype("float32")
    h = rng.standard_normal((batch, hidden)).astype("float32")
    r = (rng.standard_normal((3 * hidden, hidden)) * 0.3).astype("float32")
    rbh = rng.standard_normal(hidden).astype("float32")
    want = numpy_gru_step(xw, h, r, rbh, 1)
    np.testing.assert_allclose(check_op("gru_cell", [xw, h, r, rbh], {"step": 1})[0], want, rtol=1e-5, atol=1e-5)
    got = check_op("gru_cell_packed", [xw, h, pack_recurrent(r, 16), rbh], {"step": 1})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    b = GraphBuilder("gru")
    x, s = b.input("xw", xw.shape, "float32"), b.input("h", h.shape, "float32")
    g = b.finish([b.add1("gru_cell", [x, s, b.const(r), b.const(rbh)], {"step": 1})])
    model = tensorforge.compile(g, target="c")
    assert "gru_cell_gates[" in model.source
    np.testing.assert_allclose(model(xw, h)[0], want, rtol=1e-4, atol=1e-5)


def test_the_output_sequence_fused_onto_the_last_step_is_copied_row_by_row():
    """The layer's output sequence (each step's h sliced out and concatenated, as the ONNX LSTM's
    Y is built) fuses onto the last step; it is written as rows, one per step, with the units as
    vectors: no element decodes its step by dividing its flat index by the hidden size."""
    hidden, steps = 37, 5
    xw, state, r = case(1, hidden, steps)
    b = GraphBuilder("sequence")
    x, s = b.input("xw", xw.shape, "float32"), b.input("state", state.shape, "float32")
    rc = b.const(r)
    hs, want, st = [], [], state
    for t in range(steps):
        s = b.add1("lstm_cell", [x, s, rc], {"step": t})
        h = b.add1("slice", [s], {"axes": (1,), "starts": (0,), "ends": (1,), "steps": (1,)})
        hs.append(b.add1("reshape", [h], {"shape": (1, hidden)}))
        st = numpy_step(xw, st, r, t)
        want.append(st[:, 0])
    g = b.finish([b.add1("concat", hs, {"axis": 0})])
    model = tensorforge.compile(g, target="c")
    last = model.source[model.source.rfind("lstm_cell_gates["):]
    assert "concat[" in last and f"/ {hidden}" not in last and f"% {hidden}" not in last
    assert f"i0 < {steps}; ++i0)" in last                        # one row per step
    np.testing.assert_allclose(model(xw, state)[0], np.concatenate(want), rtol=1e-4, atol=1e-5)


def test_the_gate_math_runs_on_whole_vectors_in_every_block_but_the_last(monkeypatch):
    """650 units in 41 blocks of 16 (10 in the last), the blocks on the thread pool: every block
    whose units are all in range computes its gates on 16-lane vectors without a guard (the
    vector math library runs whole vectors; a guarded lane loop falls back to scalar calls).
    With 16 float32 lanes the gates are vectorized by tensorforge itself (the vector exp and
    tanh helpers); with fewer, they are a lane loop the C compiler vectorizes."""
    import tensorforge.target as target_mod
    monkeypatch.setattr(target_mod, "_host_num_cores", lambda: 2)      # the parallel schedule
    hidden = 650
    xw, state, r = case(1, hidden, 2)
    b = GraphBuilder("cell")
    x, s = b.input("xw", xw.shape, "float32"), b.input("state", state.shape, "float32")
    g = b.finish([b.add1("lstm_cell", [x, s, b.const(r)], {"step": 1})])
    model = tensorforge.compile(g, target="c")
    lanes = tensorforge.Target.parse("c").simd_lanes("float32")
    kernel = model.source[model.source.find("lstm_cell_gates["):]
    main = kernel[:kernel.find("for (int64_t k_1")]        # the blocks before the peeled ones
    whole = "tf_tanhf_x16(" in main and "*(tf_float32x16_u*)(lstm_cell + " in main if lanes == 16 else False
    assert (whole or f"< {lanes}; ++u)" in main) and "if (" not in main
    np.testing.assert_allclose(model(xw, state)[0], numpy_step(xw, state, r, 1), rtol=1e-4, atol=1e-5)
