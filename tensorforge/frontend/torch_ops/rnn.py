"""ATen's one-layer LSTM (`aten.mkldnn_rnn_layer`) -> one `lstm_cell` op per time step.

PyTorch's decomposition of `aten.lstm` on the CPU (float32, inference) calls
`mkldnn_rnn_layer` once per layer and direction: input [T, B, I] (time-major), w_ih [4H, I],
w_hh [4H, H], b_ih and b_hh [4H], h0 and c0 [B, H]; it returns the output [T, B, H], the final
h and c, and a workspace.  That is the cell the ONNX LSTM converter hands to `lstm_cell`
(ops/nn_lstm_cell.py), so it is built the same way: one matmul projects the input of every step
(X W_ih^T + b_ih + b_hh), then each step is one `lstm_cell` on the [B, 2, H] state.  PyTorch
orders the gates i, f, g, o and `lstm_cell` i, o, f, c: the rows of the weights and biases are
permuted (folded at compile time for constant weights).  The decomposition makes a batch-first
input time-major before the call (its batch_first flag only echoes the module's), so the input
and output are always [T, B, ...].
"""
from __future__ import annotations

from ...graph.ir import Value
from ..onnx_ops import rnn_graph as g
from ..torch_convert import aten

# lstm_cell's gate blocks (i, o, f, c) as blocks of PyTorch's (i, f, g, o)
_GATE_ORDER = (0, 3, 1, 2)


def _cell_rows(ctx, v: Value, hidden: int) -> Value:
    """A [4H, ...] weight or [4H] bias with its gate blocks in lstm_cell's order."""
    return g.concat(ctx, [g.slice_axis(ctx, v, 0, k * hidden, (k + 1) * hidden) for k in _GATE_ORDER], 0)


@aten("mkldnn_rnn_layer")
def mkldnn_rnn_layer(ctx, a: dict):
    if int(a["mode"]) != 2:                  # oneDNN's algorithm number of the LSTM
        raise ctx.unsupported(f"RNN mode {a['mode']}: only the LSTM is supported")
    if a["batch_sizes"]:
        raise ctx.unsupported("packed sequences are not supported")
    x, hidden = a["input"], int(a["hidden_size"])
    steps, batch, width = x.shape
    if x.dtype != "float32":
        raise ctx.unsupported(f"dtype {x.dtype}: only float32 LSTMs are supported")
    w_ih, w_hh = _cell_rows(ctx, a["weight0"], hidden), _cell_rows(ctx, a["weight1"], hidden)
    bias = g.add(ctx, a["weight2"], a["weight3"]) if a["has_biases"] else None
    xw = g.dense(ctx, g.reshape(ctx, x, (steps * batch, width)), w_ih)
    if bias is not None:
        xw = ctx.add1("add", [xw, _cell_rows(ctx, bias, hidden)])
    state = g.concat(ctx, [g.reshape(ctx, a["hx_"], (batch, 1, hidden)),
                           g.reshape(ctx, a["cx_"], (batch, 1, hidden))], 1)
    outs: list = [None] * steps
    order = range(steps - 1, -1, -1) if a["reverse"] else range(steps)
    for t in order:
        state = ctx.add1("lstm_cell", [xw, state, w_hh], {"step": t})
        outs[t] = g.reshape(ctx, g.slice_axis(ctx, state, 1, 0, 1), (1, batch, hidden))
    output = g.concat(ctx, outs, 0)
    h = g.reshape(ctx, g.slice_axis(ctx, state, 1, 0, 1), (batch, hidden))
    c = g.reshape(ctx, g.slice_axis(ctx, state, 1, 1, 2), (batch, hidden))
    return output, h, c, None
