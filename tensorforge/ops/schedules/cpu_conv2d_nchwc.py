"""CPU template `conv2d_nchwc.cpu` for the convolution in the blocked layout NCHW[x]c
(ops/nn_conv_nchwc.py); tunable.

Register-blocked: per (image, channel block, output row, tile of `xb` columns) a local
(xb x B) accumulator, the reduction loops (input channel, kernel row, kernel column) outside the
unrolled columns and the vectorized B output channels.  With an epilogue (bias, activation,
residual add) the tile is computed inside the epilogue's loops, NCHW or blocked, and goes from
registers through the epilogue to memory once; an NCHW output whose channel planes share L1
sets (`planes_share_l1_sets`) goes through a local row buffer instead, copied out by channel rows.  The zero-padded input is built by its own loop
nest first (common.schedule_pad).

Knobs (the heuristic above is the default point of the space):
  tile_x        output columns per register tile (xb), tails allowed;
  tile_fi       the B output channels of a block as (vectors, lanes per vector);
  order_outer   channel block loop outside or inside the output row loop;
  order_inner   order of the reduction loops (rc, ry, rx) and the column tile (with blocked
                input data rc is the input channel block, and the channel within the block
                runs right inside it);
  unroll_acc    unroll of the column and vector loops of the accumulator;
  unroll_kw     unroll the kernel column loop;
  chunk_rc      (only where one output block's weights exceed the L2 cache) the input channels
                (or channel blocks) of one pass over the output row: the row's accumulators
                live in a local buffer, and every column tile of the row runs the pass's part
                of the reduction while that chunk of the weights stays in cache (the kc
                blocking of a GEMM); 0 is the whole reduction per tile.  With several
                images whose rows' accumulators fit ROW_BUFFER_BYTES together, each pass
                covers every image, the channel block loop alone parallel: the chunk of the
                weights is then read once per block, not once per image (the full pitch
                estimator's 256 -> 512 channel, 64-tap conv over 4 frames: 12.4 -> 9.3 ms at one
                thread; the model 141.8 -> 136.0 ms, ONNX Runtime 137.4).
"""
from __future__ import annotations

import math
from collections import Counter

from ...te.space import as_config
from . import gemm_kernel, template
from .common import (
    blocked_epilogue,
    column_tile,
    const_extent,
    const_shape,
    divisor_at_most,
    inner_data_stages,
    known_shape,
    reads_only_at,
    schedule_elementwise_stage,
    schedule_pad,
)

TILE_VECTORS = 24            # accumulator vectors of the default tile (fewer with 16 registers)
_INNER_ORDERS = ((0, 1, 2, 3), (1, 2, 0, 3), (1, 0, 2, 3), (0, 1, 3, 2))   # over (rc, ry, rx, x)


def _ext(iv) -> int:
    return const_extent(iv, 0)


def _extents(ivs) -> int:
    """The product of the loops' constant extents (a symbolic one counts as 1)."""
    return math.prod(_ext(iv) or 1 for iv in ivs)


@template("conv2d_nchwc.cpu", tunable=True)
def conv2d_nchwc(s, master_outs, outs, target, cfg=None) -> None:
    """The register-blocked conv of the module docstring with its choices as knobs; `cfg` None
    is the heuristic default (the space's default point).  With blocked input data the
    reduction has a fourth axis, the input channel within its block (rci), which runs right
    inside the block loop (rc) wherever order_inner puts that."""
    cfg = as_config(cfg)
    conv = master_outs[0]
    rows = [t for t in conv.op.input_tensors() if getattr(t.op, "tag", "") == "conv2d_nchwc_rows"]
    if rows:
        return _pointwise_rows(s, conv, rows[0], outs, target, cfg)
    for op in inner_data_stages(s, master_outs):
        if op is not conv.op and not op.reduce_axis:
            schedule_pad(s, op.output(0), target)
    n, fo, y, x, fi = s[conv].op.axis
    ow, block = _ext(x) or 1, _ext(fi) or 1
    lanes = max(1, target.simd_lanes(conv.dtype))
    vectors = max(1, block // lanes)
    rc, ry, rx, *rci = s[conv].op.reduce_axis
    stride = int(conv.op.attrs.get("stride_x", 1))
    wide = _wide_strided_tile(lanes, blocked=bool(rci), kw=_ext(rx), stride=stride)
    inner, unroll_kw = _default_inner(target, lanes, blocked=bool(rci), kw=_ext(rx), stride=stride)
    xb0 = column_tile(ow, STRIDED_TILE_COLUMNS) if wide else _row_tile(ow, lanes, vectors, unroll_kw)
    cfg.define_split("tile_x", ow, 2, policy="factors", allow_tail=True, max_factor=max(xb0, min(ow, 32)),
                     default=(xb0,))
    widths = sorted({w for w in (lanes // 2, lanes, 2 * lanes, block) if w >= 1 and w <= block and block % w == 0}
                    | {lanes})
    cfg.define_split("tile_fi", block, 2, policy="candidate", allow_tail=True,
                     candidates=[(w,) for w in widths], default=(lanes,))
    # (channel block, row): for a 1x1 conv with 16 registers (measured there only), rows outside
    # when the weights fill the L2 cache: each row of input then stays in cache for every channel
    # block, the weights streaming (the order the tuner picked for MobileNet's 1x1 convs with 512
    # and 1024 channels on AVX2 with 512 KiB of L2; 2% less time on those layers in the model;
    # below, each block's weights stay in cache over the rows instead)
    rows_outer = _ext(ry) == 1 and _ext(rx) == 1 and _weights_fill_l2(s[conv], target, lanes)
    cfg.define_reorder("order_outer", 2, policy="all", default=(1, 0) if rows_outer else (0, 1))
    cfg.define_reorder("order_inner", 4, policy="candidates", candidates=_INNER_ORDERS, default=inner)
    cfg.define_annotate("unroll_acc", 2, policy="try_unroll",
                        default=("unroll", "none") if wide else ("unroll", "unroll"))
    cfg.define_knob("unroll_kw", [False, True], default=unroll_kw)
    chunks, chunk0 = _reduction_chunks(s[conv], target, ow, block)
    if chunks:
        cfg.define_knob("chunk_rc", [0, *chunks], default=chunk0)
    chunk = cfg["chunk_rc"].val if chunks else 0
    # with several images whose rows' accumulators fit ROW_BUFFER_BYTES together, a pass of the
    # reduction runs over every image's rows while its chunk of the weights is in cache
    images = _ext(n) or 1
    images_in_pass = bool(chunk) and images > 1 and 4 * images * (_ext(y) or 1) * ow * block <= ROW_BUFFER_BYTES

    epilogue = [t for t in outs if t is not conv]
    staged_rows = False
    fused_out = epilogue[0] if len(epilogue) == 1 and _nchw_epilogue(s, epilogue[0], conv) else None
    blocked_out = epilogue[0] if len(epilogue) == 1 and fused_out is None and blocked_epilogue(s, epilogue[0], conv) \
        else None
    if fused_out is not None and not chunk and planes_share_l1_sets(const_shape(fused_out), block):
        # the tiles go through a local (B x row) buffer, whose channel rows are then copied out
        # whole: written straight from a tile, the B channels' lines of one column would fall
        # into one set of the L1 cache and evict each other at every column (a 3 -> 64 channel
        # 3x3 conv on 224x224: 11.1 ms, 4.6 ms this way; on 225x225, 3.2 ms straight)
        staged = s.cache_write(fused_out, "local")
        copy = s[fused_out]
        on, of, oy, ox = copy.op.axis
        ofo, ofi = copy.split(of, factor=block)
        a, b = [ofo, oy][cfg["order_outer"].perm[0]], [ofo, oy][cfg["order_outer"].perm[1]]
        width = _buffer_width(const_shape(fused_out)[3], block, cfg["tile_x"].size[-1])
        if width:
            # a row as long as a multiple of 4 KiB (a 1-D conv over 1024 positions) would put
            # the buffer's own channel rows in one L1 set: the buffer holds a piece of the row
            oxc, ox = copy.split(ox, factor=width)
            copy.reorder(on, a, b, oxc, ofi, ox)
            _parallel_row(copy, (on, a, b))
            s[staged].compute_at(copy, oxc)
        else:
            copy.reorder(on, a, b, ofi, ox)
            s[staged].compute_at(copy, _parallel_row(copy, (on, a, b)))
        _, cxv = copy.split(ox, factor=lanes)
        copy.vectorize(cxv)
        sn, sf, sy, sx = s[staged].op.axis
        sxo, sxi = cfg["tile_x"].apply(s, s[staged], sx)
        s[staged].reorder(sn, sy, sxo, sxi, sf)
        out_stage, acc = s[staged], conv
        s[conv].compute_at(out_stage, sxo)
        s[conv].set_scope("local")
        staged_rows = True
    elif fused_out is not None:
        # the (xb x B) tile is computed in registers inside the epilogue's loops, which add the
        # bias, apply the activation and write NCHW while the tile is hot
        on, of, oy, ox = s[fused_out].op.axis
        ofo, ofi = s[fused_out].split(of, factor=block)
        oxo, oxi = cfg["tile_x"].apply(s, s[fused_out], ox)
        a, b = [ofo, oy][cfg["order_outer"].perm[0]], [ofo, oy][cfg["order_outer"].perm[1]]
        # per column of the tile, its B channels: the tile is read contiguously from the local
        # buffer and the C compiler turns the transposition into short row stores (with the
        # channels outside, a 64-channel 3x3 stride-2 conv on 56x56 was ~3% slower)
        out_stage, acc = s[fused_out], conv
        _attach_tile(s[conv], out_stage, (on, ofo, oy, a, b, oxo, oxi, ofi), chunk, images_in_pass)
        s[conv].set_scope("local")
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
        out_stage = s[out]
        _attach_tile(s[acc], out_stage, (on, ofo, oy, a, b, xo, xi, ofi), chunk, images_in_pass)
        fo_, fi_ = s[out].split(ofi, factor=lanes)
        s[out].vectorize(fi_)
    an, afo, ay, ax, afi = s[acc].op.axis
    rc, ry, rx, *rci = s[acc].op.reduce_axis
    afo_, afi_ = cfg["tile_fi"].apply(s, s[acc], afi)
    if chunk:
        # a pass over the row per chunk of the reduction: (chunk, column tile, the rest)
        axo, ax = cfg["tile_x"].apply(s, s[acc], ax)
        rc_pass, rc = s[acc].split(rc, factor=chunk)
    inner = cfg["order_inner"].apply(s, s[acc], [rc, ry, rx, ax])
    if rci:
        # the channel within the input block right inside its block: (rc, rci, ry, rx) reads
        # the OIHW[B]o weights in memory order (inside the column tile, a 7x7, 512-channel
        # 3x3 conv streamed its weights with 1 KiB strides and ran 25% slower)
        inner.insert(inner.index(rc) + 1, rci[0])
    outer_acc = [rc_pass, an, ay, axo] if images_in_pass else [rc_pass, axo] if chunk else []
    s[acc].reorder(*outer_acc, *inner, afo_, afi_)
    cfg["unroll_acc"].apply(s, s[acc], [ax, afo_])
    if cfg["unroll_kw"].val:
        s[acc].unroll(rx)
    s[acc].vectorize(afi_)
    if not chunk and not staged_rows:
        _parallel_row(out_stage, (on, a, b))


# x86 L1 data caches index their sets with the address bits below 4 KiB (64 sets of 64-byte lines,
# 8 or 12 ways): lines 4 KiB apart compete for one set
L1_SET_SPAN = 4096
LINE_BYTES = 64


def planes_share_l1_sets(shape: tuple, block: int) -> bool:
    """Whether the lines at one position of `block` consecutive channel planes of an NCHW output
    `shape` crowd into a few L1 sets: more than 4 of them in one (planes whose size is a multiple
    of 4 KiB: 32x32, 64x64, 224x224 float32 positions)."""
    if len(shape) != 4 or not all(shape):
        return False
    plane = shape[2] * shape[3] * 4
    sets = Counter((f * plane // LINE_BYTES) % (L1_SET_SPAN // LINE_BYTES) for f in range(block))
    return max(sets.values()) > 4


# positions of an output row in the row buffer at a time when whole rows would crowd the L1 sets
BUFFER_PIECE = 64


def _buffer_width(ow: int, block: int, xb: int) -> int | None:
    """Positions per piece of the (B x row) buffer of a conv whose NCHW output planes share L1
    sets, when rows of `ow` positions would make the buffer's own B rows share them too (None
    when whole rows do not): BUFFER_PIECE rounded up to whole column tiles of `xb`."""
    if ow <= BUFFER_PIECE or not planes_share_l1_sets((1, block, 1, ow), block):
        return None
    return -(-BUFFER_PIECE // xb) * xb


def _attach_tile(acc_stage, out_stage, loops, chunk: int, images_in_pass: bool) -> None:
    """The output loops ordered (image, a, b, column tiles, columns, channels), a and b the
    channel block and row in order_outer's order, with the accumulator at the column tile; with
    reduction chunks at the (image, a, b) row, parallel; with every image in a pass, the channel
    block alone outside, parallel, and the accumulator there."""
    on, ofo, oy, a, b, xo, xi, ofi = loops
    if images_in_pass:
        out_stage.reorder(ofo, on, oy, xo, xi, ofi)
        acc_stage.compute_at(out_stage, _parallel_row(out_stage, (ofo,)))
    else:
        out_stage.reorder(on, a, b, xo, xi, ofi)
        acc_stage.compute_at(out_stage, _parallel_row(out_stage, (on, a, b)) if chunk else xo)


def _parallel_row(stage, axes):
    """The (image, channel block, row) loops fused into the parallel loop; returns it."""
    fused = stage.fuse(*axes)
    stage.parallel(fused)
    return fused


# a chunk's weights take at most this share of the L2 cache (chunks of 1/4 and 1/8 of a 512 KiB
# L2 ran the pitch estimator's 1024-channel, 64-column conv 4% faster than the whole reduction
# per tile, 1/16 was no faster); a row's accumulators take at most ROW_BUFFER_BYTES of stack
CHUNK_L2_SHARE = 4
ROW_BUFFER_BYTES = 64 * 1024


def _reduction_chunks(stage, target, ow: int, block: int) -> tuple[list[int], int]:
    """(candidate chunk_rc values, the default) when the weights of one output channel block
    exceed the L2 cache: the largest divisor of the input channel (block) loop whose chunk of
    the weights fits CHUNK_L2_SHARE of L2, with its half and its double and fourfold (the
    divisors among them); else no candidates (no knob)."""
    rc, *rest = stage.op.reduce_axis
    n_rc = _ext(rc) or 1
    per_rc = 4 * block * _extents(rest)
    if n_rc * per_rc <= target.l2_cache_bytes or 4 * ow * block > ROW_BUFFER_BYTES:
        return [], 0
    fit = divisor_at_most(n_rc, max(1, target.l2_cache_bytes // CHUNK_L2_SHARE // per_rc))
    chunks = sorted({c for c in (fit // 2, fit, 2 * fit, 4 * fit) if 1 <= c < n_rc and n_rc % c == 0})
    return chunks, fit


def _pointwise_rows(s, conv, rows, outs, target, cfg) -> None:
    """A 1x1 stride-1 conv on blocked data (ops/nn_conv_nchwc.py `_pointwise_rows`): a register
    tile of `tile_p` consecutive positions (across rows) x the B channels of a block, the
    reduction over the input channels outside it; the machine's GEMM micro-kernel when its
    columns are one block (6 x 16 with AVX2), else as many positions as a row tile of the
    direct conv would have.  Knobs: tile_p (tails allowed) and order_outer (channel block
    outside the position tiles, or inside)."""
    _, _, positions, block = const_shape(rows)
    ow = const_shape(conv)[3]
    lanes = max(1, target.simd_lanes(rows.dtype))
    vectors = max(1, block // lanes)
    kernel = gemm_kernel.for_target(target, rows.dtype)
    if kernel.nr == block and kernel.lanes == lanes and positions >= kernel.mr:
        mr0 = column_tile(positions, kernel.mr)
    else:
        mr0 = _row_tile(ow, lanes, vectors)
    cfg.define_split("tile_p", positions, 2, policy="factors", allow_tail=True,
                     max_factor=max(mr0, min(positions, 32)), default=(mr0,))
    # (channel block, position tile): position tiles outside when the weights fill the L2 cache
    # (see conv2d_nchwc) and the input does not fit half of it; an input that does stays in L2
    # for every block, whose weights then stream once (MobileNet's 1024-channel 1x1 convs on 7x7:
    # 6-10% faster with the blocks outside on AVX2, its 512-channel ones on 14x14 4% slower)
    # A strided one (ResNet's downsampling) with 16 registers: position tiles outside when the
    # input rows it spans (s x s times what it reads: the skipped lines come along) exceed half
    # of L2, as each channel block would sweep them from L3 again (64 -> 128 channels on 56x56,
    # stride 2, on AVX2: 0.19 -> 0.16 ms in ResNet-18; 128 -> 256 on 28x28 the same either way)
    input_bytes = 4 * positions * _extents(s[rows].op.reduce_axis)
    stride = int(conv.op.attrs.get("stride_x", 1))
    spanned = stride * stride * input_bytes
    rows_outer = (_weights_fill_l2(s[rows], target, lanes) and 2 * input_bytes > target.l2_cache_bytes) or \
        (gemm_kernel.narrow_register_file(lanes) and stride > 1 and 2 * spanned > target.l2_cache_bytes)
    cfg.define_reorder("order_outer", 2, policy="all", default=(1, 0) if rows_outer else (0, 1))
    epilogue = [t for t in outs if t is not conv]
    last = epilogue[0] if len(epilogue) == 1 and conv not in outs else None
    if last is not None and (blocked_epilogue(s, last, conv) or _nchw_epilogue(s, last, conv)):
        out = last
        s[conv].compute_inline()
    else:
        out = conv
        for t in epilogue:
            schedule_elementwise_stage(s, t, target)
    s[rows].set_scope("local")
    ost = s[out]
    halves = []
    if len(ost.op.axis) == 4:        # NCHW epilogue: the block's channels of each position
        on, of, oy, ox = ost.op.axis
        ofo, ofi = ost.split(of, factor=block)
    else:
        on, ofo, oy, ox, ofi = ost.op.axis
        narrow = int(conv.op.attrs.get("out_block", 0))
        if narrow:                   # output blocks narrower than the tile's: stored piece by piece
            ofo, part = ost.split(ofo, factor=block // narrow)
            halves = [part]
    p = ost.fuse(oy, ox)
    po, pi = cfg["tile_p"].apply(s, ost, p)
    a, b = [ofo, po][cfg["order_outer"].perm[0]], [ofo, po][cfg["order_outer"].perm[1]]
    ost.reorder(on, a, b, pi, *halves, ofi)
    for part in halves:
        ost.unroll(part)
    # the (image, a) loop alone on the thread pool, unless it leaves cores idle for a good part
    # of the time (one output block: MobileNetV2's 144 -> 32 channel projection on 28x28 took
    # as long on 2 threads as on 1): then (image, a, b), each thread its own position tiles
    images, blocks = const_shape(rows)[:2]
    units = images * (blocks if a is ofo else -(-positions // cfg["tile_p"].size[-1]))
    spread = _idle_share(units, target.num_cores) > IDLE_SHARE
    par = ost.fuse(on, a, b) if spread else ost.fuse(on, a)
    s[rows].compute_at(ost, par if spread else b)
    if len(ost.op.axis) == 5:
        _, fi_ = ost.split(ofi, factor=lanes)
        ost.vectorize(fi_)
    _, _, ap, afi = s[rows].op.axis
    rco, rci = s[rows].op.reduce_axis
    afo_, afi_ = s[rows].split(afi, factor=lanes)
    s[rows].reorder(rco, rci, ap, afo_, afi_)
    s[rows].unroll(ap)
    s[rows].unroll(afo_)
    s[rows].vectorize(afi_)
    ost.parallel(par)


# the share of the cores' time a parallel loop may leave idle (its iterations do not split
# evenly) before the pointwise conv spreads its position tiles over the threads too
IDLE_SHARE = 0.1


def _idle_share(units: int, cores: int) -> float:
    """The share of `cores` x the busiest core's time left idle when `units` equal iterations
    are split among the cores."""
    return 1 - units / (cores * -(-units // cores))


def _weights_fill_l2(stage, target, lanes: int) -> bool:
    """With 16 registers (where the rows-outside order was measured): the weights of the conv
    stage (output channel blocks x block x its reduction) fill the L2 cache."""
    n_blocks, block = _ext(stage.op.axis[1]) or 1, _ext(stage.op.axis[-1]) or 1
    weight_bytes = 4 * n_blocks * block * _extents(stage.op.reduce_axis)
    return gemm_kernel.narrow_register_file(lanes) and weight_bytes >= target.l2_cache_bytes


def _row_tile(ow: int, lanes: int, vectors: int, unroll_kw: bool = False) -> int:
    """Columns of the default register tile: an even split with a shorter last tile when the best
    divisor is much narrower (with 16 registers: below 70% of it, DQN's 9 -> 5 + 4; with 32,
    only below half, so the measured AVX-512 tiles of 56 and 112 columns stay 8 wide).  With 16
    registers, a block of one vector and the taps in a loop of their own (not unrolled into the
    columns), the tile leaves a register for the tap's weight vector besides the broadcast: 14
    columns, not 15, which made the C compiler read the weight from memory for every column
    (a 48 -> 48 channel, 2-group conv1d with 16 taps: 2.8 -> 1.9 ms)."""
    limit = max(1, gemm_kernel.accumulators(lanes, TILE_VECTORS) // vectors)
    if gemm_kernel.narrow_register_file(lanes) and vectors == 1 and not unroll_kw:
        limit = min(limit, gemm_kernel.register_count(lanes) - 2)
    return column_tile(ow, limit, 0.7 if gemm_kernel.narrow_register_file(lanes) else 0.5)


def _default_inner(target, lanes: int, blocked: bool, kw: int, stride: int) -> tuple[tuple, bool]:
    """(order_inner, unroll_kw) of the default point.  With 32 vector registers: (rc, ry, rx,
    x), taps not unrolled (measured on AVX-512).  With 16 (AVX2), where the tuner found other
    orders 1.3-1.4x faster on ResNet-18 and MobileNet-v1:
    - an unblocked input (the stem: 3 channels, NCHW) with kernel columns that overlap: the
      kernel column inside the tile's columns, unrolled (rc, ry, x, rx), so the C compiler
      broadcasts each input value once for every (column, tap) pair that reads it (ResNet's 7x7
      stem 3.8 -> 2.7 ms, MobileNet's 3x3 0.42 -> 0.37 ms; DQN's 8x8 stride-4 layer was 20%
      slower so, and keeps the 32-register order);
    - a strided conv on blocked input (`_wide_strided_tile`): the kernel column inside the
      tile's columns, unrolled (rc, ry, x, rx), as the stem."""
    if not gemm_kernel.narrow_register_file(lanes):
        return _INNER_ORDERS[0], False
    if not blocked and stride < kw <= 7:
        return _INNER_ORDERS[3], True
    if _wide_strided_tile(lanes, blocked, kw, stride):
        return _INNER_ORDERS[3], True
    return _INNER_ORDERS[0], False


# columns of the wide tile of a strided conv on blocked input with 16 registers
STRIDED_TILE_COLUMNS = 15


def _wide_strided_tile(lanes: int, blocked: bool, kw: int, stride: int) -> bool:
    """With 16 registers, a strided conv with several kernel columns on blocked input takes a
    wide tile: up to STRIDED_TILE_COLUMNS columns, the kernel column unrolled inside them (the
    tile's columns share the input values their taps overlap on, and each tap's weight vectors
    serve every column), the block's vectors not unrolled.  The C compiler then keeps the
    weights in registers and the accumulators in L1.  The tuner found this on AVX2 for a 3x3
    stride-2 conv with 128 -> 256 channels (74% -> 89% of the FMA peak); in the model,
    ResNet-18's three 3x3 stride-2 convs ran 13-23% faster than with 7-column tiles in
    registers and the taps outside the channel blocks, DQN's 4x4 stride-2 conv 22%."""
    return gemm_kernel.narrow_register_file(lanes) and blocked and stride > 1 and kw > 1


def _nchw_epilogue(s, out, conv) -> bool:
    """`out` is NCHW and reads the NCHW[B]c conv only at (n, f // B, y, x, f % B): all of its
    channels, or all but the zero filters that filled the last of several blocks (the tile's
    last block then goes out under a channel test instead of through a whole pass over the
    blocked output that gathers each element).  Not a cut inside the only block: the tile's
    accumulator would shrink to the channels kept, too few for a vector (3 of 8 filters on
    256x256 ran 2x slower so)."""
    shape, oshape = known_shape(conv), known_shape(out)
    if len(s[out].op.axis) != 4 or None in shape or None in oshape or conv.op.attrs.get("out_block"):
        return False
    total, block = shape[1] * shape[4], shape[4]
    if (oshape[0], oshape[2], oshape[3]) != (shape[0], shape[2], shape[3]) or \
            not (oshape[1] == total or max(block, total - block) < oshape[1] < total):
        return False
    n, f, y, x = (iv.var for iv in s[out].op.axis)
    return reads_only_at(s, out, conv, (n, f // block, y, x, f % block))
