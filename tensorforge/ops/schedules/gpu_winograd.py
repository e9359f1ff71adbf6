"""GPU template `conv2d_winograd_nchw.gpu` (ops/nn_conv_winograd_nchw.py): a Winograd conv as
four launches.

- input transform: one thread per (channel, tile) computes the tile's whole alpha x alpha V =
  B^T d B in registers (the column transform `wino_t` kept local, every position unrolled, so
  each value is a short constant sum of the padded input, the padding a guard on the load);
- batched product: M = U V for each of the alpha^2 positions, on the tunable tiling of
  matmul.gpu (gpu_tiled.schedule_tiled: the positions are the batch, K and P the tiled axes, the
  channel sum split with U's and V's tiles in shared memory);
- output transform: one thread per (output channel, tile) computes its m x m tile A^T M A in
  registers (the column transform `wino_s` local);
- the crop into NCHW, inlined into the fused elementwise epilogue (bias, relu) when there is
  one, else one flat launch.
Knobs: those of the product (tile sizes, shared memory).  The transforms are a small share of
the work and keep a fixed schedule.
"""
from __future__ import annotations

from ...te import thread_axis
from ...te.space import as_config
from . import template
from .common import num_elements, stages_by_name
from .gpu import bind_flat, complex_out, inline_data_stages, schedule_roots
from .gpu_tiled import schedule_tiled


def _bind(s, t, fused):
    """Split the fused axis `fused` of `t` over blocks of up to 128 threads (fewer for a small
    stage, so it still spreads over several blocks); returns the thread axis."""
    st = s[t]
    threads = min(128, max(1, num_elements(t) // 16))
    bo, bi = st.split(fused, factor=threads)
    st.bind(bo, thread_axis("blockIdx.x"))
    st.bind(bi, thread_axis("threadIdx.x"))
    return bi


def _tile_per_thread(s, t, local, per_thread, in_thread):
    """One thread per element of the `per_thread` axes of `t` (fused and bound by _bind), the
    `in_thread` axes unrolled inside it, and the stage `local` computed in registers there."""
    thread = _bind(s, t, s[t].fuse(*per_thread))
    for ax in in_thread:
        s[t].unroll(ax)
    s[local].set_scope("local")
    s[local].compute_at(s[t], thread)
    for ax in s[local].op.axis:
        s[local].unroll(ax)


@template("conv2d_winograd_nchw.gpu", tunable=True)
def conv2d_winograd_nchw(s, master_outs, outs, target, cfg=None) -> None:
    cfg = as_config(cfg)
    out = master_outs[0]
    stages = stages_by_name(out)
    if len(master_outs) != 1 or not {"wino_t", "wino_v", "wino_m", "wino_s", "wino_y"} <= set(stages):
        return complex_out(s, master_outs, outs, target, None)
    inline_data_stages(s, master_outs, keep={stages[n].op for n in ("wino_t", "wino_s", "wino_y", "wino_v")})
    v, mm, y = stages["wino_v"], stages["wino_m"], stages["wino_y"]
    u = [t for t in mm.op.input_tensors() if t.op is not v.op][0]

    # input transform: the (e, nu) positions of one (channel, tile) in one thread
    e, nu, c, p = s[v].op.axis
    s[v].reorder(c, p, e, nu)
    _tile_per_thread(s, v, stages["wino_t"], (c, p), (e, nu))

    # the batched product on matmul.gpu's tiling
    schedule_tiled(s, cfg, mm, mm, spatial=[2, 3], batch=[0, 1], thread_caps=[8, 16], reduce_caps=[8],
                   shared_inputs=[u, v])

    # output transform: the m x m tile of one (output channel, tile) in one thread
    k, p, i, j = s[y].op.axis
    _tile_per_thread(s, y, stages["wino_s"], (k, p), (i, j))

    # the crop: inlined into an epilogue, else its own launch
    if out not in outs:
        s[out].compute_inline()
    else:
        bind_flat(s, out)
    schedule_roots(s)
