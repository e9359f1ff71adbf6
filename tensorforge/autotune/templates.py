"""Tunable schedule templates: the CPU templates of ops/schedules/ with their choices as knobs
(the `template + config -> schedule` arrow of autotune/).

Two kinds, one registry:

- group templates, registered under the name of the op's schedule template
  ("conv2d_nchwc.cpu", "matmul.cpu"), take the same arguments as ops/schedules templates,
  `(schedule, master outputs, group outputs, target, cfg)`, so `lowering.lower_group` can call
  them with a config.  The computation is the op's own (from the op registry).
- workload templates (TVM's `@autotvm.template`) build their computation too:
  `fn(cfg, target, inputs, **attrs) -> (schedule, outputs)`, with a NumPy `reference`.

Every template declares its knobs and applies them in one function; with `cfg` None it
builds its heuristic default, which is the space's default point (see space.py), so each
default here schedules exactly like the ops/schedules template it mirrors.

Knobs of the matmul templates (the GEMM micro-kernel of testing/gemm.py):
  tile_m  rows per register tile (mr), tails allowed;
  tile_n  (panels, vectors per tile, lanes per vector): nr = vectors * lanes columns per tile;
  tile_k  inner split of the reduction, unrolled when > 1;
  order   tile loops panel-first (a column panel of the right operand stays in cache) or rows-first;
  pack_b  (matmul.cpu only) copy the (K x nr) panel of the right operand into a contiguous
          buffer once per panel (`cache_read` attached at the panel loop).
Knobs of conv2d_nchwc.cpu (register-blocked conv in NCHW[x]c):
  tile_x        output columns per register tile (xb);
  tile_fi       the B output channels of a block as (vectors, lanes per vector);
  order_outer   channel block loop outside or inside the output row loop;
  order_inner   order of the reduction loops (rc, ry, rx) and the column tile (with blocked
                input data rc is the input channel block, and the channel within the block
                runs right inside it);
  unroll_acc    unroll of the column and vector loops of the accumulator;
  unroll_kw     unroll the kernel column loop.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from ..ops.schedules.cpu import (PARALLEL_MIN_ELEMS, _blocked_epilogue, _const_extent, _divisor_at_most,
                                 _inner_data_stages, _nchw_epilogue, _size, complex_out,
                                 schedule_elementwise_stage)
from ..ops.schedules.cpu_matmul import (_blockable, _elementwise_reader, _main_stage, panel_width,
                                        row_tile)
from ..te.tensor import PlaceholderOp
from .space import as_config

# Registry ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TunableTemplate:
    name: str
    fn: Callable
    kind: str                           # "group" | "workload"
    reference: Callable | None = None   # workload templates: NumPy reference(*inputs, **attrs)

    @property
    def module(self) -> str:
        """The module that registers this template (a measuring process imports it)."""
        return self.fn.__module__


_TUNABLE: dict[str, TunableTemplate] = {}


def _register(t: TunableTemplate) -> None:
    old = _TUNABLE.get(t.name)
    if old is not None and (old.fn.__module__, old.fn.__qualname__) != (t.fn.__module__, t.fn.__qualname__):
        raise ValueError(f"tunable template {t.name!r} is registered twice ({old.module} and {t.module})")
    _TUNABLE[t.name] = t


def tunable(name: str) -> Callable:
    """Register a group template `fn(s, master_outs, outs, target, cfg)` under `name` (the op's
    schedule template name)."""
    def wrap(fn: Callable) -> Callable:
        _register(TunableTemplate(name, fn, "group"))
        return fn
    return wrap


def tunable_workload(name: str, reference: Callable) -> Callable:
    """Register a workload template `fn(cfg, target, inputs, **attrs) -> (schedule, outputs)`
    with its NumPy `reference(*input arrays, **attrs) -> output array(s)`."""
    if not callable(reference):
        raise ValueError(f"tunable workload template {name!r} needs a NumPy reference")

    def wrap(fn: Callable) -> Callable:
        _register(TunableTemplate(name, fn, "workload", reference))
        return fn
    return wrap


def _load_schedule_modules() -> None:
    """Import ops/schedules/ (once): templates that live there register as they are imported."""
    from ..ops.schedules import _load
    _load()


def get_tunable(name: str) -> TunableTemplate | None:
    """The tunable template registered as `name`, or None."""
    if name not in _TUNABLE:
        _load_schedule_modules()
    return _TUNABLE.get(name)


def require_tunable(name: str, module: str | None = None) -> TunableTemplate:
    """The template `name`, importing `module` first when given (a fresh measuring process)."""
    if name not in _TUNABLE and module:
        importlib.import_module(module)
    if name not in _TUNABLE:
        _load_schedule_modules()
    t = _TUNABLE.get(name)
    if t is None:
        raise KeyError(f"no tunable template {name!r}; registered: {', '.join(sorted(_TUNABLE))}")
    return t


def tunable_names() -> list[str]:
    _load_schedule_modules()
    return sorted(_TUNABLE)


# Helpers -----------------------------------------------------------------------------------

def _ext(iv) -> int:
    return _const_extent(iv, 0)


# Matmul: the GEMM micro-kernel with knobs ----------------------------------------------------

def _tile_n_candidates(n: int, lanes: int, default: tuple) -> list[tuple]:
    """(vectors, lanes per vector) pairs for the column tile: half, one or two machine vectors
    per vector, tiles up to 64 columns (or the default's width)."""
    widths = sorted({max(1, lanes // 2), lanes, 2 * lanes})
    limit = max(64, default[0] * default[1])
    out = [(v, w) for w in widths for v in range(1, 7) if v * w <= limit]
    return out if default in out else out + [default]


def _right_operand(main):
    """The placeholder the main stage reads as its right operand (the one indexed by the
    reduction axis and the column axis), or None."""
    from ..ir.expr import TensorLoad
    from ..ir.functor import post_order_visit

    k = main.op.reduce_axis[0].var
    j = main.op.axis[-1].var
    found = []

    def fn(node):
        if isinstance(node, TensorLoad) and isinstance(node.tensor.op, PlaceholderOp) and len(node.indices) >= 2:
            if node.indices[-2] is k and node.indices[-1] is j:     # `==` would build an expression
                found.append(node.tensor)
    post_order_visit(main.op.body[0], fn)
    return found[0] if len(found) == 1 else None


def schedule_gemm_tunable(s, main, outs, target, cfg, packed_nr: int | None = None,
                          packable: bool = False) -> None:
    """The register-tiled GEMM of the matmul templates (ops/schedules/cpu_matmul.py), with its
    choices as knobs (see the module docstring); its default point is those templates' schedule."""
    lanes = max(1, target.simd_lanes(main.dtype))
    m, n, kk = _ext(main.op.axis[-2]), _ext(main.op.axis[-1]), _ext(main.op.reduce_axis[0])
    nr0 = packed_nr or panel_width(m, n, lanes)
    nr0 = min(nr0, -(-n // lanes) * lanes)
    mr0 = row_tile(m, nr0, lanes)
    default_n = (nr0 // lanes, lanes) if nr0 % lanes == 0 else (1, nr0)
    cfg.define_split("tile_m", m, 2, policy="factors", allow_tail=True, max_factor=max(mr0, min(m, 16)),
                     default=(mr0,))
    cfg.define_split("tile_n", n, 3, policy="candidate", allow_tail=True,
                     candidates=_tile_n_candidates(n, lanes, default_n), default=default_n)
    cfg.define_split("tile_k", kk, 2, policy="factors", max_factor=8, default=(1,))
    cfg.define_reorder("order", 2, policy="all", default=(0, 1))      # (panel loop, row loop)
    right = _right_operand(main) if packable else None
    if right is not None:
        cfg.define_knob("pack_b", [False, True], default=False)
    pack = right is not None and cfg["pack_b"].val
    if pack:
        packed = s.cache_read(right, "global", [main])

    epilogue = [t for t in outs if t is not main]
    if len(epilogue) == 1 and not s[main].is_output and _elementwise_reader(s, epilogue[0], main):
        out = epilogue[0]
        s[main].set_scope("local")
        acc = main
    else:
        out = main
        acc = s.cache_write(main, "local")
        for t in epilogue:
            schedule_elementwise_stage(s, t, target)
    ost = s[out]
    *batch, i, j = ost.op.axis
    io, ii = cfg["tile_m"].apply(s, ost, i)
    jo, jv, jl = cfg["tile_n"].apply(s, ost, j)
    first, second = cfg["order"].apply(s, ost, [jo, io])
    ost.reorder(*batch, first, second, ii, jv, jl)
    ost.unroll(jv)
    ost.vectorize(jl)
    s[acc].compute_at(ost, second)
    vl = cfg["tile_n"].size[2]
    *_, ai, aj = s[acc].op.axis
    (ak,) = s[acc].op.reduce_axis
    ajo, aji = s[acc].split(aj, factor=vl)
    ki = cfg["tile_k"].size[1]
    if ki > 1:
        ako, aki = cfg["tile_k"].apply(s, s[acc], ak)
        s[acc].reorder(ako, aki, ai, ajo, aji)
        s[acc].unroll(aki)
    else:
        s[acc].reorder(ak, ai, ajo, aji)
    s[acc].unroll(ai)
    s[acc].unroll(ajo)
    s[acc].vectorize(aji)
    outer = first
    if target.num_cores > 1:
        outer = ost.fuse(*batch, first) if batch else first
        ost.parallel(outer)
    if pack:
        # once per panel: at the panel loop (fused with the batch loops when it is outermost)
        s[packed].compute_at(ost, outer if first is jo else jo)
        pc = s[packed].op.axis[-1]
        pco, pci = s[packed].split(pc, factor=vl)
        s[packed].vectorize(pci)


@tunable("matmul.cpu")
def matmul(s, master_outs, outs, target, cfg=None) -> None:
    """Register tiles for float32 matmuls (operands as they come; `pack_b` packs the right
    operand's panels on the fly); others get the generic complex template (no knobs)."""
    cfg = as_config(cfg)
    main = _main_stage(s, master_outs)
    if main is None or main is not master_outs[0] or not _blockable(main, target):
        return complex_out(s, master_outs, outs, target, None)
    schedule_gemm_tunable(s, main, outs, target, cfg, packable=True)


@tunable("matmul_packed.cpu")
def matmul_packed(s, master_outs, outs, target, cfg=None) -> None:
    """Register tiles over a right operand packed into column panels at compile time."""
    cfg = as_config(cfg)
    main = _main_stage(s, master_outs)
    if main is None or not _blockable(main, target):
        return complex_out(s, master_outs, outs, target, None)
    cols = master_outs[0]
    if cols is not main and cols not in outs:
        s[cols].compute_inline()
    schedule_gemm_tunable(s, main, outs, target, cfg, packed_nr=main.op.attrs.get("nr"))


# conv2d in NCHW[x]c ------------------------------------------------------------------------

_INNER_ORDERS = ((0, 1, 2, 3), (1, 2, 0, 3), (1, 0, 2, 3), (0, 1, 3, 2))   # over (rc, ry, rx, x)

# A padded row up to this many vectors wide is unrolled (see _schedule_pad).  With 64-bit
# indices (codegen/c_like.py) the C compiler makes a wider row's guarded vectors masked
# contiguous loads, not gathers: unrolling rows of two to four vectors no longer paid, and their
# dozens of statements per loop cost GCC's vectorizer a second of analysis on ResNet-18.
_PAD_UNROLL_VECTORS = 1


def _schedule_pad(s, t, target) -> None:
    """The zero-padded copy of the conv's input, (N, C, H', W') or blocked (N, C/b, H', W', b):
    a loop per image and channel (block) (on the thread pool), one per row, the row's elements
    inside, so no index needs a div/mod per element.

    The copy's load sits under a test of the column, which the loop vectorizer leaves to the C
    compiler; with 64-bit indices it makes each vector one masked contiguous load.  A row of at
    most `_PAD_UNROLL_VECTORS` vectors is unrolled (the column tests fold to constants); a wider
    row is split into vectors.  (Scheduled as one flat loop like other elementwise stages,
    this copy took 15-20% of a 56x56, 64-channel 3x3 conv.)  In the blocked layout the test
    depends on the row and column only, not on the channel within the block: the block is the
    vector loop, and each vector is one guarded contiguous copy or zeros."""
    st = s[t]
    if len(st.op.axis) not in (4, 5):
        schedule_elementwise_stage(s, t, target)
        return
    n, c, h, w, *block = st.op.axis
    lanes = max(1, target.simd_lanes(t.dtype))
    width = _ext(w)
    if block:
        (ci,) = block
        if _ext(ci) > lanes and _ext(ci) % lanes == 0:
            _, cii = st.split(ci, factor=lanes)
            st.vectorize(cii)
        else:
            st.vectorize(ci)
    elif 0 < width <= _PAD_UNROLL_VECTORS * lanes:
        st.unroll(w)
    elif width >= 2 * lanes:
        _, wi = st.split(w, factor=lanes)
        st.vectorize(wi)
    if target.num_cores > 1 and _size(t) >= PARALLEL_MIN_ELEMS:
        # planes to the threads; rows too when planes are few (an RGB image), for balance
        few = (_ext(n) or 1) * (_ext(c) or 1) < 4 * target.num_cores
        st.parallel(st.fuse(n, c, h) if few else st.fuse(n, c))
    else:
        st.fuse(n, c)


@tunable("conv2d_nchwc.cpu")
def conv2d_nchwc(s, master_outs, outs, target, cfg=None) -> None:
    """The register-blocked conv of ops/schedules/cpu.py (an (xb x B) accumulator per image,
    channel block, output row and column tile, computed inside a fused epilogue, NCHW or
    blocked, when there is one) with its choices as knobs.  With blocked input data the
    reduction has a fourth axis, the input channel within its block (rci), which runs right
    inside the block loop (rc) wherever order_inner puts that."""
    cfg = as_config(cfg)
    conv = master_outs[0]
    for op in _inner_data_stages(s, master_outs):
        if op is not conv.op and not op.reduce_axis:
            _schedule_pad(s, op.output(0), target)
    n, fo, y, x, fi = s[conv].op.axis
    ow, block = _ext(x) or 1, _ext(fi) or 1
    lanes = max(1, target.simd_lanes(conv.dtype))
    vectors = max(1, block // lanes)
    xb0 = _divisor_at_most(ow, max(1, 24 // vectors))
    cfg.define_split("tile_x", ow, 2, policy="factors", max_factor=max(xb0, min(ow, 32)), default=(xb0,))
    widths = sorted({w for w in (lanes // 2, lanes, 2 * lanes, block) if w >= 1 and w <= block and block % w == 0}
                    | {lanes})
    cfg.define_split("tile_fi", block, 2, policy="candidate", allow_tail=True,
                     candidates=[(w,) for w in widths], default=(lanes,))
    cfg.define_reorder("order_outer", 2, policy="all", default=(0, 1))          # (channel block, row)
    cfg.define_reorder("order_inner", 4, policy="candidates", candidates=_INNER_ORDERS,
                       default=_INNER_ORDERS[0])
    cfg.define_annotate("unroll_acc", 2, policy="try_unroll", default=("unroll", "unroll"))
    cfg.define_knob("unroll_kw", [False, True], default=False)

    epilogue = [t for t in outs if t is not conv]
    fused_out = epilogue[0] if len(epilogue) == 1 and _nchw_epilogue(s, epilogue[0], conv) else None
    blocked_out = epilogue[0] if len(epilogue) == 1 and fused_out is None and _blocked_epilogue(s, epilogue[0], conv) \
        else None
    if fused_out is not None:
        # the (xb x B) tile is computed in registers inside the epilogue's loops, which add the
        # bias, apply the activation and write NCHW while the tile is hot
        on, of, oy, ox = s[fused_out].op.axis
        ofo, ofi = s[fused_out].split(of, factor=block)
        oxo, oxi = cfg["tile_x"].apply(s, s[fused_out], ox)
        a, b = [ofo, oy][cfg["order_outer"].perm[0]], [ofo, oy][cfg["order_outer"].perm[1]]
        # per column of the tile, its B channels: the tile is read contiguously from the local
        # buffer and the C compiler turns the transposition into short row stores (with the
        # channels outside, a 64-channel 3x3 stride-2 conv on 56x56 was ~3% slower)
        s[fused_out].reorder(on, a, b, oxo, oxi, ofi)
        s[conv].compute_at(s[fused_out], oxo)
        s[conv].set_scope("local")
        acc, parallel_axes = conv, (on, a, b)
        out_stage = s[fused_out]
    else:
        if blocked_out is not None:
            # the same loops over the blocked epilogue (bias, activation, residual add in
            # NCHW[x]c): the tile goes from registers through the epilogue to memory once
            out, acc = blocked_out, conv
            s[conv].set_scope("local")
        else:
            for t in epilogue:
                schedule_elementwise_stage(s, t, target)
            out, acc = conv, s.cache_write(conv, "local")
        on, ofo, oy, ox, ofi = s[out].op.axis
        xo, xi = cfg["tile_x"].apply(s, s[out], ox)
        a, b = [ofo, oy][cfg["order_outer"].perm[0]], [ofo, oy][cfg["order_outer"].perm[1]]
        s[out].reorder(on, a, b, xo, xi, ofi)
        s[acc].compute_at(s[out], xo)
        fo_, fi_ = s[out].split(ofi, factor=lanes)
        s[out].vectorize(fi_)
        parallel_axes = (on, a, b)
        out_stage = s[out]
    an, afo, ay, ax, afi = s[acc].op.axis
    rc, ry, rx, *rci = s[acc].op.reduce_axis
    afo_, afi_ = cfg["tile_fi"].apply(s, s[acc], afi)
    inner = cfg["order_inner"].apply(s, s[acc], [rc, ry, rx, ax])
    if rci:
        # the channel within the input block right inside its block: (rc, rci, ry, rx) reads
        # the OIHW[B]o weights in memory order (inside the column tile, a 7x7, 512-channel
        # 3x3 conv streamed its weights with 1 KiB strides and ran 25% slower)
        inner.insert(inner.index(rc) + 1, rci[0])
    s[acc].reorder(*inner, afo_, afi_)
    cfg["unroll_acc"].apply(s, s[acc], [ax, afo_])
    if cfg["unroll_kw"].val:
        s[acc].unroll(rx)
    s[acc].vectorize(afi_)
    out_stage.parallel(out_stage.fuse(*parallel_axes))
