"""ONNX LSTM -> Graph, decomposed and unrolled over time (see rnn_common for the scheme).

Per step, with gates in ONNX order i, o, f, c and activations f, g, h (default sigmoid, tanh,
tanh):
    i = f(Xt Wi^T + Ht-1 Ri^T + Pi * Ct-1 + Wbi + Rbi)      (input_forget=1: f_gate = 1 - i)
    f_gate = f(Xt Wf^T + Ht-1 Rf^T + Pf * Ct-1 + Wbf + Rbf)
    c~ = g(Xt Wc^T + Ht-1 Rc^T + Wbc + Rbc)
    Ct = f_gate * Ct-1 + i * c~
    o = f(Xt Wo^T + Ht-1 Ro^T + Po * Ct + Wbo + Rbo)
    Ht = o * h(Ct)
The Xt W^T + Wb + Rb terms of all steps come from one hoisted matmul.

The cell ONNX defines by default (activations sigmoid, tanh, tanh; no peepholes, clip,
input_forget or short sequences) becomes one `lstm_cell` op per step (ops/nn_lstm_cell.py): the
recurrent product and the gates in one kernel, the state (h, c) carried as one [batch, 2, hidden]
value.  Other cells are decomposed into matmuls and elementwise ops step by step.
"""
from __future__ import annotations

import functools

import numpy as np

from ...graph.ir import Value
from ..onnx import converter
from . import rnn_common as rc
from . import rnn_graph as g


def _lstm_step(ctx, spec: rc.RNNSpec, acts: tuple, r_d: Value, peep: list | None, input_forget: bool,
               x_t: rc.StepInput, state: tuple) -> tuple:
    """One LSTM step: (h, c) -> (h', c'); a None state is all zeros."""
    h, c = state
    if h is None:
        i, o, f, cand = x_t.gates(4)
    else:
        i, o, f, cand = g.split_equal(ctx, g.add(ctx, x_t.all(), g.dense(ctx, h, r_d)), 1, 4)
    act_f, act_g, act_h = acts
    if peep is not None and c is not None:
        i = g.add(ctx, i, g.mul(ctx, peep[0], c))
        f = g.add(ctx, f, g.mul(ctx, peep[2], c))
    i = rc.gate_activation(ctx, spec, act_f, i)
    if input_forget:
        f = g.sub(ctx, g.scalar(ctx, 1, spec.dtype), i)
    else:
        f = rc.gate_activation(ctx, spec, act_f, f)
    cand = rc.gate_activation(ctx, spec, act_g, cand)
    c_new = g.add(ctx, g.mul(ctx, f, c) if c is not None else None, g.mul(ctx, i, cand))
    if peep is not None:
        o = g.add(ctx, o, g.mul(ctx, peep[1], c_new))
    o = rc.gate_activation(ctx, spec, act_f, o)
    name, alpha, beta = act_h
    h_new = g.mul(ctx, o, g.activation(ctx, name, c_new, alpha, beta))
    return h_new, c_new


def _input_bias(ctx, spec: rc.RNNSpec, b: Value | None, d: int) -> Value | None:
    """Wb + Rb of direction d, [4 * hidden] (None without B)."""
    if b is None:
        return None
    bd = g.take(ctx, b, 0, d)
    wb, rb = g.split_equal(ctx, bd, 0, 2)
    return g.add(ctx, wb, rb)


DEFAULT_ACTIVATIONS = (("sigmoid", None, None), ("tanh", None, None), ("tanh", None, None))


def _plain_cell(ctx, spec: rc.RNNSpec, p: Value | None, input_forget: bool, masks: list | None) -> bool:
    """Whether every direction runs the default cell, which `lstm_cell` computes."""
    acts = all(tuple((name.lower(), a, b) for name, a, b in d) == DEFAULT_ACTIVATIONS for d in spec.activations)
    no_peep = p is None or (ctx.is_const(p) and not ctx.value_of(p, "P").any())
    return (acts and no_peep and spec.clip is None and not input_forget and masks is None
            and spec.dtype == "float32")


def _cell_steps(ctx, spec: rc.RNNSpec, xw: Value, r_d: Value, h0: Value | None, c0: Value | None,
                reverse: bool) -> tuple[list, Value, Value]:
    """One lstm_cell per step over the projected input: (h of every step in time order, h, c)."""
    zero = ctx.const(np.zeros((spec.batch, 1, spec.hidden), spec.dtype)) if h0 is None or c0 is None else None
    parts = [g.reshape(ctx, v, (spec.batch, 1, spec.hidden)) if v is not None else zero for v in (h0, c0)]
    state = g.concat(ctx, parts, 1)
    outs: list = [None] * spec.seq
    order = range(spec.seq - 1, -1, -1) if reverse else range(spec.seq)
    for t in order:
        state = ctx.add1("lstm_cell", [xw, state, r_d], {"step": t})
        outs[t] = g.take(ctx, state, 1, 0)
    return outs, outs[order[-1]], g.take(ctx, state, 1, 1)


@converter("LSTM")
def convert_lstm(ctx, inputs: list, attrs: dict) -> list:
    x, w, r, b, lens, h0, c0, p = (list(inputs) + [None] * 8)[:8]
    spec = rc.parse_spec(ctx, "LSTM", inputs, attrs, 4, ("Sigmoid", "Tanh", "Tanh"))
    num_dirs, hid = len(spec.directions), spec.hidden
    rc.check_optional_shape(spec, b, (num_dirs, 8 * hid), "B")
    rc.check_optional_shape(spec, p, (num_dirs, 3 * hid), "P")
    input_forget = bool(attrs.get("input_forget", 0))
    xs = rc.time_major(ctx, spec, x)
    masks = rc.step_masks(ctx, spec, lens)
    plain = _plain_cell(ctx, spec, p, input_forget, masks)
    ys, hs, cs = [], [], []
    for d, direction in enumerate(spec.directions):
        xw = g.add(ctx, g.dense(ctx, xs, rc.direction_weight(ctx, w, d)), _input_bias(ctx, spec, b, d))
        if plain:
            outs, h, c = _cell_steps(ctx, spec, xw, rc.direction_weight(ctx, r, d),
                                     rc.initial_state(ctx, spec, h0, d, "initial_h"),
                                     rc.initial_state(ctx, spec, c0, d, "initial_c"), direction == "reverse")
            ys.append(outs)
            hs.append(h)
            cs.append(c)
            continue
        peep = g.split_equal(ctx, g.take(ctx, p, 0, d), 0, 3) if p is not None else None
        step = functools.partial(_lstm_step, ctx, spec, spec.activations[d], rc.direction_weight(ctx, r, d),
                                 peep, input_forget)
        state = (rc.initial_state(ctx, spec, h0, d, "initial_h"), rc.initial_state(ctx, spec, c0, d, "initial_c"))
        outs, (h, c) = rc.unroll(ctx, spec, xw, state, step, direction == "reverse", masks)
        ys.append(outs)
        hs.append(h)
        cs.append(c)
    return [rc.assemble_y(ctx, spec, ys), rc.assemble_state(ctx, spec, hs), rc.assemble_state(ctx, spec, cs)]
