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
    vst = s[v]
    e, nu, c, p = vst.op.axis
    vst.reorder(c, p, e, nu)
    thread = _bind(s, v, vst.fuse(c, p))
    vst.unroll(e)
    vst.unroll(nu)
    tst = s[stages["wino_t"]]
    tst.set_scope("local")
    tst.compute_at(vst, thread)
    for ax in tst.op.axis:
        tst.unroll(ax)

    # the batched product on matmul.gpu's tiling
    schedule_tiled(s, cfg, mm, mm, spatial=[2, 3], batch=[0, 1], thread_caps=[8, 16], reduce_caps=[8],
                   shared_inputs=[u, v])

    # output transform: the m x m tile of one (output channel, tile) in one thread
    yst = s[y]
    k, p, i, j = yst.op.axis
    thread = _bind(s, y, yst.fuse(k, p))
    yst.unroll(i)
    yst.unroll(j)
    sst = s[stages["wino_s"]]
    sst.set_scope("local")
    sst.compute_at(yst, thread)
    for ax in sst.op.axis:
        sst.unroll(ax)

    # the crop: inlined into an epilogue, else its own launch
    if out not in outs:
        s[out].compute_inline()
    else:
        bind_flat(s, out)
    schedule_roots(s)
