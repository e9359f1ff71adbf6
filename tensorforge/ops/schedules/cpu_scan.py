"""CPU template `scan.cpu` for cumsum / cumprod (ops/reduce_scan.py): each line along the scanned
axis is one call of a running-sum (product) intrinsic (`reduce_scan.scan_intrin`), O(n) instead
of the triangular reduction's O(n^2); the lines run on the thread pool.  Where the intrinsic has
no C type for the dtypes, the generic reduction schedule (cpu.py) runs the reduction as written.

The intrinsic reads its input from memory: element-wise producers fused before the scan (an
activation, a comparison's select) are computed into a buffer of their own first, in vector loops,
instead of being inlined into the scanned expression (which the intrinsic cannot take).
"""
from __future__ import annotations

import math

from ...arith.structural import structural_equal
from ...ir.expr import Reduce
from ...ir.functor import free_vars
from ...te.schedule import INLINE
from ...te.tensor import PlaceholderOp
from ..reduce_scan import _SCANS, _selected, scan_intrin, scan_supported
from . import template
from .common import PARALLEL_MIN_ELEMS, const_extent, num_elements, schedule_elementwise_stage
from .cpu import accumulations, reduction


@template("scan.cpu")
def scan(s, master_outs, outs, target, cfg=None) -> None:
    found = accumulations(master_outs)
    t = found[0] if found else None
    op = t.op if t is not None else None
    name = (op.tag or op.name).removesuffix("_acc") if op is not None else ""
    if name not in _SCANS or not isinstance(op.body[0], Reduce) or any(const_extent(iv, 0) == 0 for iv in op.axis):
        return reduction(s, master_outs, outs, target, cfg)
    body: Reduce = op.body[0]
    (k,) = op.reduce_axis
    scanned = [iv for iv in op.axis if iv.var in free_vars(body.condition)]
    x = op.input_tensors()[0]
    if len(scanned) != 1 or not scan_supported(x.dtype, t.dtype):
        return reduction(s, master_outs, outs, target, cfg)
    (i,) = scanned
    # the flags are the ones whose selection is the stage's condition
    flags = [(e, r) for e in (0, 1) for r in (0, 1) if structural_equal(_selected(k.var, i.var, e, r), body.condition)]
    if not flags:
        return reduction(s, master_outs, outs, target, cfg)
    ((exclusive, reverse),) = flags
    n = const_extent(i, 0)
    if not isinstance(x.op, PlaceholderOp) and s[x].attach_type == INLINE:
        s[x].compute_root()
        schedule_elementwise_stage(s, x, target)
    st = s[t]
    others = [iv for iv in op.axis if iv is not i]
    st.reorder(*others, i, k)
    lines = math.prod(const_extent(iv, 0) for iv in others)
    if others:
        line = st.fuse(*others) if len(others) > 1 else others[0]
        if target.num_cores > 1 and num_elements(t) * 4 >= PARALLEL_MIN_ELEMS and lines > 1:
            st.parallel(line)
    st.tensorize(i, scan_intrin(name, n, x.dtype, t.dtype, exclusive, reverse))
    for u in outs:
        if u is not t:
            schedule_elementwise_stage(s, u, target)
