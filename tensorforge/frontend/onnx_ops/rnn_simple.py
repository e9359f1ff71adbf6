"""ONNX RNN (the simple Elman recurrence) -> Graph, decomposed and unrolled over time (see
rnn_common for the scheme).

Per step, with activation f (default tanh):
    Ht = f(Xt Wi^T + Ht-1 Ri^T + Wbi + Rbi)
The Xt W^T + Wb + Rb terms of all steps come from one hoisted matmul.
"""
from __future__ import annotations

import functools

from ...graph.ir import Value
from ..onnx import converter
from . import rnn_common as rc
from . import rnn_graph as g


def _rnn_step(ctx, spec: rc.RNNSpec, act: tuple, r_d: Value, x_t: rc.StepInput,
              state: tuple) -> tuple:
    (h,) = state
    pre = g.add(ctx, x_t.all(), g.dense(ctx, h, r_d) if h is not None else None)
    return (rc.gate_activation(ctx, spec, act, pre),)


@converter("RNN")
def convert_rnn(ctx, inputs: list, attrs: dict) -> list:
    x, w, r, b, lens, h0 = (list(inputs) + [None] * 6)[:6]
    spec = rc.parse_spec(ctx, "RNN", inputs, attrs, 1, ("Tanh",))
    rc.check_optional_shape(spec, b, (len(spec.directions), 2 * spec.hidden), "B")
    xs = rc.time_major(ctx, spec, x)
    masks = rc.step_masks(ctx, spec, lens)
    ys, hs = [], []
    for d, direction in enumerate(spec.directions):
        bias = None
        if b is not None:
            wb, rb = g.split_equal(ctx, g.take(ctx, b, 0, d), 0, 2)
            bias = g.add(ctx, wb, rb)
        xw = g.add(ctx, g.dense(ctx, xs, rc.direction_weight(ctx, w, d)), bias)
        step = functools.partial(_rnn_step, ctx, spec, spec.activations[d][0], rc.direction_weight(ctx, r, d))
        state = (rc.initial_state(ctx, spec, h0, d, "initial_h"),)
        outs, (h,) = rc.unroll(ctx, spec, xw, state, step, direction == "reverse", masks)
        ys.append(outs)
        hs.append(h)
    return [rc.assemble_y(ctx, spec, ys), rc.assemble_state(ctx, spec, hs)]
