"""CPU template `lstm_cell_packed.cpu`: one LSTM step (ops/nn_lstm_cell.py) as one pass over R.

Per block of L hidden units (L = the packing's lanes), the recurrent product of the four gates
accumulates in four L-wide vectors (`lstm_cell_gates`, a local buffer the C compiler keeps in
registers) while the k loop streams the block's (H x 4L) slice of the packed R with unit
stride; the gate math then reads those registers: the block's new cell state into a local
vector (`lstm_cell_c`), then h and c written out (the state axis unrolled, the units
vectorized).  The blocks are independent: they run on the thread pool
when the step has enough multiply-adds to pay for a parallel region, which splits the GEMV, the
step's whole cost, over the cores.  Elementwise consumers fused onto the step (rare: the state
is read by the next step and by slices) are scheduled as stages of their own.
"""
from __future__ import annotations

from . import template
from .common import const_shape, schedule_elementwise_stage
from .cpu import complex_out

PARALLEL_MIN_MACS = 1 << 16       # below this a step runs on one thread: a parallel region costs more


@template("lstm_cell_packed.cpu")
def lstm_cell_packed(s, master_outs, outs, target, cfg=None) -> None:
    out = master_outs[0]
    cells = [t for t in out.op.input_tensors() if t.op.name == "lstm_cell_c"]
    gates = [t for t in cells[0].op.input_tensors() if t.op.name == "lstm_cell_gates"] if cells else []
    if len(cells) != 1 or len(gates) != 1 or any(d == 0 for d in const_shape(out)):
        return complex_out(s, master_outs, outs, target, cfg)
    c, z = cells[0], gates[0]
    for t in outs:
        if t is not out:
            schedule_elementwise_stage(s, t, target)
    batch, _, hidden = const_shape(out)
    lanes = const_shape(z)[-1]

    ost = s[out]
    b, state, u = ost.op.axis
    uo, ul = ost.split(u, factor=lanes)
    ost.reorder(b, uo, state, ul)
    ost.unroll(state)
    ost.vectorize(ul)
    block = ost.fuse(b, uo) if batch > 1 else uo

    cst = s[c]
    cst.set_scope("local")
    cst.compute_at(ost, block)
    _, cu = cst.op.axis
    cst.vectorize(cu)

    zst = s[z]
    zst.set_scope("local")
    zst.compute_at(ost, block)
    zb, zub, zg, zl = zst.op.axis
    (k,) = zst.op.reduce_axis
    zst.reorder(zb, zub, k, zg, zl)
    zst.unroll(zg)
    zst.vectorize(zl)

    if target.num_cores > 1 and batch * 4 * hidden * hidden >= PARALLEL_MIN_MACS:
        ost.parallel(block)
