"""Default GPU schedules (CUDA, OpenCL): correct for every op, and the base the tuned GPU
templates (gpu_tiled.py, gpu_rnn.py, gpu_winograd.py) fall back to.

One idea throughout: a stage that is computed at the root becomes one kernel launch over its
output elements, flattened and split into blocks of `THREADS` threads (blockIdx.x, threadIdx.x);
a split that does not divide leaves a guard on the last block.  Every other stage is inlined
into its readers or computed inside a thread of its reader (in registers, scope "local").

- injective: each output one flat launch;
- reduction: a long one (ALLREDUCE_MIN terms or more per output: softmax and layer-norm rows,
  global pooling) one block per output element, its threads each reducing a strided share and
  then combining through shared memory (rfactor + tree all-reduce); a short one one thread per
  output element, the reduction serial inside it;
- complex (conv, dense, pooling, ...): the master's padding stages inlined (the pad test becomes
  a guard on the load); with an elementwise epilogue that reads the master at its own index (conv
  + bias + relu), the master is computed per thread of the epilogue's launch, in registers, so
  the fused group is one kernel (fusion as on the CPU); otherwise every root stage is a launch.
"""
from __future__ import annotations

from ...ir.expr import IntImm
from ...te import thread_axis
from ...te.tensor import ComputeOp
from . import template
from .common import inner_data_stages, known_shape, num_elements, reads_only_at

# Threads per block of a flat launch: a multiple of the warp (32) and of AMD's wavefront (64),
# small enough for any OpenCL device's work-group limit.
THREADS = 256
# A reduction of at least this many terms per output is split over the threads of a block; a
# shorter one runs serially in one thread per output element.
ALLREDUCE_MIN = 128


def bind_flat(s, t, threads: int = THREADS):
    """Fuse all of `t`'s data axes into one, split it into blocks of `threads` threads and bind
    them; returns the thread axis (a stage computed per thread attaches there), or None for a
    stage with no elements or no axes."""
    st = s[t]
    axes = list(st.op.axis)
    if not axes or num_elements(t) == 0:
        return None
    fused = st.fuse(*axes) if len(axes) > 1 else axes[0]
    threads = min(threads, max(1, _pow2_at_least(num_elements(t))))
    bo, bi = st.split(fused, factor=threads)
    st.bind(bo, thread_axis("blockIdx.x"))
    st.bind(bi, thread_axis("threadIdx.x"))
    return bi


def _pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def inline_data_stages(s, master_outs, keep=()) -> None:
    """Inline the master's own stages without a reduction (padding, dilation, transposes) that are
    neither outputs nor in `keep`: on a GPU recomputing them per read is cheaper than a launch."""
    for op in inner_data_stages(s, master_outs):
        st = s[op]
        if op in {t.op for t in master_outs} or op in keep or op.reduce_axis or st.attach_type != "root":
            continue
        if isinstance(op, ComputeOp) and not _is_output(s, op):
            st.compute_inline()



def _is_output(s, op) -> bool:
    return op in s.outputs


def bind_allreduce(s, t, threads: int = THREADS) -> bool:
    """Split the reduction of `t` over the threads of a block: one block per output element
    (blockIdx.x over the fused data axes), each thread a strided share of the reduce axes
    (rfactor, the partial in a register), then a tree all-reduce in shared memory
    (tir/allreduce.py).  False (nothing changed) when the reduction is shorter than
    ALLREDUCE_MIN, symbolic, or has several outputs."""
    st = s[t]
    op = st.op
    if not isinstance(op, ComputeOp) or op.num_outputs != 1 or not op.reduce_axis:
        return False
    extent = 1
    for iv in op.reduce_axis:
        if not isinstance(iv.dom.extent, IntImm):
            return False
        extent *= iv.dom.extent.value
    if extent < ALLREDUCE_MIN:
        return False
    r = st.fuse(*op.reduce_axis) if len(op.reduce_axis) > 1 else op.reduce_axis[0]
    n = min(threads, _pow2_at_most(extent))
    _, ri = st.split(r, factor=n)
    partial = s.rfactor(t, ri)
    axes = list(st.op.axis)
    if axes:
        st.bind(st.fuse(*axes) if len(axes) > 1 else axes[0], thread_axis("blockIdx.x"))
    tx = st.op.reduce_axis[0]
    st.bind(tx, thread_axis("threadIdx.x"))
    s[partial].compute_at(st, tx)
    s[partial].set_scope("local")
    return True


def _pow2_at_most(n: int) -> int:
    p = 1
    while p * 2 <= n:
        p *= 2
    return p


def schedule_roots(s, skip=()) -> None:
    """Every compute stage still at the root, not scheduled yet (no relations) and not in
    `skip`: a long reduction split over a block's threads (bind_allreduce), anything else one
    flat launch."""
    for st in list(s.stages):
        if isinstance(st.op, ComputeOp) and st.attach_type == "root" and not st.relations and st.op not in skip:
            if not bind_allreduce(s, st.op.output(0)):
                bind_flat(s, st.op.output(0))


@template("injective.gpu")
def injective(s, master_outs, outs, target, cfg=None) -> None:
    schedule_roots(s)


@template("reduction.gpu")
def reduction(s, master_outs, outs, target, cfg=None) -> None:
    schedule_roots(s)


def fuse_epilogue(s, main, outs) -> bool:
    """Compute `main` per thread of its elementwise epilogue (the one other output, same shape,
    reading `main` at its own index) in registers; False when there is no such epilogue."""
    epilogue = [t for t in outs if t.op is not main.op]
    if len(epilogue) != 1 or any(t.op is main.op for t in outs):
        return False
    out = epilogue[0]
    if known_shape(out) != known_shape(main) or not reads_only_at(s, out, main, tuple(iv.var for iv in s[out].op.axis)):
        return False
    thread = bind_flat(s, out)
    if thread is None:
        return False
    s[main].set_scope("local")
    s[main].compute_at(s[out], thread)
    return True


@template("complex.gpu")
def complex_out(s, master_outs, outs, target, cfg=None) -> None:
    inline_data_stages(s, master_outs)
    if len(master_outs) == 1 and isinstance(master_outs[0].op, ComputeOp):
        fuse_epilogue(s, master_outs[0], outs)
    schedule_roots(s)
