"""`depthwise_integer_rows.cpu` and `max_pool_rows.cpu`: the fused group of an int8 depthwise
convolution on rows (ops/quant_depthwise_rows.py) and its epilogue (bias, requantize, relu), and
max pooling on rows (ops/quant_pool_rows.py), by one schedule of a window over rows.

The output, (N * OH * OW, C) with channels along each row, is cut into tiles of `tw` pixels of
one image row x one vector of channels; the tile's float32 sums (`dw_acc`) are a local buffer
attached at the pixel-tile loop, accumulated tap by tap (the KH x KW loops outside, the tile's
pixels unrolled, its channels one vector), so a tap costs one weight vector load and `tw`
FMAs on registers.  The epilogue converts, corrects and requantizes the tile as it leaves the
registers.  The row axis is split by OW and OH (like im2col.cpu), so no index divides.  The
padded copy of the input (`dw_pad`, converted to float32) is made once, whole, channels innermost.
Max pooling is the same loop nest with a maximum for the sum, on the data's own type (64 lanes
of uint8 per vector).

Knobs: `tw` (pixels per tile, dividing OW), `order` (channel vectors or pixel tiles outer
within an image row), `pad` (the padded copy made whole, or an output row's input rows at a
time inside the row loop).
"""
from __future__ import annotations

from ...te.space import as_config
from . import template
from .common import const_shape, reads_only_at, schedule_elementwise_stage
from .cpu_matmul_int8_group import _stage

# The default of the `pad` knob: the whole padded copy measured faster than the rows an output
# row needs on every MobileNet layer (5.93 vs 6.69 ms; 3.32 vs 3.89 ms with rows for copies over
# 1 MB only), the knob is left for tuning.
PAD_DEFAULT = "whole"


@template("depthwise_integer_rows.cpu", tunable=True)
def depthwise_integer_rows(s, master_outs, outs, target, cfg=None) -> None:
    schedule_window_rows(s, master_outs, outs, target, cfg, "dw")


@template("max_pool_rows.cpu", tunable=True)
def max_pool_rows(s, master_outs, outs, target, cfg=None) -> None:
    schedule_window_rows(s, master_outs, outs, target, cfg, "pool")


def schedule_window_rows(s, master_outs, outs, target, cfg, prefix: str) -> None:
    """The module docstring's schedule for stages "<prefix>_pad" and "<prefix>_acc"."""
    cfg = as_config(cfg)
    main = master_outs[0]
    acc, pad = _stage(main, f"{prefix}_acc"), _stage(main, f"{prefix}_pad")
    oh, ow = acc.op.attrs["window"]
    _, c = const_shape(main)
    lanes = max(1, target.simd_lanes(acc.dtype))
    vec = max(v for v in (lanes, 16, 1) if v <= lanes and c % v == 0)
    tws = [t for t in range(1, min(ow, 8) + 1) if ow % t == 0]
    cfg.define_knob("tw", tws, default=max(t for t in tws if t <= 7 or t == 8))
    cfg.define_knob("order", ["channels", "pixels"], default="channels")
    cfg.define_knob("pad", ["whole", "rows"], default=PAD_DEFAULT)
    tw = cfg["tw"].val

    ps = s[pad]
    pn, py, px, pc = ps.op.axis
    if vec > 1:
        _, pci = ps.split(pc, factor=vec)
        ps.vectorize(pci)
    if target.num_cores > 1 and cfg["pad"].val == "whole":
        ps.parallel(ps.fuse(pn, py))

    epilogue = [t for t in outs if t not in master_outs]
    own = tuple(iv.var for iv in s[outs[0]].op.axis)
    if len(outs) == 1 and epilogue and const_shape(outs[0]) == const_shape(main) \
            and reads_only_at(s, outs[0], main, own):
        s[main].compute_inline()
        out = outs[0]
    else:
        for t in epilogue:
            schedule_elementwise_stage(s, t, target)
        out = main
    st = s[out]
    r, ch = st.op.axis
    r_outer, x_ow = st.split(r, factor=ow)
    x_n, x_oh = st.split(r_outer, factor=oh)
    x_owo, x_owi = st.split(x_ow, factor=tw)
    x_co, x_ci = st.split(ch, factor=vec) if vec > 1 else (ch, None)
    if cfg["order"].val == "channels":
        st.reorder(x_n, x_oh, x_co, x_owo, x_owi, *([x_ci] if x_ci is not None else []))
        at = x_owo
    else:
        st.reorder(x_n, x_oh, x_owo, x_co, x_owi, *([x_ci] if x_ci is not None else []))
        at = x_co
    if x_ci is not None:
        st.vectorize(x_ci)
    row = st.fuse(x_n, x_oh)                 # one output row per iteration
    if target.num_cores > 1:
        st.parallel(row)
    if cfg["pad"].val == "rows":
        s[pad].compute_at(st, row)
    s[acc].set_scope("local")
    s[acc].compute_at(st, at)
    ar, ac = s[acc].op.axis
    ry, rx = s[acc].op.reduce_axis
    s[acc].reorder(ry, rx, ar, ac)
    s[acc].unroll(ar)
    if vec > 1:
        s[acc].vectorize(ac)
