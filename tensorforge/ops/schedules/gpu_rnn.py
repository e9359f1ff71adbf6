"""GPU template `rnn_cell_packed.gpu`: one LSTM or GRU step (ops/nn_lstm_cell.py,
ops/nn_gru_cell.py) as one kernel, with R packed by the graph pass `alter_layout_rnn`.

The step is a GEMV (h_{t-1} R^T, the step's whole cost) followed by the gate math.  Each thread
owns `rows` hidden units of one batch row: it accumulates the G gate sums of those units (the
four LSTM gates of a unit together, or the three GRU gates) in registers while it walks k, then
applies the gate math to them and writes h (and, for the LSTM, c) of its units.  Because a
thread holds every gate of its units, the cell update needs no other thread's result: the
product and the update are one kernel per step, with no workspace between them.

R is packed as (blocks, H, G, L) (L units per block, k-major): at each k the threads of one
block of L units read the G * L contiguous floats of that block, so neighbouring threads read
neighbouring addresses (one unit each when rows = 1).  The projected input of every step
(X W^T + biases) is one matmul ahead of the loop, scheduled by matmul.gpu.

Knobs: `rows` (hidden units per thread, a divisor of L) and `threads` (threads per block).  Both
only regroup the same sums over threads, so every config computes the same values.
An epilogue fused onto the step (rare: the state is read by the next step and by slices) gets a
launch of its own.
"""
from __future__ import annotations

from ...te import thread_axis
from ...te.space import as_config
from . import template
from .common import const_shape, stages_by_name
from .gpu import THREADS, complex_out, schedule_roots

THREAD_CHOICES = (32, 64, 128, 256)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@template("rnn_cell_packed.gpu", tunable=True)
def rnn_cell_packed(s, master_outs, outs, target, cfg=None) -> None:
    cfg = as_config(cfg)
    out = master_outs[0]
    stages = stages_by_name(out)
    gates = [t for name, t in stages.items() if name.endswith("_cell_gates")]
    if len(gates) != 1 or len(master_outs) != 1 or any(d == 0 for d in const_shape(out)):
        return complex_out(s, master_outs, outs, target, None)
    z = gates[0]
    lanes = const_shape(z)[-1]
    batch, hidden = const_shape(out)[0], const_shape(out)[-1]
    cfg.define_knob("rows", _divisors(lanes), default=1)
    cfg.define_knob("threads", list(THREAD_CHOICES), default=min(THREADS, 128))
    rows, threads = int(cfg["rows"].val), int(cfg["threads"].val)

    # the output: one thread per (batch row, `rows` units), the state axis (h, c) inside it.
    # threadIdx.x walks the units of a block of L (neighbouring threads, neighbouring columns of
    # the packed R), threadIdx.y and blockIdx.x the (batch row, block) pairs; uo and ulo stay
    # apart, so the gate sums a thread needs are an exact (G, rows) box of registers
    ost = s[out]
    b, *state, u = ost.op.axis
    uo, ul = ost.split(u, factor=lanes)
    ulo, uli = ost.split(ul, factor=rows)
    ost.reorder(b, uo, ulo, *state, uli)
    pairs = ost.fuse(b, uo)
    per_block = max(1, min(threads // (lanes // rows), batch * (-(-hidden // lanes))))
    bo, bi = ost.split(pairs, factor=per_block)
    ost.reorder(bo, bi, ulo, *state, uli)
    ost.bind(bo, thread_axis("blockIdx.x"))
    ost.bind(bi, thread_axis("threadIdx.y"))
    ost.bind(ulo, thread_axis("threadIdx.x"))
    for ax in state:
        ost.unroll(ax)

    # the LSTM's new cell state: once per unit, in registers, read by both h and c
    cell = stages.get("lstm_cell_c")
    if cell is not None:
        s[cell].set_scope("local")
        s[cell].compute_at(ost, ulo)

    # the gate sums of the thread's units: G x rows registers, k outermost
    zst = s[z]
    zst.set_scope("local")
    zst.compute_at(ost, ulo)
    zb, zub, zg, zl = zst.op.axis
    (k,) = zst.op.reduce_axis
    zst.reorder(zb, zub, k, zg, zl)
    zst.unroll(zg)
    zst.unroll(zl)
    schedule_roots(s, skip={out.op})
