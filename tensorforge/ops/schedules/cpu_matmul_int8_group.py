"""`matmul_integer_vnni.cpu`: the fused group of an int8 matrix product (ops/quant_integer_vnni.py,
or ops/quant_act_vnni.py's product of two activations, batched: the same tiles in each batch)
and its epilogue (bias, requantize, relu) on the CPU's int8 dot-product unit.

The same register-blocked GEMM as the workload template `matmul_int8.cpu`: the group's output
is cut in (mr x nv*L) tiles, panel loop outside the row loop; the tile's int32 accumulator
`acc` is a local buffer attached at the row-tile loop, its (mr x nv*L x kb) loops tensorized
with the unit's block intrinsic (VNNI `vpdpbusd` or AMX `tdpbusd`); the epilogue (the zero-point
correction, the bias, the requantization to 8 bits) runs on the tile as it leaves the
accumulator, so the int32 sums never reach memory.  An epilogue that re-indexes the product
(a reshape, a transpose: attention's split into heads) becomes a stage of its own; the part of
the epilogue before the re-indexing (requantize, bias, a lookup) still runs on the tile, and
only its result, often 8-bit, is stored whole for the re-indexing stage to read.

Knobs: `unit` (the int8 units this CPU has, with the packing's lane count), `mr` (rows per tile,
dividing the padded rows; AMX: 16), `nv` (vectors or tiles per row), `kb` (the k step of one
intrinsic call), `order` (panels or rows outermost).
"""
from __future__ import annotations

from ...te.space import as_config
from .. import x86_intrin as X
from . import template
from .common import const_shape, master_reads, reads_only_at, schedule_elementwise_stage
from .cpu_matmul_int8 import _kb_choices, available_units


def _stage(t, name: str):
    """The tensor named `name` among `t`'s producers (depth first), or None."""
    todo, seen = [t], set()
    while todo:
        u = todo.pop()
        if u.op.name == name:
            return u
        if u.op in seen:
            continue
        seen.add(u.op)
        todo.extend(u.op.input_tensors())
    return None


@template("matmul_integer_vnni.cpu", tunable=True)
def matmul_integer_vnni(s, master_outs, outs, target, cfg=None) -> None:
    cfg = as_config(cfg)
    main = master_outs[0]
    acc = _stage(main, "acc")
    mp, ncols = const_shape(acc)[-2:]
    lanes = _lanes(acc)
    kp = int(acc.op.reduce_axis[0].dom.extent.value)
    units = [u for u in available_units() if X.LANES[u] == lanes]
    if not units:
        raise RuntimeError(f"matmul_integer_vnni.cpu needs an int8 dot-product unit with {lanes} lanes "
                           "(AVX-512 VNNI or AMX: 16, AVX-VNNI: 8); this CPU has none")
    cfg.define_knob("unit", units, default=units[0])
    unit = cfg["unit"].val
    amx = unit == "amx" and mp % 16 == 0 and kp % 64 == 0
    block_unit = "amx" if amx else ("avx512vnni" if unit == "amx" else unit)   # AMX CPUs have VNNI too
    rows = [16] if amx else [r for r in range(1, 9) if mp % r == 0]
    schedule_block_gemm(s, master_outs, outs, target, cfg, lanes, rows, 16 if amx else None, 2 if amx else 4,
                        _kb_choices(kp, block_unit), lambda mr, nv, kb: X.block_intrin(block_unit, mr, nv, kb),
                        registers=None if amx else X.VECTOR_REGISTERS[block_unit])
    colsum = _stage(main, "colsum")
    if colsum is not None:          # a product of activations: its column sums, one row on the unit
        vnni = "avx512vnni" if unit == "amx" else unit
        s[_stage(main, "ones")].compute_root()
        *_, ci, cj = s[colsum].op.axis
        cjo, cji = s[colsum].split(cj, factor=lanes)
        s[colsum].reorder(cjo, ci, cji)
        s[colsum].tensorize(ci, X.block_intrin(vnni, 1, 1, kp))


def schedule_block_gemm(s, master_outs, outs, target, cfg, lanes: int, rows: list, mr_default, nv_limit: int,
                        kbs: list, intrin, registers: int | None = None) -> None:
    """The blocked GEMM of the module docstring for a master whose stages are "A_pad" (optional),
    "acc" (the reduction the block intrinsic `intrin(mr, nv, kb)` computes) and the main stage;
    declares the knobs mr (from `rows`), nv, kb (from `kbs`) and order on `cfg`.  `registers`:
    the vector registers of a register-blocked unit, which allows the wide tiles of
    `nv_choices`."""
    main = master_outs[0]
    acc, src = _stage(main, "acc"), _stage(main, "A_pad")
    panels = const_shape(acc)[-1] // lanes
    kp = int(acc.op.reduce_axis[0].dom.extent.value)
    nvs, nv_default = nv_choices(panels, nv_limit, registers)
    fits = [r for r in rows if r <= 4 and (nv_default <= 4 or (r + 1) * nv_default + 1 <= registers)]
    cfg.define_knob("mr", rows, default=mr_default or max(fits or rows[:1]))
    cfg.define_knob("nv", nvs, default=nv_default)
    cfg.define_knob("kb", kbs, default=kbs[0])
    cfg.define_knob("order", ["panels", "rows"], default="panels")
    mr, nv, kb = cfg["mr"].val, cfg["nv"].val, cfg["kb"].val
    for t in (src, _stage(main, "rowsum"), _stage(main, "colsum")):
        if t is not None:
            s[t].compute_root()
    epilogue = [t for t in outs if t not in master_outs]
    if len(outs) == 1 and epilogue and _matrix_axes(s, outs[0], main) is not None:
        s[main].compute_inline()
        out = outs[0]
    else:
        out = _elementwise_prefix(s, outs, main) or main
        for t in epilogue:
            _schedule_reindexing_stage(s, t, target, out)
    st = s[out]
    i, j = _matrix_axes(s, out, main) or st.op.axis[-2:]
    io, ii = st.split(i, factor=mr)
    jo, ji = st.split(j, factor=nv * lanes)
    first, second = (jo, io) if cfg["order"].val == "panels" else (io, jo)
    st.reorder(first, second, ii, ji)
    if const_shape(main)[-1] % (nv * lanes) == 0:
        _, jv = st.split(ji, factor=lanes)          # one register of int32 sums per statement
        st.vectorize(jv)
    s[acc].set_scope("local")
    s[acc].compute_at(st, second)
    ai, aj = s[acc].op.axis[-2:]
    (ak,) = s[acc].op.reduce_axis
    if kb < kp:
        ako, aki = s[acc].split(ak, factor=kb)
        s[acc].reorder(ako, ai, aj, aki)
    s[acc].tensorize(ai, intrin(mr, nv, kb))
    if target.num_cores > 1:
        st.parallel(first)


def _matrix_axes(s, t, main):
    """The two axes of `t` that index the product's rows and columns, when `t` has the product's
    shape (unit axes aside when the product has none: a reshape that only adds or drops axes of
    extent 1, like a language model's (seq, 1, vocab) logits) and reads the product only at
    those axes; else None.  The register tile then goes through `t` to memory at once."""
    if t is main:
        return None
    shape, tshape = const_shape(main), const_shape(t)
    if tshape == shape:
        axes = tuple(s[t].op.axis)
    elif len(shape) == 2 and 1 not in shape and tuple(d for d in tshape if d != 1) == shape:
        axes = tuple(iv for iv, d in zip(s[t].op.axis, tshape) if d != 1)
    else:
        return None
    return axes[-2:] if reads_only_at(s, t, main, tuple(iv.var for iv in axes)) else None


def nv_choices(panels: int, nv_limit: int, registers: int | None = None) -> tuple[list, int]:
    """The vectors (panels) per tile row that divide the `panels` of the product, and the
    default: the widest up to `nv_limit`.  A register-blocked unit (`registers` vector
    registers) whose panel count no width 2..4 divides (625 panels: the 10000 words of a
    language model's projection) also gets the widths 5..8 that divide it and leave registers
    for two rows ((rows + 1) * nv + 1 <= registers: accumulators, B vectors, the broadcast A),
    and the narrowest of those is the default: a tile one vector wide does one vpdpbusd per
    load of B and per broadcast of A and runs at about half the unit's speed."""
    nvs = [v for v in range(1, min(4, panels) + 1) if panels % v == 0]
    default = max(v for v in nvs if v <= nv_limit)
    if registers is not None and default == 1 and panels > 1:
        wide = [v for v in range(5, min(8, panels) + 1) if panels % v == 0 and 3 * v + 1 <= registers]
        nvs += wide
        default = wide[0] if wide else default
    return nvs, default


def _elementwise_prefix(s, outs, main):
    """The stage farthest from the product that reads it only at its own index (leading axes of
    extent 1 aside: the reshape of a batched product), when every read of the product by the
    group's outputs goes through it: the epilogue part that can run on the register tile.  It
    is made a stage of its own (the product inlined into it), and the re-indexing rest reads its
    (narrower) result; None when there is none."""
    shape = const_shape(main)
    found = []
    for t in _between(outs, main):
        tshape = const_shape(t)
        lead = len(tshape) - len(shape)
        if lead < 0 or tshape[lead:] != shape or any(d != 1 for d in tshape[:lead]) or t in outs:
            continue
        if reads_only_at(s, t, main, tuple(iv.var for iv in s[t].op.axis)[lead:]):
            found.append(t)
    for t in found:
        if any(t is not u and t in _between([u], main) for u in found):
            continue                       # a later stage of the prefix reads this one
        s[t].compute_root()
        s[main].compute_inline()
        if all(not master_reads(s, o, main) for o in outs):
            return t
        s[main].compute_root()             # another path reads the product: keep it whole
        s[t].compute_inline()
        return None
    return None


def _between(outs, main) -> list:
    """The tensors computed from `main` on the way to `outs` (outs included, main not)."""
    found, todo, seen = [], list(outs), set()
    while todo:
        t = todo.pop()
        if t.op in seen or t.op is main.op:
            continue
        seen.add(t.op)
        if _reaches(t, main):
            found.append(t)
        todo.extend(_inputs(t))
    return found


def _reaches(t, main) -> bool:
    """Whether `t` is computed from `main`."""
    todo, seen = [t], set()
    while todo:
        u = todo.pop()
        if u.op is main.op:
            return True
        if u.op not in seen:
            seen.add(u.op)
            todo.extend(_inputs(u))
    return False


def _inputs(t) -> list:
    return t.op.input_tensors() if hasattr(t.op, "input_tensors") else []


def _schedule_reindexing_stage(s, t, target, main=None) -> None:
    """An epilogue that re-indexes the product (reshape, transpose): its loops in its own axis
    order, unfused (fusing them would put a division by every extent into each element's index),
    the outermost on the thread pool; the C compiler vectorizes the innermost loop.

    When an axis other than the innermost one indexes the product's columns (a conv's result
    transposed back to (N, M, OH, OW)), the loops walk the product down its rows, one element
    per cache line: that axis is then blocked by TRANSPOSE_BLOCK and its inner part moved just
    outside the innermost axis, so each line of the product read serves TRANSPOSE_BLOCK
    consecutive outputs while the rows it touches stay in the L1 cache, and the writes stay
    contiguous along the innermost axis."""
    axes = list(s[t].op.axis)
    if len(axes) < 2:
        schedule_elementwise_stage(s, t, target)
        return
    column = _column_axis(s, t, main) if main is not None else None
    if column is not None and column < len(axes) - 1 and const_shape(t)[column] > TRANSPOSE_BLOCK:
        co, ci = s[t].split(axes[column], factor=TRANSPOSE_BLOCK)
        order = axes[:column] + [co] + axes[column + 1:-1] + [ci, axes[-1]]
        s[t].reorder(*order)
        if target.num_cores > 1:
            s[t].parallel(axes[0] if const_shape(t)[0] > 1 and column > 0 else co)
        return
    if target.num_cores > 1:
        s[t].parallel(axes[0] if const_shape(t)[0] > 1 else axes[1])


TRANSPOSE_BLOCK = 16      # int32 elements in a 64-byte cache line


def _column_axis(s, t, main) -> int | None:
    """The position of the axis of `t` that every read of the product `main` uses, alone, as
    the column index (after simplification with the axes' ranges); None when there is none."""
    from ...arith.analyzer import Analyzer
    reads = master_reads(s, t, main)
    if not reads:
        return None
    analyzer = Analyzer()
    names = [iv.var for iv in s[t].op.axis]
    for v, extent in zip(names, const_shape(t)):
        analyzer.bind(v, (0, extent - 1))
    found = set()
    for r in reads:
        col = analyzer.simplify(r[-1])
        hit = [k for k, v in enumerate(names) if col is v]
        if not hit:
            return None
        found.add(hit[0])
    return found.pop() if len(found) == 1 else None


def _lanes(acc) -> int:
    """The lane count L of the packed operand acc reads (its (.., N/L, Kp/g, L, g) shape, two
    axes more than acc's)."""
    for t in acc.op.input_tensors():
        shape = const_shape(t)
        if len(shape) == len(const_shape(acc)) + 2 and shape[-1] in (2, 4):
            return shape[-2]
    raise ValueError("matmul_integer_vnni.cpu: the accumulator reads no packed (N/L, Kp/4, L, 4) operand")
