"""Sliding-window arithmetic shared by the convolution and pooling ops (no ops are registered here).

Layout is NC + spatial ("NCHW-style"): axis 0 is the batch, axis 1 the channels, the rest the
`rank` spatial axes.  Padding is given ONNX-style as `(begin_1, .., begin_r, end_1, .., end_r)`.

What lives here:
  * attribute checks (`spatial_attrs`) shared by every windowed op, with errors naming the op;
  * output-size formulas (`window_out_size`, with ONNX's ceil_mode rule);
  * `resolve_auto_pad`: ONNX's auto_pad (SAME_UPPER / SAME_LOWER / VALID / NOTSET) to explicit pads,
    used by the converters so that the graph ops only ever see explicit padding;
  * `pad_stage`: the TE stage named "pad" that conv and pool read from (a guarded copy of the
    input, `pad_value` outside it), and `np_pad`, its NumPy twin for the references.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .. import te
from ..runtime import host_pool
from .registry import OpError


def spatial_attrs(op: str, rank: int, strides: Sequence[int] | None, padding: Sequence[int] | None,
                  dilations: Sequence[int] | None) -> tuple[tuple, tuple, tuple]:
    """Checked (strides, padding, dilations), each filled with its default when None."""
    strides = tuple(int(s) for s in strides) if strides is not None else (1,) * rank
    padding = tuple(int(p) for p in padding) if padding is not None else (0,) * (2 * rank)
    dilations = tuple(int(d) for d in dilations) if dilations is not None else (1,) * rank
    if len(strides) != rank or any(s < 1 for s in strides):
        raise OpError(f"{op}: strides must be {rank} positive integers, got {strides}")
    if len(dilations) != rank or any(d < 1 for d in dilations):
        raise OpError(f"{op}: dilations must be {rank} positive integers, got {dilations}")
    if len(padding) != 2 * rank:
        raise OpError(f"{op}: padding must hold {2 * rank} integers (begins then ends), got {padding}")
    return strides, padding, dilations


def check_layout(op: str, shape: Sequence[int], rank: int, what: str = "data") -> None:
    if len(shape) != rank + 2:
        raise OpError(f"{op}: {what} must have rank {rank + 2} (N, C and {rank} spatial axes), "
                      f"got shape {tuple(shape)}")


def effective_kernel(kernel: int, dilation: int) -> int:
    """The span of a dilated kernel: (k - 1) * d + 1."""
    return (kernel - 1) * dilation + 1


# Number of window positions along one axis (ceil_mode keeps a last, partial window unless it
# would start in the end padding, the rule ONNX and PyTorch share).  Defined in the runtime,
# whose host pooling kernel needs it too.
window_out_size = host_pool.window_out_size


def out_spatial(op: str, in_shape: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
                padding: Sequence[int], dilations: Sequence[int], ceil_mode: bool = False) -> tuple:
    """The output's spatial shape; OpError when a window does not fit."""
    r = len(kernel)
    out = tuple(window_out_size(in_shape[i], kernel[i], strides[i], dilations[i], padding[i],
                                padding[r + i], ceil_mode) for i in range(r))
    if any(o < 1 for o in out):
        raise OpError(f"{op}: the window (kernel {tuple(kernel)}, dilations {tuple(dilations)}) does not fit "
                      f"the padded input {tuple(in_shape)} with padding {tuple(padding)}")
    return out


def resolve_auto_pad(auto_pad: str, in_shape: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
                     dilations: Sequence[int], pads: Sequence[int] | None, op: str = "op") -> tuple:
    """ONNX auto_pad to explicit pads (begin_1.., end_1..).  SAME_* pads so that the output has
    ceil(in / stride) positions, the odd cell at the end (UPPER) or at the beginning (LOWER)."""
    r = len(kernel)
    if auto_pad in ("", "NOTSET"):
        pads = tuple(int(p) for p in pads) if pads is not None else (0,) * (2 * r)
        if len(pads) != 2 * r:
            raise OpError(f"{op}: pads must hold {2 * r} integers, got {pads}")
        if any(p < 0 for p in pads):
            raise OpError(f"{op}: negative pads {pads} are not allowed")
        return pads
    if auto_pad == "VALID":
        return (0,) * (2 * r)
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise OpError(f"{op}: auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got {auto_pad!r}")
    begins, ends = [], []
    for i in range(r):
        out = -(-in_shape[i] // strides[i])
        total = max(0, (out - 1) * strides[i] + effective_kernel(kernel[i], dilations[i]) - in_shape[i])
        small, big = total // 2, total - total // 2
        begins.append(small if auto_pad == "SAME_UPPER" else big)
        ends.append(big if auto_pad == "SAME_UPPER" else small)
    return tuple(begins + ends)


def pad_stage(data: te.Tensor, before: Sequence[int], extent: Sequence[int], pad_value=0) -> te.Tensor:
    """The stage "pad": `data` (N, C, *spatial) shifted by `before` per spatial axis into a tensor
    whose spatial extents are `extent`, `pad_value` wherever the source index falls outside.
    Returns `data` itself when the window needs no padding."""
    shape = [int(d.value) for d in data.shape]
    r = len(shape) - 2
    if all(b == 0 for b in before) and all(e <= s for e, s in zip(extent, shape[2:])):
        return data
    fill = te.const(pad_value, data.dtype) if not isinstance(pad_value, te.Expr) else pad_value

    def body(*idx):
        n, c, sp = idx[0], idx[1], idx[2:]
        src = [sp[i] - before[i] for i in range(r)]
        conds = []
        for i in range(r):
            if before[i] > 0:
                conds.append(src[i] >= 0)
            if extent[i] - before[i] > shape[2 + i]:
                conds.append(src[i] < shape[2 + i])
        load = data[(n, c, *src)]
        return te.if_then_else(te.all(*conds), load, fill) if conds else load

    return te.compute((shape[0], shape[1], *extent), body, name="pad")


def np_pad(x: np.ndarray, before: Sequence[int], extent: Sequence[int], pad_value) -> np.ndarray:
    """NumPy twin of `pad_stage`: spatial axes padded (or cut) to `extent`, shifted by `before`."""
    r = x.ndim - 2
    widths = [(0, 0), (0, 0)] + [(int(before[i]), max(0, int(extent[i]) - int(before[i]) - x.shape[2 + i]))
                                 for i in range(r)]
    out = np.pad(x, widths, mode="constant", constant_values=pad_value)
    return out[(slice(None), slice(None), *[slice(0, int(e)) for e in extent])]


def padded_extent(in_shape: Sequence[int], out_shape: Sequence[int], kernel: Sequence[int],
                  strides: Sequence[int], dilations: Sequence[int]) -> tuple:
    """Spatial extents of the padded input that the windows of `out_shape` read."""
    return tuple((out_shape[i] - 1) * strides[i] + effective_kernel(kernel[i], dilations[i])
                 for i in range(len(kernel)))


def window_slices(k_index: Sequence[int], out_shape: Sequence[int], strides: Sequence[int],
                  dilations: Sequence[int]) -> tuple:
    """Slices of a padded array (N, C, *spatial) picking, for kernel offset `k_index`, the input
    element under that offset for every output position."""
    return (slice(None), slice(None)) + tuple(
        slice(k * d, k * d + (o - 1) * s + 1, s) for k, o, s, d in zip(k_index, out_shape, strides, dilations))

