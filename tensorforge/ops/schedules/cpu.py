"""Default CPU schedules: correct and reasonably fast, chosen from the shape and the target's SIMD
width and core count.  (The templates with knobs for the auto-tuner live beside this file:
cpu_conv2d_nchwc.py, cpu_matmul.py, cpu_nchwc.py, cpu_winograd.py, cpu_conv_transpose.py.)

- injective: fuse all axes, split by the vector width, vectorize the inner part and run the outer
  part on the thread pool when there is enough work (rows instead where the last axis is long and
  no multiple of the width; transposes that move the innermost axis in 8x8 register-transposed
  blocks; tiles of the innermost axis as rows of copies; the op's own statistics on vectors);
- reduction: on vectors where the input's innermost axis allows (`_vector_reduction`): over
  rows (the innermost input axis is reduced: lanes of partial results, rfactor) or over columns
  (it is kept: a tile of outputs accumulates a vector per input row); parallel over the fused
  output axes when the whole reduction reads at least PARALLEL_MIN_ELEMS elements (a tiny one
  runs without a parallel region);
- complex (conv, dense, matmul): the main stage is computed per output row inside the loops of the
  fused epilogue (so bias, activations and residual adds happen while the row is in cache), its
  innermost data axis vectorized where it is contiguous.
"""
from __future__ import annotations

from ...ir.expr import IntImm, Reduce, TensorLoad
from ...ir.functor import post_order_visit
from ...te.tensor import PlaceholderOp
from . import template
from .common import (
    PARALLEL_MIN_ELEMS,
    cast_back_source,
    const_extent,
    inner_data_stages,
    known_shape,
    num_elements,
    reads_only_at,
    schedule_elementwise_stage,
)
from .cpu_conv_rows import conv_rows


def _ext(iv) -> int | None:
    return const_extent(iv, None)


@template("injective.cpu")
def injective(s, master_outs, outs, target, cfg=None) -> None:
    _vector_statistics(s, master_outs, target)
    for t in outs:
        if not (to_blocks_transposed(s, t, target) or _transpose_blocks(s, t, target) or _tile_rows(s, t, target)):
            schedule_elementwise_stage(s, t, target)


def _tile_rows(s, t, target) -> bool:
    """A tile that repeats the innermost axis (of at least one vector), as rows of copies of the
    input row: its last axis split by the input's length, so each copy reads the row with unit
    stride (the flat loop worked out `j % n` per element and gathered: 5.3x ONNX Runtime's time
    on a 2x2 tile of 256 x 28 x 28)."""
    if t.op.tag != "tile" or len(t.shape) < 1:
        return False
    (x,) = t.op.input_tensors()
    if not isinstance(x.op, PlaceholderOp):
        return False
    n, lanes = known_shape(x)[-1] or 0, max(1, target.simd_lanes(t.dtype))
    st = s[t]
    axes = list(st.op.axis)
    total = _ext(axes[-1]) or 0
    if n < lanes or total <= n or total % n:
        return False
    copy, j = st.split(axes[-1], factor=n)
    _, lane = st.split(j, factor=lanes)
    st.vectorize(lane)
    outer = st.fuse(*axes[:-1], copy) if axes[:-1] else copy
    if num_elements(t) >= PARALLEL_MIN_ELEMS and target.num_cores > 1:
        st.parallel(outer)
    return True


def _transpose_blocks(s, t, target) -> bool:
    """A transpose of an input read as it is that moves the innermost axis (a 2-D transpose,
    NCHW -> NHWC), in 8x8 blocks transposed in registers (ops/x86_transpose.py): element by
    element, each output vector gathered 8 input rows far apart (2-D 512 x 1024: 3.9x ONNX
    Runtime's time, NCHW -> NHWC of 64 x 112 x 112: 3.2x).  Where the target's float32 vectors
    have at least 8 lanes and both moved axes are multiples of 8."""
    if t.op.tag != "transpose" or target.simd_lanes("float32") < 8 or t.dtype != "float32":
        return False
    (x,) = t.op.input_tensors()
    if not isinstance(x.op, PlaceholderOp) or len(t.shape) < 2:
        return False
    load = t.op.body[0]
    if not isinstance(load, TensorLoad):
        return False
    st = s[t]
    axes = list(st.op.axis)
    owner = {iv.var: k for k, iv in enumerate(axes)}
    if any(idx not in owner for idx in load.indices):
        return False
    last = len(axes) - 1
    b = owner[load.indices[-1]]             # the output axis that walks the input's innermost axis
    if b == last or (_ext(axes[b]) or 0) % 8 or (_ext(axes[last]) or 0) % 8:
        return False
    from ..x86_transpose import transpose8x8
    others = [iv for k, iv in enumerate(axes) if k not in (b, last)]
    if (_ext(axes[b]) or 0) % 16 == 0 and (_ext(axes[last]) or 0) % 16 == 0:
        # 16 x 16 tiles of four blocks, so that every input and output row moves one whole
        # 64-byte line, the two blocks that fill the same output rows one after the other
        # (8x8 blocks alone read and wrote half lines whose other halves came long after, at
        # rows a power of two apart that share L1 sets: 2-D 512 x 1024 took 0.29 ms, 1.12-1.30x
        # ONNX Runtime's time; now 0.07-0.10 ms.  The other order inside the tile, the blocks
        # that share input rows together, took 0.16)
        bo, bb = st.split(axes[b], factor=16)
        lo, lb = st.split(axes[last], factor=16)
        lb, li = st.split(lb, factor=8)
        bb, bi = st.split(bb, factor=8)
        st.reorder(*others, bo, lo, bb, lb, bi, li)
    else:
        bo, bi = st.split(axes[b], factor=8)
        lo, li = st.split(axes[last], factor=8)
        st.reorder(*others, bo, lo, bi, li)
    outer = st.fuse(*others, bo)
    if num_elements(t) >= PARALLEL_MIN_ELEMS and target.num_cores > 1:
        st.parallel(outer)
    st.tensorize(bi, transpose8x8())
    return True


def to_blocks_transposed(s, t, target) -> bool:
    """nchw_to_nchwc in (8 positions x 8 channels) blocks transposed in registers
    (ops/x86_transpose.py), parallel over (image, channel block, row): where the target's float32
    vectors have at least 8 lanes and the rows and blocks are multiples of 8.

    Its input is read as it is, or is element-wise work on NCHW data that only `t` reads (a group
    norm's scale, shift and SiLU before a conv; a product's bias): then, per 8 positions of a row,
    the work is computed for the block's B channels as rows of 8 contiguous positions into a local
    buffer, which the transposes write as blocks.  Inlined, each output vector gathered B channels
    a plane apart and ran the work on the gathered lanes: 64 channels of 128 x 128 took 1.75 ms,
    0.58 ms as rows (ONNX Runtime's whole group norm and SiLU: about 0.3 ms)."""
    if t.op.tag != "nchw_to_nchwc" or target.simd_lanes("float32") < 8 or t.dtype != "float32":
        return False
    (x,) = t.op.input_tensors()
    work = None
    if not isinstance(x.op, PlaceholderOp):
        work = s.stage_map.get(x.op)
        if work is None or work.attach_type != "inline" or x.op.reduce_axis or x.dtype != "float32" or any(
                x.op in {u.op for u in other.op.input_tensors()} for other in s.stages
                if other.op is not t.op and not isinstance(other.op, PlaceholderOp)):
            return False
    st = s[t]
    n, fo, y, z, fi = st.op.axis
    if (_ext(z) or 0) % 8 or (_ext(fi) or 0) % 8:
        return False
    from ..x86_transpose import transpose8x8
    zo, zi = st.split(z, factor=8)
    fio, fii = st.split(fi, factor=8)
    st.reorder(n, fo, y, zo, fio, zi, fii)
    rows = st.fuse(n, fo, y)
    if num_elements(t) >= PARALLEL_MIN_ELEMS and target.num_cores > 1:
        st.parallel(rows)
    if work is not None:
        work.compute_at(st, zo)
        work.set_scope("local")
        work.vectorize(work.op.axis[3])
    st.tensorize(zi, transpose8x8())
    return True


@template("reduction.cpu")
def reduction(s, master_outs, outs, target, cfg=None) -> None:
    stages = accumulations(master_outs)
    stages += [t for t in master_outs if t not in stages and t not in outs]
    done: list = []          # readers scheduled with their reduction
    for t in stages:
        if getattr(t.op, "reduce_axis", None) and _vector_reduction(s, t, target):
            continue
        readers = [o for o in outs if o not in stages]
        if _accumulate_in_registers(s, t, readers, target):
            done += readers
            continue
        st = s[t]
        axes = list(st.op.axis)
        if axes and num_elements(t) > 0:
            fused = st.fuse(*axes) if len(axes) > 1 else axes[0]
            if _worth_parallel(t, target):
                st.parallel(fused)
    for t in outs:
        if t not in stages and t not in done:
            schedule_elementwise_stage(s, t, target)


def _accumulate_in_registers(s, t, readers, target) -> bool:
    """A tuple reduction (argmax's index and value) whose one reader takes it at its own index:
    computed per output element inside the reader's loop, its accumulators local (registers).  At
    the root they were arrays the loop stored to and loaded from at every element: ArgMax over
    512 rows of 1024 took 0.46-0.98 ms from run to run (ONNX Runtime 0.43)."""
    if t.op.num_outputs < 2 or len(readers) != 1 or not getattr(t.op, "reduce_axis", None):
        return False
    out = readers[0]
    own = tuple(iv.var for iv in s[out].op.axis)
    if not own or known_shape(out) != known_shape(t) or not reads_only_at(s, out, t, own):
        return False
    ost = s[out]
    axes = list(ost.op.axis)
    fused = ost.fuse(*axes) if len(axes) > 1 else axes[0]
    s[t].compute_at(ost, fused)
    s[t].set_scope("local")
    if _worth_parallel(t, target):
        ost.parallel(fused)
    return True


def _worth_parallel(t, target) -> bool:
    """Reduction stage `t` has two or more outputs and PARALLEL_MIN_ELEMS or more terms in all (a
    symbolic extent counts as large), on a machine with several cores."""
    work = num_elements(t) or 0
    for iv in t.op.reduce_axis:
        ext = _ext(iv)
        work *= PARALLEL_MIN_ELEMS if ext is None else ext
    return (num_elements(t) or 0) >= 2 and work >= PARALLEL_MIN_ELEMS and target.num_cores > 1


def accumulations(master_outs) -> list:
    """The reduction stages of an op: its outputs that reduce, or the accumulations its outputs
    finish (a mean's sum, divided by the count in the output stage), in order."""
    found: list = []
    for t in master_outs:
        candidates = [t] if getattr(t.op, "reduce_axis", None) else t.op.input_tensors()
        found += [u for u in candidates if getattr(u.op, "reduce_axis", None) and u not in found]
    return found


def _vector_statistics(s, master_outs, target, skip=()) -> None:
    """The op's own reduction stages other than its outputs (an instance norm's sums over each
    image's planes, left at the root as scalar loops: 6.7x ONNX Runtime's time) on vectors."""
    for op in inner_data_stages(s, master_outs):
        if all(op is not t.op for t in master_outs) and op not in skip and getattr(op, "reduce_axis", None) \
                and s[op].attach_type == "root" and op.num_outputs == 1:
            _vector_reduction(s, op.output(0), target)


COLUMN_TILE_VECTORS = 4     # vectors of outputs a column reduction accumulates at a time


def innermost_read(t):
    """The loop variable of the innermost index of the largest tensor `t`'s reduction reads, or
    None where that index is not a plain variable."""
    body = t.op.body[0] if hasattr(t.op, "body") and len(t.op.body) == 1 else None
    if not isinstance(body, Reduce):
        return None
    loads: list = []
    for e in body.source:
        post_order_visit(e, lambda n: loads.append(n) if isinstance(n, TensorLoad) else None)
    if not loads:
        return None
    big = max(loads, key=lambda ld: num_elements(ld.tensor) or 0)
    return big.indices[-1] if big.indices else None


def lane_partials(s, t, lanes: int):
    """Reduction `t`'s last reduce axis split by `lanes` and factored (rfactor) into a local
    vector of partial results per output, added up at the end; returns the stage's fused output
    loop (None for a single output), where the partials are computed."""
    st = s[t]
    _, ki = st.split(st.op.reduce_axis[-1], factor=lanes)
    partial = s.rfactor(t, ki)
    data = list(st.op.axis)          # rfactor rebuilt the stage's operation and its axes
    outer = st.fuse(*data) if len(data) > 1 else (data[0] if data else None)
    pst = s[partial]
    pst.set_scope("local")
    lane, *_ = pst.op.axis
    pst.reorder(*pst.op.reduce_axis, lane)
    pst.vectorize(lane)
    if outer is not None:
        pst.compute_at(st, outer)
    return outer


def _vector_reduction(s, t, target) -> bool:
    """Schedule reduction stage `t` on vectors; False (nothing done) where no vector form fits.

    Rows (the innermost read index is the last reduce axis, at least two vectors long and a
    multiple of the vector): the reduction is split by the vector width and factored (rfactor)
    into a vector of partial results per output, added up at the end; a ReduceMax over 768
    contiguous floats ran a scalar loop, 2.7x ONNX Runtime's time.
    Columns (the innermost read index is the innermost output axis, at least one vector long):
    the reduction loops run outside a tile of up to COLUMN_TILE_VECTORS vectors of outputs, so
    each input row adds a vector at a time; a ReduceSum over the 512 rows of 512 x 1024 read one
    column after the other, 22x ONNX Runtime's time."""
    op = t.op
    if not getattr(op, "reduce_axis", None) or op.num_outputs != 1 or num_elements(t) in (None, 0):
        return False
    lanes = target.simd_lanes(t.dtype)
    if lanes < 2:
        return False
    inner = innermost_read(t)
    st = s[t]
    data, red = list(st.op.axis), list(st.op.reduce_axis)
    if any(not isinstance(iv.dom.extent, IntImm) for iv in data + red):
        return False
    parallel = _worth_parallel(t, target)
    # partial results change the order of the additions: not for half-precision accumulators,
    # which round at every addition (bfloat16 sums accumulate in bfloat16, as ONNX's ReduceSum)
    reorder_ok = t.dtype in ("float32", "float64") or not t.dtype.startswith(("float", "bfloat"))
    if reorder_ok and inner is red[-1].var and (_ext(red[-1]) or 0) >= 2 * lanes and (_ext(red[-1]) or 0) % lanes == 0:
        outer = lane_partials(s, t, lanes)
        if outer is not None and parallel:
            st.parallel(outer)
        return True
    if data and inner is data[-1].var and (_ext(data[-1]) or 0) >= lanes:
        width = _ext(data[-1]) or 0
        tile = lanes * max(1, min(COLUMN_TILE_VECTORS, width // lanes))
        do, di = st.split(data[-1], factor=tile)
        vo, vi = st.split(di, factor=lanes)
        st.reorder(*data[:-1], do, *red, vo, vi)
        outer = st.fuse(*data[:-1], do) if data[:-1] else do
        st.unroll(vo)
        st.vectorize(vi)
        if parallel and (num_elements(t) or 0) >= 2 * tile:
            st.parallel(outer)
        return True
    return False


# the most columns of a dense whose dot products per row of x run together (one accumulator
# vector each)
ROW_TILE_COLUMNS = 8


def _dense_row_tile(s, t, target) -> bool:
    """A dense (M, N) whose N <= ROW_TILE_COLUMNS dot products run over a contiguous K (a
    multiple of the vector, at least two vectors): per row of x, the N dot products step through
    K together, one vector of partial sums each, so x's vector is loaded once for all N and the
    N multiply-add chains overlap; the lanes are added up at the end of the row.  (One dot
    product at a time was one dependent chain: 12 x 200 x 1024 @ 1024 x 5 took 1.35x ONNX
    Runtime's time.)  False (nothing done) for other shapes."""
    st = s[t]
    data, red = list(st.op.axis), list(st.op.reduce_axis)
    lanes = target.simd_lanes(t.dtype)
    if len(data) != 2 or len(red) != 1 or lanes < 2 or t.dtype not in ("float32", "float64"):
        return False
    rows, cols, depth = _ext(data[0]), _ext(data[1]), _ext(red[0])
    if not rows or not cols or not depth or cols > ROW_TILE_COLUMNS or depth % lanes or depth < 2 * lanes:
        return False
    if innermost_read(t) is not red[0].var:
        return False
    _, ki = st.split(red[0], factor=lanes)
    partial = s.rfactor(t, ki, factor_axis=2)          # (row, column, lane): a vector per column
    row = st.op.axis[0]
    pst = s[partial]
    pst.set_scope("local")
    prow, pcol, lane = pst.op.axis
    pst.reorder(prow, *pst.op.reduce_axis, pcol, lane)
    pst.unroll(pcol)
    pst.vectorize(lane)
    pst.compute_at(st, row)
    if _worth_parallel(t, target):
        st.parallel(row)
    return True


@template("dense.cpu")
def dense_rows(s, master_outs, outs, target, cfg=None) -> None:
    """dense(x, w): each output a dot product of a row of x and a row of w, both contiguous, on
    vectors of partial sums (`_vector_reduction`'s rows), the epilogue as elementwise stages.  The
    CPU runs dense where a product has fewer columns than half a vector (alter_layout_matmul):
    a packed GEMM padded 4x512x1024 @ 1024x1 to 16 columns, 2.6x ONNX Runtime's time.  Other
    shapes, and half-precision products (rounded once at the end), take the complex template."""
    main = master_outs[0]
    if cast_back_source(main) is not None or any(num_elements(t) == 0 for t in list(master_outs) + list(outs)) \
            or not (_dense_row_tile(s, main, target) or _vector_reduction(s, main, target)):
        complex_out(s, master_outs, outs, target, cfg)
        return
    for t in outs:
        if t not in master_outs:
            schedule_elementwise_stage(s, t, target)


def _leading_for_cores(axes: list, cores: int) -> list:
    """The outermost of `axes` (outer to inner) that the parallel loop fuses: the first, and
    those after it while they give fewer than two iterations per core (a conv with one filter
    on one image has a single (image, filter) plane: its rows go to the threads too, where a
    64 -> 1 channel 3x3 conv on 224x224 ran as fast on 2 threads as on 1)."""
    count, taken = 1, []
    for iv in axes:
        if taken and count >= 2 * cores:
            break
        taken.append(iv)
        count *= _ext(iv) or 2 * cores
    return taken


@template("complex.cpu")
def complex_out(s, master_outs, outs, target, cfg=None) -> None:
    """Main stage: data axes, then reduction axes, then the innermost data axis (vectorized).
    With an epilogue, the main stage is computed per row of the epilogue's output."""
    main = master_outs[0]
    if any(num_elements(t) == 0 for t in list(master_outs) + list(outs)):
        return
    source = cast_back_source(main)
    if source is None and conv_rows(s, master_outs, outs, target):
        return
    _vector_statistics(s, master_outs, target, skip={source.op} if source is not None else ())
    if source is not None:      # a float32 sum rounded to half precision: the rounding is epilogue
        if main not in outs:
            s[main].compute_inline()
        main, master_outs = source, [source]
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
    if epilogue and not all(known_shape(t) == known_shape(main) and reads_only_at(s, t, main, own(t))
                            for t in epilogue):
        # the epilogue re-indexes the master's output (reshape, transpose, ...): computing the master
        # per output row would need all of it, so it stays a whole stage of its own
        for t in epilogue:
            schedule_elementwise_stage(s, t, target)
        epilogue = []
    if not epilogue:
        if len(data) > 1:
            leading = _leading_for_cores(data[:-1], target.num_cores)
            st.parallel(st.fuse(*leading) if len(leading) > 1 else leading[0])
        return
    out = epilogue[0]
    ost = s[out]
    oaxes = list(ost.op.axis)
    if len(oaxes) == len(data) and len(oaxes) >= 2:
        if (_ext(oaxes[-1]) or 0) >= lanes:
            xo, xi = ost.split(oaxes[-1], factor=lanes)
            ost.vectorize(xi)
        leading = _leading_for_cores(oaxes[:-1], target.num_cores)
        fused = ost.fuse(*leading) if len(leading) > 1 else leading[0]
        st.compute_at(ost, fused if oaxes[-2] in leading else oaxes[-2])
        ost.parallel(fused)
    else:
        schedule_elementwise_stage(s, out, target)
    for t in epilogue[1:]:
        schedule_elementwise_stage(s, t, target)
