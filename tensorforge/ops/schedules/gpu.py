"""Default GPU schedules (CUDA, OpenCL): correct for every op, and the base the tuned GPU
templates (gpu_conv2d.py, gpu_matmul.py) fall back to.

One idea throughout: a stage that is computed at the root becomes one kernel launch over its
output elements, flattened and split into blocks of `THREADS` threads (blockIdx.x, threadIdx.x);
a split that does not divide leaves a guard on the last block.  Every other stage is inlined
into its readers or computed inside a thread of its reader (in registers, scope "local").

- injective: each output one flat launch;
- reduction: one thread per output element, the reduction serial inside it (rows of softmax and
  layer norm are short enough that this beats a launch per row on the models we run);
- complex (conv, dense, pooling, ...): the master's padding stages inlined (the pad test becomes
  a guard on the load); with an elementwise epilogue that reads the master at its own index (conv
  + bias + relu), the master is computed per thread of the epilogue's launch, in registers, so
  the fused group is one kernel (fusion as on the CPU); otherwise every root stage is a launch.
"""
from __future__ import annotations

from ...te import thread_axis
from ...te.tensor import ComputeOp
from . import template
from .common import inner_data_stages, known_shape, num_elements, reads_only_at

# Threads per block of a flat launch: a multiple of the warp (32) and of AMD's wavefront (64),
# small enough for any OpenCL device's work-group limit.
THREADS = 256


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


def schedule_roots(s, skip=()) -> None:
    """Every compute stage still at the root, not scheduled yet (no relations) and not in
    `skip`: one flat launch each."""
    for st in list(s.stages):
        if isinstance(st.op, ComputeOp) and st.attach_type == "root" and not st.relations and st.op not in skip:
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
