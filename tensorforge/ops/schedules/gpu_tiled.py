"""Tunable GPU templates for the reductions that dominate models: direct conv2d (NCHW),
depthwise conv2d and matmul / dense / batched matmul.  This is the paper's GPU search space (section 5):

- each spatial output axis (conv: output channels, rows, columns; matmul: rows, columns) is split
  four ways, (block, virtual thread, thread, inner): blocks and threads are bound to blockIdx /
  threadIdx, the virtual threads to `vthread` (interleaved by tir/passes/inject_virtual_threads.py
  so each thread computes a strided, bank-conflict-free tile), the inner part is each thread's
  register tile;
- the reduction is split (outer, inner): per outer step the block fetches the inputs' tiles it
  needs into `shared` memory cooperatively (every thread of the block copies a slice; barriers are
  inserted by tir/passes/insert_barriers.py), then each thread accumulates its tile from them;
  `shared` is a knob (the paper's Figure 7 compares the two);
- the main stage is accumulated in registers (`local`) at the thread's loop and written through
  the fused elementwise epilogue (conv + bias + relu is one kernel), as on the CPU.

A shape the template does not cover (grouped convs, other dtypes, symbolic shapes) gets the
generic complex.gpu schedule (gpu.py).  Knob defaults keep a block at <= 256 threads.
"""
from __future__ import annotations

from ...te import thread_axis
from ...te.space import as_config
from . import template
from .common import const_extent, divisor_at_most, known_shape, reads_only_at
from .gpu import complex_out, inline_data_stages, schedule_roots

MAX_THREADS = 1024          # CUDA's and most OpenCL devices' work-group limit
BLOCK_TAGS = ("blockIdx.z", "blockIdx.y", "blockIdx.x")
THREAD_TAGS = ("threadIdx.z", "threadIdx.y", "threadIdx.x")


def _output_stage(s, main, outs):
    """The tensor the tiles are written to: the one elementwise epilogue reading `main` at its own
    index, else `main` itself (then None when another epilogue needs a launch of its own)."""
    epilogue = [t for t in outs if t.op is not main.op]
    if not epilogue:
        return main
    if len(epilogue) == 1 and main not in outs and known_shape(epilogue[0]) == known_shape(main) and \
            reads_only_at(s, epilogue[0], main, tuple(iv.var for iv in s[epilogue[0]].op.axis)):
        return epilogue[0]
    return None


def _thread_filter(entity) -> bool:
    return entity.size[2] <= 32


def tile_default(extent: int, threads: int) -> tuple:
    """(vthread, thread, inner) sizes for one axis: `threads` threads (a divisor), two virtual
    threads or a register tile of two when what is left allows."""
    t = divisor_at_most(extent, threads)
    left = extent // t
    v = 2 if left % 2 == 0 and left >= 4 else 1
    inner = 2 if (left // v) % 2 == 0 and left // v >= 4 else 1
    return (v, t, inner)


def schedule_tiled(s, cfg, main, out, spatial: list, batch: list, thread_caps: list, reduce_caps: list,
                   shared_inputs: list) -> None:
    """The template of the module docstring on stage `main` written through `out`.  `spatial`:
    indices of `out`'s axes that are tiled (at most three; the last is the fastest); `batch`:
    indices fused into the first block axis; `thread_caps`: default thread count per tiled axis."""
    ost = s[out]
    axes = list(ost.op.axis)
    if main is not out:
        s[main].set_scope("local")
        local = main
    else:
        local = s.cache_write(main, "local")
    cfg.define_knob("shared", [True, False], default=True)
    shared = bool(cfg["shared"].val)
    fetched = [s.cache_read(t, "shared", [local]) for t in shared_inputs] if shared else []
    blocks, vthreads, threads, inners = [], [], [], []
    for k, (ax, cap) in enumerate(zip(spatial, thread_caps)):
        ext = const_extent(axes[ax], 1)
        cfg.define_split(f"tile_{k}", ext, 4, policy="factors", filter=_thread_filter,
                         default=tile_default(ext, cap))
        b, v, t, i = cfg[f"tile_{k}"].apply(s, ost, axes[ax])
        blocks.append(b)
        vthreads.append(v)
        threads.append(t)
        inners.append(i)
    if batch:
        outer = [axes[i] for i in batch]
        fused = ost.fuse(*outer) if len(outer) > 1 else outer[0]
        blocks[0] = ost.fuse(fused, blocks[0])
    ost.reorder(*blocks, *vthreads, *threads, *inners)
    tags = len(spatial)
    for b, tag in zip(blocks, BLOCK_TAGS[-tags:]):
        ost.bind(b, thread_axis(tag))
    for v in vthreads:
        ost.bind(v, thread_axis("vthread"))
    for t, tag in zip(threads, THREAD_TAGS[-tags:]):
        ost.bind(t, thread_axis(tag))
    lst = s[local]
    lst.compute_at(ost, threads[-1])
    red = list(lst.op.reduce_axis)
    first = red[0]
    cfg.define_split("tile_r", const_extent(first, 1), 2, policy="factors", max_factor=16,
                     default=(divisor_at_most(const_extent(first, 1), reduce_caps[0]),))
    ro, ri = cfg["tile_r"].apply(s, lst, first)
    lst.reorder(ro, ri, *red[1:], *lst.op.axis)
    if not fetched:
        return
    sizes = [cfg[f"tile_{k}"].size[2] for k in range(tags)]
    for f in fetched:
        fst = s[f]
        fst.compute_at(lst, ro)
        rest = fst.fuse(*fst.op.axis) if len(fst.op.axis) > 1 else fst.op.axis[0]
        for size, tag in zip(sizes, THREAD_TAGS[-tags:]):
            part, rest = fst.split(rest, nparts=size)
            fst.bind(part, thread_axis(tag))


def _conv_ok(main) -> bool:
    attrs = main.op.attrs
    return (len(main.shape) == 4 and attrs.get("groups", 1) == 1 and main.dtype == "float32"
            and all(d is not None for d in known_shape(main)))


@template("conv2d.gpu", tunable=True)
def conv2d(s, master_outs, outs, target, cfg=None) -> None:
    """Direct NCHW conv2d: output channels, rows and columns tiled over blocks, virtual threads,
    threads and registers; the input channels split, their padded input and weight tiles fetched
    into shared memory per outer step."""
    cfg = as_config(cfg)
    main = master_outs[0]
    out = _output_stage(s, main, outs) if len(master_outs) == 1 else None
    if out is None or not _conv_ok(main):
        return complex_out(s, master_outs, outs, target, None)
    inline_data_stages(s, master_outs)
    schedule_tiled(s, cfg, main, out, spatial=[1, 2, 3], batch=[0], thread_caps=[4, 8, 8], reduce_caps=[8],
                   shared_inputs=list(main.op.input_tensors()))
    schedule_roots(s)


def _matmul_ok(main) -> bool:
    return (main.dtype == "float32" and len(main.shape) >= 2 and len(main.op.reduce_axis) >= 1
            and all(d is not None for d in known_shape(main)))


@template("matmul.gpu", tunable=True)
def matmul(s, master_outs, outs, target, cfg=None) -> None:
    """Matmul, dense and batched matmul: the last two output axes tiled, leading (batch) axes
    fused into the first block axis, the reduction split with the operands' tiles in shared
    memory."""
    cfg = as_config(cfg)
    main = master_outs[0]
    out = _output_stage(s, main, outs) if len(master_outs) == 1 else None
    if out is None or not _matmul_ok(main):
        return complex_out(s, master_outs, outs, target, None)
    inline_data_stages(s, master_outs)
    rank = len(main.shape)
    schedule_tiled(s, cfg, main, out, spatial=[rank - 2, rank - 1], batch=list(range(rank - 2)),
                   thread_caps=[8, 16], reduce_caps=[8], shared_inputs=list(main.op.input_tensors()))
    schedule_roots(s)


@template("depthwise_conv2d.gpu", tunable=True)
def depthwise_conv2d(s, master_outs, outs, target, cfg=None) -> None:
    """Depthwise conv2d: channels, rows and columns tiled as in conv2d.gpu; the reduction is the
    window's rows (split), the window's padded input tile and filters fetched into shared memory."""
    cfg = as_config(cfg)
    main = master_outs[0]
    out = _output_stage(s, main, outs) if len(master_outs) == 1 else None
    if out is None or not _matmul_ok(main) or len(main.shape) != 4:
        return complex_out(s, master_outs, outs, target, None)
    inline_data_stages(s, master_outs)
    schedule_tiled(s, cfg, main, out, spatial=[1, 2, 3], batch=[0], thread_caps=[4, 8, 8], reduce_caps=[3],
                   shared_inputs=list(main.op.input_tensors()))
    schedule_roots(s)
