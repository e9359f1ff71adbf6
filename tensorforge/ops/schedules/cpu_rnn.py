"""CPU template `rnn_cell_packed.cpu`: one LSTM or GRU step (ops/nn_lstm_cell.py,
ops/nn_gru_cell.py) as one pass over the packed recurrent weight R.

Per block of L hidden units (L = the packing's lanes), the recurrent product of the G gates
accumulates in G L-wide vectors (`<op>_gates`, a local buffer the C compiler keeps in
registers) while the k loop streams the block's (H x G*L) slice of the packed R with unit
stride; the gate math then reads those registers: for the LSTM the block's new cell state into
a local vector (`lstm_cell_c`), then h and c written out (the state axis unrolled, the units
vectorized); for the GRU the new h.  The blocks are independent: they run on the thread pool, one
chunk of consecutive blocks per core, when the step has enough multiply-adds to pay for a
parallel region, which splits the GEMV, the step's whole cost, over the cores.  Within a chunk
the blocks are a serial loop, which loop partitioning splits so that every block whose units
are all in range runs its gate math on whole vectors (the vector math library), without the
guard of the last, partial block.

Readers fused onto the step are scheduled as stages of their own, row by row: the leading axes
one loop, the last (the hidden units) split by the vector width and vectorized.  The one that
matters is the layer's output sequence, the concatenation of every step's h (35 slices for a
35-step layer) fused onto the last step: with the axes fused into one flat loop, each element
would decode its step with a division and pick its source through a chain of 35 selects; along
rows, the step is the row index, the selects depend on it alone and the units are a plain
vector copy.
"""
from __future__ import annotations

from . import template
from .common import const_shape, schedule_rows, stages_by_name
from .cpu import complex_out

PARALLEL_MIN_MACS = 1 << 16       # below this a step runs on one thread: a parallel region costs more


@template("rnn_cell_packed.cpu")
def rnn_cell_packed(s, master_outs, outs, target, cfg=None) -> None:
    out = master_outs[0]
    stages = stages_by_name(out)
    gates = [t for name, t in stages.items() if name.endswith("_cell_gates")]
    if len(gates) != 1 or any(d == 0 for d in const_shape(out)):
        return complex_out(s, master_outs, outs, target, cfg)
    z = gates[0]
    for t in outs:
        if t is not out:
            schedule_rows(s, t, target)
    batch, hidden = const_shape(out)[0], const_shape(out)[-1]
    num_gates, lanes = const_shape(z)[-2:]

    ost = s[out]
    b, *state, u = ost.op.axis
    uo, ul = ost.split(u, factor=lanes)
    ost.reorder(b, uo, *state, ul)
    for ax in state:
        ost.unroll(ax)
    ost.vectorize(ul)
    block = ost.fuse(b, uo) if batch > 1 else uo
    if target.num_cores > 1 and batch * num_gates * hidden * hidden >= PARALLEL_MIN_MACS:
        # one chunk of blocks per core, the blocks of a chunk a serial loop: loop partitioning
        # (tir/passes/partition_loops.py, which leaves parallel loops whole) then peels the
        # blocks that pass the last unit off that loop, so the others run their gate math on
        # whole vectors without a guard
        chunk, block = ost.split(block, nparts=target.num_cores)
        ost.parallel(chunk)

    cell = stages.get("lstm_cell_c")
    if cell is not None:
        cst = s[cell]
        cst.set_scope("local")
        cst.compute_at(ost, block)
        cst.vectorize(cst.op.axis[-1])

    zst = s[z]
    zst.set_scope("local")
    zst.compute_at(ost, block)
    zb, zub, zg, zl = zst.op.axis
    (k,) = zst.op.reduce_axis
    zst.reorder(zb, zub, k, zg, zl)
    zst.unroll(zg)
    zst.vectorize(zl)
