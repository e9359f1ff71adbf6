"""`im2col.cpu`: the im2col gather (ops/quant_im2col.py) as the loop nest of its meaning,
n, oh, ow, c, kh, kw: the row axis split by OW and OH, the column axis by KW and KH, so each
index is a sum of loop variables times constants (no division per element); the outermost
row loops run on the thread pool.  An image given as rows (channels last) has its columns in
(kh, kw, c) order: the column axis is split by C first, and the innermost loop copies one
contiguous run of C channels.  The per-image form (N, C * KH * KW, OH * OW) runs n, c, kh, kw,
oh, ow: each of its rows is written in order, along the image's rows.  From the padded copy of
an NCHW image, a window row of at least MIN_RUN contiguous bytes is copied as one vector."""
from __future__ import annotations

from . import template

# The shortest run of kw bytes (one window row, read from the padded copy of an NCHW image with
# unit dilation) worth copying as a vector: the 7 of ResNet's stem 0.25 -> 0.15 ms as masked
# vector moves; the 3 of a 3x3 window were slower that way (0.11 -> 0.18 ms, MobileNet's stem).
MIN_RUN = 5


@template("im2col.cpu")
def im2col(s, master_outs, outs, target, cfg=None) -> None:
    t = master_outs[0]
    oh, ow, kh, kw = t.op.attrs["window"]
    for u in t.op.input_tensors():
        if u.op.name == "im2col_pad":        # the padded copy of an NCHW image, made first
            s[u].compute_root()
    st = s[t]
    if t.op.attrs.get("per_image"):
        n, col, r = st.op.axis
        c_outer, x_kw = st.split(col, factor=kw)
        x_c, x_kh = st.split(c_outer, factor=kh)
        x_oh, x_ow = st.split(r, factor=ow)
        st.reorder(n, x_c, x_kh, x_kw, x_oh, x_ow)
        if target.num_cores > 1:
            st.parallel(st.fuse(n, x_c))
        return
    r, col = st.op.axis
    r_outer, x_ow = st.split(r, factor=ow)
    x_n, x_oh = st.split(r_outer, factor=oh)
    channels = t.op.attrs.get("channels_last", 0)
    if channels:
        k_outer, x_c = st.split(col, factor=channels)
        x_kh, x_kw = st.split(k_outer, factor=kw)
        st.reorder(x_n, x_oh, x_ow, x_kh, x_kw, x_c)
    else:
        c_outer, x_kw = st.split(col, factor=kw)
        x_c, x_kh = st.split(c_outer, factor=kh)
        st.reorder(x_n, x_oh, x_ow, x_c, x_kh, x_kw)
        if t.op.attrs.get("padded_copy") == 1 and kw >= MIN_RUN:
            st.vectorize(x_kw)              # one masked vector copy per run (omp simd)
    if target.num_cores > 1:
        st.parallel(st.fuse(x_n, x_oh))
