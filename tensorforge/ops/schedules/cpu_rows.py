"""CPU template `rows.cpu` for the row-wise ops of ops/nn_rows.py (softmax_rows, layer_norm_rows).

Rows run on the thread pool.  Per row, every stage of the op is computed into a small local buffer
(stack, no allocation): the partial reductions with their lanes vectorized and the reduction over
the row's chunks outside, the final reductions over the lanes, the elementwise intermediates
(softmax's exponentials) vectorized along the row.  The output (or the elementwise epilogue fused
onto it) is written as vectors along the row.
"""
from __future__ import annotations

from ...te.tensor import ComputeOp
from . import template
from .common import PARALLEL_MIN_ELEMS, const_extent, const_shape, reads_only_at, schedule_elementwise_stage
from .cpu import complex_out


def _ext(iv) -> int:
    return const_extent(iv, 0)


def _op_stages(master_outs) -> list:
    """The op's own compute stages, producers first."""
    seen, order = set(), []

    def visit(op):
        if op in seen or not isinstance(op, ComputeOp):
            return
        seen.add(op)
        for t in op.input_tensors():
            visit(t.op)
        order.append(op)

    for t in master_outs:
        visit(t.op)
    return order


def _vectorize_last(stage, lanes: int) -> None:
    """The innermost data axis vectorized (reduction axes moved outside it)."""
    data = [iv for iv in stage.op.axis]
    if not data or _ext(data[-1]) < 2:
        return
    if stage.op.reduce_axis:
        stage.reorder(*stage.op.reduce_axis, data[-1])
    width = min(lanes, _ext(data[-1]))
    if width == _ext(data[-1]):
        stage.vectorize(data[-1])
    else:
        _, inner = stage.split(data[-1], factor=width)
        stage.vectorize(inner)


@template("rows.cpu")
def rows(s, master_outs, outs, target, cfg=None) -> None:
    out = master_outs[0]
    shape = const_shape(out)
    if not shape or any(d == 0 for d in shape):
        return complex_out(s, master_outs, outs, target, cfg)
    lanes = max(1, target.simd_lanes(out.dtype))
    epilogue = [t for t in outs if t is not out]
    own = lambda t: tuple(iv.var for iv in s[t].op.axis)  # noqa: E731
    if len(epilogue) == 1 and out not in outs and const_shape(epilogue[0]) == shape \
            and reads_only_at(s, epilogue[0], out, own(epilogue[0])):
        s[out].compute_inline()
        final = epilogue[0]
    else:
        for t in epilogue:
            schedule_elementwise_stage(s, t, target)
        final = out
    fst = s[final]
    *row_axes, col = fst.op.axis
    width = min(lanes, shape[-1])
    if width == shape[-1]:
        fst.vectorize(col)
    else:
        _, ci = fst.split(col, factor=width)
        fst.vectorize(ci)
    if row_axes:
        row = fst.fuse(*row_axes) if len(row_axes) > 1 else row_axes[0]
        for op in _op_stages(master_outs):
            st = s[op]
            if op is final.op or st.attach_type == "inline":
                continue
            st.compute_at(fst, row)
            st.set_scope("local")
            _vectorize_last(st, lanes)
        n = 1
        for d in shape:
            n *= d
        if target.num_cores > 1 and n >= PARALLEL_MIN_ELEMS:
            fst.parallel(row)
    else:
        for op in _op_stages(master_outs):
            if op is not final.op and s[op].attach_type != "inline":
                _vectorize_last(s[op], lanes)
