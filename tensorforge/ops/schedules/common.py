"""Helpers shared by the CPU schedule templates of this package: constant extents and shapes,
the flat vectorized loop of an elementwise stage, the padded-input copy of the convolutions,
and the tests that decide whether an epilogue can take a tile straight from registers
(`reads_only_at`, `blocked_epilogue`).

They only read a schedule's stages or add relations to them; none declares knobs, so a template
that uses them schedules the same with any config.
"""
from __future__ import annotations

from ...ir.expr import IntImm
from ...te.tensor import ComputeOp
from ..common import const_shape

__all__ = ["PARALLEL_MIN_ELEMS", "PAD_UNROLL_VECTORS", "blocked_epilogue", "column_tile", "const_extent", "const_shape",
           "divisor_at_most", "inner_data_stages", "known_shape", "master_reads", "num_elements",
           "reads_only_at", "schedule_elementwise_stage", "schedule_pad", "schedule_rows"]

# A stage with at least this many elements runs its outer loop on the thread pool.
PARALLEL_MIN_ELEMS = 16384

# A padded row up to this many vectors wide is unrolled (see schedule_pad).  With 64-bit
# indices (codegen/c_like.py) the C compiler makes a wider row's guarded vectors masked
# contiguous loads, not gathers: unrolling rows of two to four vectors no longer paid, and their
# dozens of statements per loop cost GCC's vectorizer a second of analysis on ResNet-18.
PAD_UNROLL_VECTORS = 1


# Extents and shapes --------------------------------------------------------------------------

def const_extent(iv, default):
    """An iteration variable's extent when it is a constant, else `default`."""
    e = iv.dom.extent
    return e.value if isinstance(e, IntImm) else default


def known_shape(t) -> tuple:
    """A tensor's shape with each constant dimension as an int and each symbolic one as None."""
    return tuple(d.value if isinstance(d, IntImm) else None for d in t.shape)


def num_elements(t) -> int:
    """A tensor's element count, a symbolic dimension counted as 2**20 (so a stage of unknown
    size is treated as a large one)."""
    n = 1
    for d in t.shape:
        n *= d.value if isinstance(d, IntImm) else 1 << 20
    return n


def divisor_at_most(n: int, limit: int) -> int:
    """The largest divisor of `n` that is at most `limit` (1 when there is none)."""
    for d in range(min(n, limit), 0, -1):
        if n % d == 0:
            return d
    return 1


def column_tile(width: int, limit: int, min_share: float = 0.7) -> int:
    """Output columns per register tile, at most `limit`: the largest divisor of the width, or,
    when that is narrower than `min_share` of the widest even split (9 columns with at most 7
    per tile: 3 against 5; a prime width: 1), the even split with a shorter last tile.  A narrow
    tile has too few independent accumulators to hide the FMA latency."""
    whole = divisor_at_most(width, limit)
    tiles = -(-width // limit)
    even = -(-width // tiles)
    return whole if whole >= min_share * even else even


# Stages ------------------------------------------------------------------------------------

def schedule_elementwise_stage(s, t, target, parallel: bool = True) -> None:
    """Flat vectorized loop over all of `t`'s elements: the axes fused, split by the vector
    width, the outer part on the thread pool when there are PARALLEL_MIN_ELEMS elements.

    When the vector width divides the last axis, that axis is split first and the outer axes are
    fused with its outer part: the same order of elements, but each vector's indices into the
    other axes are computed once per vector, not per element (a gathered row, a broadcast
    operand: the lanes then read contiguous memory).  A last axis of at least ROW_MIN_VECTORS
    vectors runs as rows (`schedule_rows`) where the width does not divide it (whole vectors along
    each row and a short tail, instead of every element working out its row and column from the
    flat index: an edge pad of 64 x 114 x 114 took 4.4x ONNX Runtime's time that way), and where
    it does, when there are ROW_MIN_ROWS rows per core to share: the row's vectors are then an
    inner loop, with no division of the flat index per vector (a split of 8 x 128 x 2304 into
    three took 1.9x a loop over rows with the vectors inside)."""
    st = s[t]
    axes = list(st.op.axis)
    if not axes or num_elements(t) == 0:
        return
    lanes = max(1, target.simd_lanes(t.dtype))
    total = num_elements(t)
    last = const_extent(axes[-1], 0)
    rows = total // last if last else 0
    if len(axes) > 2 and lanes > 1 and last % lanes and last < ROW_MIN_VECTORS * lanes \
            and const_extent(axes[-2], 0) * last >= 2 * lanes and _planes_read_as_rows(s, t):
        plane = st.fuse(axes[-2], axes[-1])
        _, inner = st.split(plane, factor=lanes)
        st.vectorize(inner)
        lead = st.fuse(*axes[:-2]) if len(axes) > 3 else axes[0]
        if parallel and total >= PARALLEL_MIN_ELEMS and target.num_cores > 1:
            st.parallel(lead)
        return
    if len(axes) > 1 and lanes > 1 and last >= ROW_MIN_VECTORS * lanes and \
            (last % lanes or rows >= ROW_MIN_ROWS * target.num_cores):
        return schedule_rows(s, t, target, parallel)
    if len(axes) > 1 and lanes > 1 and last >= lanes and last % lanes == 0:
        row_vectors, inner = st.split(axes[-1], factor=lanes)
        outer = st.fuse(*axes[:-1], row_vectors)
        st.vectorize(inner)
    elif total >= lanes * 2:
        fused = st.fuse(*axes) if len(axes) > 1 else axes[0]
        outer, inner = st.split(fused, factor=lanes)
        st.vectorize(inner)
    else:
        outer = st.fuse(*axes) if len(axes) > 1 else axes[0]
    if parallel and total >= PARALLEL_MIN_ELEMS and target.num_cores > 1:
        st.parallel(outer)


ROW_MIN_VECTORS = 4     # a last axis this many vectors long or more runs as rows (see above)

ROW_MIN_ROWS = 4        # ... when its vectors divide it, with at least this many rows per core


def _planes_read_as_rows(s, t) -> bool:
    """Whether `t`'s last two axes (a plane of H x W, W short and no multiple of the vector width)
    are better one row of H * W than a part of the flat loop: every read of `t` (through its
    inlined stages) walks memory as the plane does (offset = base + h W + w, the base free of h
    and w) or does not move with the plane at all (a per-channel operand), and some read is not
    at `t`'s own flat index (where all are, the flat loop has whole vectors and no divisions).

    A concat and channel shuffle of 14 x 14 planes fused into a product's epilogue ran as a flat
    loop that worked out channel, row and column from the flat index per element, with gathers:
    0.048 ms of its 0.085, for what is a copy of contiguous rows of 196 per channel."""
    from ...arith import Analyzer
    from ...ir.functor import substitute, uses_var

    axes = list(s[t].op.axis)
    shape = known_shape(t)
    if None in shape:
        return False
    analyzer = Analyzer()
    for iv in axes:
        analyzer.bind(iv.var, iv.dom)
    h, w = axes[-2].var, axes[-1].var
    width = shape[-1]
    flat = 0
    for iv, n in zip(axes, shape):
        flat = flat * n + iv.var
    flat = analyzer.simplify(flat)
    moved = False
    for load in _reads_through_inlined(s, t):
        dims = known_shape(load.tensor)
        if None in dims or len(dims) != len(load.indices):
            return False
        offset = 0
        for i, n in zip(load.indices, dims):
            offset = offset * n + i
        offset = analyzer.simplify(offset)
        if not (uses_var(offset, h) or uses_var(offset, w)):
            moved = True
            continue
        base = analyzer.simplify(substitute(offset, {h: IntImm(h.dtype, 0), w: IntImm(w.dtype, 0)}))
        rest = analyzer.simplify(offset - base - (h * width + w))
        if not (isinstance(rest, IntImm) and rest.value == 0) or uses_var(base, h) or uses_var(base, w):
            return False
        moved = moved or not isinstance(analyzer.simplify(offset - flat), IntImm)
    return moved



def schedule_rows(s, t, target, parallel: bool = True) -> None:
    """`t` as rows: its leading axes fused into one loop (on the thread pool when `t` has
    PARALLEL_MIN_ELEMS elements and `parallel`), its last axis split by the vector width, the
    lanes vectorized."""
    st = s[t]
    axes = list(st.op.axis)
    if not axes or num_elements(t) == 0:
        return
    *lead, last = axes
    lanes = max(1, target.simd_lanes(t.dtype))
    if const_shape(t)[-1] >= lanes:
        _, inner = st.split(last, factor=lanes)
        st.vectorize(inner)
    if lead:
        rows = st.fuse(*lead) if len(lead) > 1 else lead[0]
        if parallel and num_elements(t) >= PARALLEL_MIN_ELEMS and target.num_cores > 1:
            st.parallel(rows)


def cast_back_source(t):
    """The reduction stage that `t` rounds to a narrower float ("<name>_cast", see
    ops/nn_conv.cast_back: half-precision convolutions sum in float32), else None."""
    ins = t.op.input_tensors() if isinstance(t.op, ComputeOp) else []
    if len(ins) == 1 and isinstance(ins[0].op, ComputeOp) and ins[0].op.reduce_axis \
            and t.op.name == f"{ins[0].op.name}_cast" and not t.op.reduce_axis:
        return ins[0]
    return None


def inner_data_stages(s, master_outs) -> list:
    """The compute ops of the master op (its own padding/packing stages included), outputs
    first."""
    seen, todo = [], [t.op for t in master_outs]
    while todo:
        op = todo.pop()
        if not isinstance(op, ComputeOp) or op in seen:
            continue
        seen.append(op)
        todo.extend(t.op for t in op.input_tensors())
    return seen


def stages_by_name(out) -> dict:
    """The compute stages of `out` and of its producers, by name (a template finds the named
    stages of its op: `lstm_cell_gates`, `wino_m`, ...)."""
    found, todo = {}, [out]
    while todo:
        t = todo.pop()
        if not isinstance(t.op, ComputeOp) or t.op.name in found:
            continue
        found[t.op.name] = t
        todo.extend(t.op.input_tensors())
    return found


def schedule_pad(s, t, target, parallel: bool = True) -> None:
    """The zero-padded copy of a conv's input, (N, C, H', W') or blocked (N, C/b, H', W', b):
    a loop per image and channel (block) (on the thread pool), one per row, the row's elements
    inside, so no index needs a div/mod per element.

    The copy's load sits under a test of the column, which the loop vectorizer leaves to the C
    compiler; with 64-bit indices it makes each vector one masked contiguous load.  A row of at
    most `PAD_UNROLL_VECTORS` vectors is unrolled (the column tests fold to constants); a wider
    row is split into vectors and a tail.  (Scheduled as one flat loop like other elementwise stages,
    this copy took 15-20% of a 56x56, 64-channel 3x3 conv.)  In the blocked layout the test
    depends on the row and column only, not on the channel within the block: the block is the
    vector loop, and each vector is one guarded contiguous copy or zeros.  With `parallel` False
    it stays off the thread pool whatever its size (a kernel too small to split)."""
    st = s[t]
    if len(st.op.axis) not in (4, 5):
        schedule_elementwise_stage(s, t, target, parallel=parallel)
        return
    n, c, h, w, *block = st.op.axis
    lanes = max(1, target.simd_lanes(t.dtype))
    width = const_extent(w, 0)
    if block:
        (ci,) = block
        if const_extent(ci, 0) > lanes and const_extent(ci, 0) % lanes == 0:
            _, cii = st.split(ci, factor=lanes)
            st.vectorize(cii)
        else:
            st.vectorize(ci)
    elif 0 < width <= PAD_UNROLL_VECTORS * lanes:
        st.unroll(w)
    elif width > lanes:
        _, wi = st.split(w, factor=lanes)
        st.vectorize(wi)
    if parallel and target.num_cores > 1 and num_elements(t) >= PARALLEL_MIN_ELEMS:
        # planes to the threads; rows too when planes are few (an RGB image), for balance
        few = (const_extent(n, 0) or 1) * (const_extent(c, 0) or 1) < 4 * target.num_cores
        st.parallel(st.fuse(n, c, h) if few else st.fuse(n, c))
    else:
        st.fuse(n, c)


# Epilogues that read the master stage --------------------------------------------------------

def _reads_through_inlined(s, out, stop=None) -> list:
    """The tensor loads by which `out`, through its inlined stages, reads stages that are not
    inlined (or the stage `stop`, which is not looked into), with indices over `out`'s axis
    variables."""
    from ...ir.expr import TensorLoad
    from ...ir.functor import post_order_visit, substitute

    found: list = []

    def visit(expr) -> None:
        def fn(n):
            if not isinstance(n, TensorLoad):
                return
            st = s.stage_map.get(n.tensor.op)
            if n.tensor.op is not stop and st is not None and st.attach_type == "inline":
                visit(substitute(st.op.body[n.tensor.value_index],
                                 {iv.var: i for iv, i in zip(st.op.axis, n.indices)}))
            else:
                found.append(n)
        post_order_visit(expr, fn)

    for b in s[out].op.body:
        visit(b)
    return found


def master_reads(s, out, master) -> list:
    """The index tuples (over `out`'s axis variables) at which `out`, through its inlined stages,
    reads `master`."""
    return [n.indices for n in _reads_through_inlined(s, out, master.op) if n.tensor.op is master.op]


def reads_only_at(s, out, master, expected) -> bool:
    """Whether every read of `master` by `out` is at index `expected` (after simplification)."""
    from ...arith import simplify, structural_equal
    reads = master_reads(s, out, master)
    return bool(reads) and all(len(r) == len(expected) and all(
        structural_equal(simplify(a), simplify(b)) for a, b in zip(r, expected)) for r in reads)


def blocked_epilogue(s, out, conv) -> bool:
    """`out` has the blocked conv's shape (N, F/B, OH, OW, B) and reads it only at its own index
    (so the conv's register tile can go through `out` to memory once)."""
    if known_shape(out) != known_shape(conv) or len(s[out].op.axis) != 5:
        return False
    return reads_only_at(s, out, conv, tuple(iv.var for iv in s[out].op.axis))
