"""A conv with few filters and many taps becomes a GEMM to one plane per filter and tap, then
the sum of the shifted planes (ops/nn_tap_sum.py):

    conv2d(x, W) = tap_sum(conv2d(x, W'), kernel, padding, dilations)
    W'[m * K + ky * KW + kx, c, 0, 0] = W[m, c, ky, kx]

The 1x1 conv is a GEMM of M * K rows at the GEMM's speed (alter_layout makes it one on the
image itself, or a blocked 1x1 conv on blocked data), and the sum costs one vector add per tap
and output vector.  The forms this replaces wasted most of their work on few filters: padded
to a block of 8 or 16 filters, 1 filter used 1 lane of 8; on the generic NCHW template
(`alter_layout.rows_conv`) each product waited on the one before it.  Measured at one thread,
ONNX Runtime 1.32 in the same run (benchmarks/shape_sweep.py's cases and a VAE's output layer):

- 5 -> 1 channels, a 63x1 kernel on 512x14: 0.30 ms blocked, 0.16 here (ONNX Runtime 0.42);
- 96 -> 4 channels, 16 taps over 1024 samples: 0.24 ms blocked, 0.08 here (0.30);
- 48 -> 7 channels, 3x3 on 96x96: 0.80 ms blocked, 0.40 here (0.75);
- 64 -> 1 channels, 3x3 on 224x224: 1.47 ms on the NCHW template, 0.72 here (5.75);
- a VAE decoder's 64 -> 3 output conv on 128x128: 0.93 -> 0.51 ms (the model 0.68 -> 0.66 of
  ONNX Runtime's time).

Where it applies (`_applies`): a float32 conv1d or conv2d with a constant weight, one group,
stride 1, few filters for the vector width (TAP_LANE_SHARE), at least two taps, enough input
channels per filter for the product to pay for writing its planes (TAP_CHANNELS_PER_FILTER,
TAP_MIN_CHANNELS_ROWS), planes of at most TAP_PLANES_BYTES and work enough for two kernels
(TAP_MIN_MACS).  A conv1d runs as
a conv2d of height 1.  Transposed convs of stride 1 arrive here as convs
(conv_transpose_as_conv).  CPU targets only.

A strided 1-D transposed conv with few filters runs on tap planes as well (`_transposed`): one
plane per (filter, output phase, tap), a sum of each phase's taps, the phases interleaved.  The
phase template it replaces ran such a layer as a 2-D conv of height 1, a block of filters per
vector: Conv-TasNet's decoder (512 -> 1 channel, 16 taps at stride 8 over 2000 frames) 0.46 ms,
0.21 ms here (ONNX Runtime 0.22); Demucs' output layer (64 -> 2, 8 taps at stride 4) 0.29 ->
0.23 ms (0.21).
"""
from __future__ import annotations

import numpy as np

from ...target import Target
from ..ir import Graph, Node, Value
from .alter_layout import rows_conv
from .rewrite import constant_weight_window, rewrite_nodes

# filters times this at most a vector's float32 lanes: 7 filters with AVX-512's 16 (padded to a
# block of 8, they use 7 of 16 lanes' work per multiply-add), 3 with AVX2's 8 (whose blocks of
# 8 filters are whole vectors: 7 filters use 7 of 8)
TAP_LANE_SHARE = 16 / 7
# input channels from which the product pays for writing its planes: more than
# TAP_CHANNELS_PER_FILTER per filter.  The planes' traffic (written, padded, read: filters x taps
# values per position) grows with the filters, what the product saves over a padded block with
# the channels (each of the block's multiply-adds served channels x taps of one position): 7
# filters of 5 channels, a 64x1 kernel on 512x7, took 0.20 ms blocked, 0.58 ms as planes; 4 of 5
# channels, 5 taps over 4000: 0.025 and 0.030 ms.  With at most ROW_FILTERS filters over rows
# of two vectors or more, which the NCHW template serves without waste, from
# TAP_MIN_CHANNELS_ROWS (1 filter, 3x3 on 128x128: 4 channels 0.026 -> 0.043 ms; 16 channels,
# 7x7 on 64x64: 0.089 -> 0.086; 32 channels, 7 taps over 8192: 0.125 -> 0.073)
TAP_CHANNELS_PER_FILTER = 2
TAP_MIN_CHANNELS_ROWS = 24
TAP_PLANES_BYTES = 16 << 20
# a conv of fewer multiply-adds stays one kernel: two cost more than the planes save (1 filter,
# 64 channels, 3 taps over 64 samples: 0.0045 ms as one, 0.0063 ms as two)
TAP_MIN_MACS = 1 << 15
TAP_MAX_PADDED_KERNEL = 1.25
# input channels from which a strided 1-D transposed conv runs on tap planes: below them the
# phase template's blocks of filters were faster (1 filter of 16 taps at stride 2 over 4000
# frames: 5 channels 0.011 -> 0.023 ms as planes, 16 channels 0.028 -> 0.032, 32 channels
# 0.054 -> 0.044; Demucs' 64 and Conv-TasNet's 512 channels gain more)
TAP_MIN_CHANNELS_TRANSPOSED = 32


def conv_as_tap_planes(graph: Graph, target: Target) -> Graph:
    if not target.prefers("NCHWc"):
        return graph
    return rewrite_nodes(graph, lambda n, params: _rewrite(n, params, target))


_CONVS = {"conv1d": 1, "conv2d": 2}


def _applies(n: Node, window: tuple, target: Target) -> bool:
    """The conv `n` (its constant_weight_window) runs as tap planes and their sum (module docstring)."""
    _, x, w, y, strides, _, pads = window
    if x.dtype != "float32" or w.dtype != "float32" or int(n.attrs.get("groups", 1)) != 1:
        return False
    if any(s != 1 for s in strides) or any(p < 0 for p in pads):
        return False
    filters, taps, channels = w.shape[0], int(np.prod(w.shape[2:])), x.shape[1]
    if not _few_filters(filters, taps, target):
        return False
    if 4 * x.shape[0] * filters * taps * int(np.prod(x.shape[2:])) > TAP_PLANES_BYTES:
        return False
    if filters * taps * channels * int(np.prod(y.shape[2:])) < TAP_MIN_MACS:
        return False
    if rows_conv(n, target):
        return channels >= TAP_MIN_CHANNELS_ROWS
    return channels > TAP_CHANNELS_PER_FILTER * filters


def _few_filters(filters: int, taps: int, target: Target) -> bool:
    """Few enough filters for the vector width, and at least two taps."""
    return taps >= 2 and TAP_LANE_SHARE * filters <= target.simd_lanes("float32")


def _rewrite(n: Node, params: dict, target: Target) -> list[Node] | None:
    window = constant_weight_window(n, params, _TRANSPOSED)
    if window is not None:
        return _transposed(n, window, params) if _transposed_applies(n, window, target) else None
    window = constant_weight_window(n, params, _CONVS)
    if window is None or not _applies(n, window, target):
        return None
    rank, x, w, y, _, dilations, pads = window
    weight = params[w]
    filters, channels = weight.shape[:2]
    if rank == 1:
        weight = weight[:, :, None, :]
        pads, dilations = (0, pads[0], 0, pads[1]), (1, dilations[0])
    kernel = weight.shape[2:]
    taps = int(np.prod(kernel))
    per_tap = np.ascontiguousarray(weight.transpose(0, 2, 3, 1).reshape(filters * taps, channels, *([1] * rank)))
    w_taps = Value(f"{w.name}_taps", per_tap.shape, per_tap.dtype.name)
    params[w_taps] = per_tap
    planes = Value(f"{y.name}_taps", (x.shape[0], filters * taps, *x.shape[2:]), y.dtype)
    nodes = [Node(n.op, (x, w_taps), (planes,), {"groups": 1}, f"{n.name}_taps")]
    attrs = {"kernel": tuple(int(k) for k in kernel), "padding": pads, "dilations": dilations}
    if rank == 2:
        return nodes + [Node("tap_sum", (planes,), (y,), attrs, n.name)]
    rows = Value(f"{y.name}_taps_row", (x.shape[0], filters * taps, 1, x.shape[2]), y.dtype)
    out_row = Value(f"{y.name}_row", (y.shape[0], y.shape[1], 1, y.shape[2]), y.dtype)
    return nodes + [Node("reshape", (planes,), (rows,), {"shape": rows.shape}, f"{n.name}_taps_row"),
                    Node("tap_sum", (rows,), (out_row,), attrs, n.name),
                    Node("reshape", (out_row,), (y,), {"shape": y.shape}, f"{n.name}_row")]


_TRANSPOSED = {"conv_transpose1d": 1}


def _transposed_applies(n: Node, window: tuple, target: Target) -> bool:
    """The strided 1-D transposed conv `n` runs as tap planes, their sums per output phase, and
    the phases interleaved (`_transposed`): where its kernel padded with zero taps to a multiple
    of the stride grows by at most TAP_MAX_PADDED_KERNEL (a 3-tap kernel at stride 2 would do
    a third more work; 2-D ones keep the phase template, which was as fast or faster on a
    DCGAN's 64 -> 3 and a decoder's 32 -> 3 output layers)."""
    _, x, w, _, (stride,), dilations, pads = window
    if x.dtype != "float32" or w.dtype != "float32" or int(n.attrs.get("groups", 1)) != 1 or stride == 1:
        return False
    if any(d != 1 for d in dilations) or any(p < 0 for p in pads):
        return False
    filters, taps = w.shape[1], w.shape[2]
    if not _few_filters(filters, taps, target) or x.shape[1] <= TAP_CHANNELS_PER_FILTER * filters:
        return False
    if -(-taps // stride) * stride > TAP_MAX_PADDED_KERNEL * taps or x.shape[1] < TAP_MIN_CHANNELS_TRANSPOSED:
        return False
    return 4 * x.shape[0] * filters * taps * x.shape[2] <= TAP_PLANES_BYTES


def _transposed(n: Node, window: tuple, params: dict) -> list[Node] | None:
    """A strided 1-D transposed conv with few filters: y[o] = sum over inputs i and taps k with
    o = i * s + k - p of x[i] * w[k].  With the kernel padded with zero taps to J * s and tap
    k = j * s + r, output o + p = q * s + r takes the taps j of its phase r from inputs q - j:

        y'[m, r, q] = sum over j of planes[m, r, j][q - j],    y[o] = y'[(o + p) % s, (o + p) // s]

    So: a pointwise conv1d to the planes (filter m, phase r, tap j), tap_sum over the J taps (the
    filters of the sum being the (m, r) pairs), the phases interleaved by a transpose, and the
    padding cut off."""
    _, x, w, y, (stride,), _, (pad, _) = window
    weight = params[w]
    channels, filters, kernel = weight.shape
    taps = -(-kernel // stride)
    full = np.zeros((channels, filters, taps * stride), weight.dtype)
    full[:, :, :kernel] = weight
    # plane (m, r, t) holds tap j = J - 1 - t of phase r: tap_sum's taps run from the farthest
    # input (j = J - 1) to the nearest
    per_tap = full.reshape(channels, filters, taps, stride)[:, :, ::-1, :]
    per_tap = np.ascontiguousarray(per_tap.transpose(1, 3, 2, 0).reshape(-1, channels, 1))
    rows = -(-(pad + y.shape[2]) // stride)        # phase rows q up to the last output's
    if rows < x.shape[2]:
        return None
    batch, length = x.shape[0], x.shape[2]
    w_taps = Value(f"{w.name}_taps", per_tap.shape, per_tap.dtype.name)
    params[w_taps] = per_tap
    planes = Value(f"{y.name}_taps", (batch, per_tap.shape[0], length), y.dtype)
    planes4 = Value(f"{y.name}_taps_row", (batch, per_tap.shape[0], 1, length), y.dtype)
    sums = Value(f"{y.name}_phases", (batch, filters * stride, 1, rows), y.dtype)
    split = Value(f"{y.name}_phase_axis", (batch, filters, stride, rows), y.dtype)
    moved = Value(f"{y.name}_phase_moved", (batch, filters, rows, stride), y.dtype)
    grid = Value(f"{y.name}_grid", (batch, filters, rows * stride), y.dtype)
    return [Node("conv1d", (x, w_taps), (planes,), {"groups": 1}, f"{n.name}_taps"),
            Node("reshape", (planes,), (planes4,), {"shape": planes4.shape}, f"{n.name}_taps_row"),
            Node("tap_sum", (planes4,), (sums,), {"kernel": (1, taps), "padding": (0, taps - 1, 0, rows - length)},
                 f"{n.name}_phases"),
            Node("reshape", (sums,), (split,), {"shape": split.shape}, f"{n.name}_phase_axis"),
            Node("transpose", (split,), (moved,), {"perm": (0, 1, 3, 2)}, f"{n.name}_phase_moved"),
            Node("reshape", (moved,), (grid,), {"shape": grid.shape}, f"{n.name}_grid"),
            Node("slice", (grid,), (y,), {"starts": (pad,), "ends": (pad + y.shape[2],), "axes": (2,)}, n.name)]
