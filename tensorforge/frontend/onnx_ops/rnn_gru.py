"""ONNX GRU -> Graph, decomposed and unrolled over time (see rnn_common for the scheme).

Per step, with gates in ONNX order z, r, h and activations f, g (default sigmoid, tanh):
    z = f(Xt Wz^T + Ht-1 Rz^T + Wbz + Rbz)
    r = f(Xt Wr^T + Ht-1 Rr^T + Wbr + Rbr)
    h~ = g(Xt Wh^T + (r * Ht-1) Rh^T + Rbh + Wbh)          linear_before_reset = 0
    h~ = g(Xt Wh^T + r * (Ht-1 Rh^T + Rbh) + Wbh)          linear_before_reset != 0
    Ht = (1 - z) * h~ + z * Ht-1
The Xt W^T terms and the biases outside the reset product come from one hoisted matmul.

The cell torch.nn.GRU exports (default activations sigmoid, tanh; linear_before_reset; no clip
or short sequences) becomes one `gru_cell` op per step (ops/nn_gru_cell.py): the recurrent
product and the gates in one kernel.  Other cells are decomposed into matmuls and elementwise
ops step by step.
"""
from __future__ import annotations

import functools

import numpy as np

from ...graph.ir import Value
from ..onnx import converter
from . import rnn_common as rc
from . import rnn_graph as g


def _gru_step(ctx, spec: rc.RNNSpec, acts: tuple, r_d: Value, rbh: Value | None, before_reset: bool,
              x_t: rc.StepInput, state: tuple) -> tuple:
    """One GRU step: (h,) -> (h',); a None state is all zeros."""
    (h,) = state
    hid = spec.hidden
    xz, xr, xh = x_t.gates(3)
    act_f, act_g = acts
    if h is None:
        hz = hr = hh = None
    elif before_reset:
        hz, hr, hh = g.split_equal(ctx, g.dense(ctx, h, r_d), 1, 3)
    else:
        hz, hr = g.split_equal(ctx, g.dense(ctx, h, g.slice_axis(ctx, r_d, 0, 0, 2 * hid)), 1, 2)
    z = rc.gate_activation(ctx, spec, act_f, g.add(ctx, xz, hz))
    r = rc.gate_activation(ctx, spec, act_f, g.add(ctx, xr, hr))
    if before_reset:
        recur = g.add(ctx, hh, rbh)
        recur = g.mul(ctx, r, recur) if recur is not None else None
    else:
        recur = g.dense(ctx, g.mul(ctx, r, h), g.slice_axis(ctx, r_d, 0, 2 * hid, 3 * hid)) if h is not None else None
    cand = rc.gate_activation(ctx, spec, act_g, g.add(ctx, xh, recur))
    keep = g.sub(ctx, g.scalar(ctx, 1, spec.dtype), z)
    h_new = g.add(ctx, g.mul(ctx, keep, cand), g.mul(ctx, z, h) if h is not None else None)
    return (h_new,)


def _biases(ctx, spec: rc.RNNSpec, b: Value | None, d: int, before_reset: bool) -> tuple:
    """(bias added to the input projection [3 * hidden], Rbh kept apart for linear_before_reset)."""
    if b is None:
        return None, None
    hid = spec.hidden
    bd = g.take(ctx, b, 0, d)
    wb, rb = g.split_equal(ctx, bd, 0, 2)
    if not before_reset:
        return g.add(ctx, wb, rb), None
    zr = g.add(ctx, g.slice_axis(ctx, wb, 0, 0, 2 * hid), g.slice_axis(ctx, rb, 0, 0, 2 * hid))
    input_bias = g.concat(ctx, [zr, g.slice_axis(ctx, wb, 0, 2 * hid, 3 * hid)], 0)
    return input_bias, g.slice_axis(ctx, rb, 0, 2 * hid, 3 * hid)


DEFAULT_ACTIVATIONS = (("sigmoid", None, None), ("tanh", None, None))


def _plain_cell(spec: rc.RNNSpec, before_reset: bool, masks: list | None) -> bool:
    """Whether every direction runs the cell `gru_cell` computes."""
    acts = all(tuple((name.lower(), a, b) for name, a, b in d) == DEFAULT_ACTIVATIONS for d in spec.activations)
    return acts and before_reset and spec.clip is None and masks is None and spec.dtype == "float32"


def _cell_steps(ctx, spec: rc.RNNSpec, xw: Value, r_d: Value, rbh: Value | None, h: Value | None,
                reverse: bool) -> tuple[list, Value]:
    """One gru_cell per step over the projected input: (h of every step in time order, last h)."""
    if rbh is None:
        rbh = ctx.const(np.zeros((spec.hidden,), spec.dtype))
    if h is None:
        h = ctx.const(np.zeros((spec.batch, spec.hidden), spec.dtype))
    outs: list = [None] * spec.seq
    for t in (range(spec.seq - 1, -1, -1) if reverse else range(spec.seq)):
        h = ctx.add1("gru_cell", [xw, h, r_d, rbh], {"step": t})
        outs[t] = h
    return outs, h


@converter("GRU")
def convert_gru(ctx, inputs: list, attrs: dict) -> list:
    x, w, r, b, lens, h0 = (list(inputs) + [None] * 6)[:6]
    spec = rc.parse_spec(ctx, "GRU", inputs, attrs, 3, ("Sigmoid", "Tanh"))
    rc.check_optional_shape(spec, b, (len(spec.directions), 6 * spec.hidden), "B")
    before_reset = bool(attrs.get("linear_before_reset", 0))
    xs = rc.time_major(ctx, spec, x)
    masks = rc.step_masks(ctx, spec, lens)
    plain = _plain_cell(spec, before_reset, masks)
    ys, hs = [], []
    for d, direction in enumerate(spec.directions):
        bias, rbh = _biases(ctx, spec, b, d, before_reset)
        xw = g.add(ctx, g.dense(ctx, xs, rc.direction_weight(ctx, w, d)), bias)
        if plain:
            outs, h = _cell_steps(ctx, spec, xw, rc.direction_weight(ctx, r, d), rbh,
                                  rc.initial_state(ctx, spec, h0, d, "initial_h"), direction == "reverse")
            ys.append(outs)
            hs.append(h)
            continue
        step = functools.partial(_gru_step, ctx, spec, spec.activations[d], rc.direction_weight(ctx, r, d),
                                 rbh, before_reset)
        state = (rc.initial_state(ctx, spec, h0, d, "initial_h"),)
        outs, (h,) = rc.unroll(ctx, spec, xw, state, step, direction == "reverse", masks)
        ys.append(outs)
        hs.append(h)
    return [rc.assemble_y(ctx, spec, ys), rc.assemble_state(ctx, spec, hs)]
