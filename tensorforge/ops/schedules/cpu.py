"""Default CPU schedules: correct and reasonably fast, chosen from the shape and the target's SIMD
width and core count.  (Tunable knob templates come with the auto-tuner.)

- injective: fuse all axes, split by the vector width, vectorize the inner part and run the outer
  part on the thread pool when there is enough work;
- reduction: parallel over the fused output axes, the reduction inside;
- complex (conv, dense, matmul): the main stage is computed per output row inside the loops of the
  fused epilogue (so bias, activations and residual adds happen while the row is in cache), its
  innermost data axis vectorized where it is contiguous.
"""
from __future__ import annotations

from ...ir.expr import IntImm
from ...te.tensor import ComputeOp
from . import template

PARALLEL_MIN_ELEMS = 16384


def _const_extent(iv, default):
    """An iteration variable's extent when it is a constant, else `default`."""
    e = iv.dom.extent
    return e.value if isinstance(e, IntImm) else default


def _ext(iv) -> int | None:
    return _const_extent(iv, None)


def _shape(t) -> tuple:
    """A tensor's shape as ints (every dimension constant)."""
    return tuple(int(d.value) for d in t.shape)


def _ext_shape(t) -> tuple:
    return tuple(d.value if isinstance(d, IntImm) else None for d in t.shape)


def _size(t) -> int:
    n = 1
    for d in t.shape:
        n *= d.value if isinstance(d, IntImm) else 1 << 20
    return n


def schedule_elementwise_stage(s, t, target, parallel: bool = True) -> None:
    """Flat vectorized loop over all of `t`'s elements."""
    st = s[t]
    axes = list(st.op.axis)
    if not axes or _size(t) == 0:
        return
    lanes = max(1, target.simd_lanes(t.dtype))
    fused = st.fuse(*axes) if len(axes) > 1 else axes[0]
    total = _size(t)
    if total >= lanes * 2:
        outer, inner = st.split(fused, factor=lanes)
        st.vectorize(inner)
    else:
        outer = fused
    if parallel and total >= PARALLEL_MIN_ELEMS and target.num_cores > 1:
        st.parallel(outer)


@template("injective.cpu")
def injective(s, master_outs, outs, target, cfg=None) -> None:
    for t in outs:
        schedule_elementwise_stage(s, t, target)


@template("reduction.cpu")
def reduction(s, master_outs, outs, target, cfg=None) -> None:
    for t in master_outs:
        st = s[t]
        axes = list(st.op.axis)
        if axes and _size(t) > 0:
            fused = st.fuse(*axes) if len(axes) > 1 else axes[0]
            if _size(t) >= 64 and target.num_cores > 1:
                st.parallel(fused)
    for t in outs:
        if t not in master_outs:
            schedule_elementwise_stage(s, t, target)


def _inner_data_stages(s, master_outs):
    """The stages of the master op (its own padding/packing stages included)."""
    seen, todo = [], [t.op for t in master_outs]
    while todo:
        op = todo.pop()
        if not isinstance(op, ComputeOp) or op in seen:
            continue
        seen.append(op)
        todo.extend(t.op for t in op.input_tensors())
    return seen


def master_reads(s, out, master) -> list:
    """The index tuples (over `out`'s axis variables) at which `out`, through its inlined stages,
    reads `master`."""
    from ...ir.expr import TensorLoad
    from ...ir.functor import post_order_visit, substitute

    found: list = []

    def visit(expr) -> None:
        def fn(n):
            if not isinstance(n, TensorLoad):
                return
            if n.tensor.op is master.op:
                found.append(n.indices)
                return
            st = s.stage_map.get(n.tensor.op)
            if st is not None and st.attach_type == "inline":
                visit(substitute(st.op.body[n.tensor.value_index],
                                 {iv.var: i for iv, i in zip(st.op.axis, n.indices)}))
        post_order_visit(expr, fn)

    for b in s[out].op.body:
        visit(b)
    return found


def reads_only_at(s, out, master, expected) -> bool:
    """Whether every read of `master` by `out` is at index `expected` (after simplification)."""
    from ...arith import simplify, structural_equal
    reads = master_reads(s, out, master)
    return bool(reads) and all(len(r) == len(expected) and all(
        structural_equal(simplify(a), simplify(b)) for a, b in zip(r, expected)) for r in reads)


@template("complex.cpu")
def complex_out(s, master_outs, outs, target, cfg=None) -> None:
    """Main stage: data axes, then reduction axes, then the innermost data axis (vectorized).
    With an epilogue, the main stage is computed per row of the epilogue's output."""
    main = master_outs[0]
    if any(_size(t) == 0 for t in list(master_outs) + list(outs)):
        return
    st = s[main]
    data = list(st.op.axis)
    red = list(st.op.reduce_axis)
    lanes = max(1, target.simd_lanes(main.dtype))
    if red and data:
        st.reorder(*(data[:-1] + red + data[-1:]))
    if data and (_ext(data[-1]) or 0) >= lanes:
        xo, xi = st.split(data[-1], factor=lanes)
        st.vectorize(xi)
    epilogue = [t for t in outs if t not in master_outs]
    own = lambda t: tuple(iv.var for iv in s[t].op.axis)  # noqa: E731
    if epilogue and not all(_ext_shape(t) == _ext_shape(main) and reads_only_at(s, t, main, own(t))
                            for t in epilogue):
        # the epilogue re-indexes the master's output (reshape, transpose, ...): computing the master
        # per output row would need all of it, so it stays a whole stage of its own
        for t in epilogue:
            schedule_elementwise_stage(s, t, target)
        epilogue = []
    if not epilogue:
        if len(data) > 1:
            st.parallel(data[0] if (_ext(data[0]) or 0) > 1 or len(data) < 3 else data[1])
        return
    out = epilogue[0]
    ost = s[out]
    oaxes = list(ost.op.axis)
    if len(oaxes) == len(data) and len(oaxes) >= 2:
        row = oaxes[-2]
        st.compute_at(ost, row)
        if (_ext(oaxes[-1]) or 0) >= lanes:
            xo, xi = ost.split(oaxes[-1], factor=lanes)
            ost.vectorize(xi)
        outer = oaxes[:-2]
        if outer:
            fused = ost.fuse(*outer) if len(outer) > 1 else outer[0]
            ost.parallel(fused)
        else:
            ost.parallel(row)
    else:
        schedule_elementwise_stage(s, out, target)
    for t in epilogue[1:]:
        schedule_elementwise_stage(s, t, target)


def _divisor_at_most(n: int, limit: int) -> int:
    for d in range(min(n, limit), 0, -1):
        if n % d == 0:
            return d
    return 1


@template("conv2d_nchwc.cpu")
def conv2d_nchwc(s, master_outs, outs, target, cfg=None) -> None:
    """Register-blocked conv: per (image, channel block, output row, tile of `xb` columns) a local
    (xb x B) accumulator, reduction loops (input channel, kernel row, kernel column) outside the
    unrolled columns and the vectorized B output channels, computed inside the fused epilogue
    (NCHW or blocked) when there is one.  One definition serves both uses: this is the default point of
    the tunable template in autotune/templates.py, which declares the knobs."""
    from ...autotune.templates import conv2d_nchwc as tunable
    tunable(s, master_outs, outs, target, None)


def _nchw_epilogue(s, out, conv) -> bool:
    """`out` is NCHW and reads the NCHW[B]c conv only at (n, f // B, y, x, f % B)."""
    shape = _ext_shape(conv)
    if len(s[out].op.axis) != 4 or _ext_shape(out) != (shape[0], shape[1] * shape[4], shape[2], shape[3]):
        return False
    n, f, y, x = (iv.var for iv in s[out].op.axis)
    b = shape[4]
    return reads_only_at(s, out, conv, (n, f // b, y, x, f % b))


def _blocked_epilogue(s, out, conv) -> bool:
    """`out` has the blocked conv's shape (N, F/B, OH, OW, B) and reads it only at its own index."""
    if _ext_shape(out) != _ext_shape(conv) or len(s[out].op.axis) != 5:
        return False
    return reads_only_at(s, out, conv, tuple(iv.var for iv in s[out].op.axis))
