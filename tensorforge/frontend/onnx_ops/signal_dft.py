"""ONNX DFT (opsets 17 and 20) and STFT (opset 17) -> Graph: a DFT of static length is a matmul
with a constant matrix.

Signals carry their complex parts in a last axis of size 1 (real) or 2 (real, imaginary).  The
transformed axis and that complex axis are moved last and flattened, so one [rows, N * c] @
[N * c, K * c'] matmul computes every transform; the constant matrix holds the zero-padding or
truncation to dft_length, the sign and 1/n of the inverse, and the one-sided halving:

    forward          Y[k] = sum_j X[j] exp(-2 pi i j k / n)          k < n, or k <= n // 2 (onesided)
    inverse          y[t] = 1/n sum_k X[k] exp(+2 pi i k t / n)        complex output
    inverse onesided y[t] = 1/n sum_{k <= n//2} w_k Re(X[k] exp(2 pi i k t / n))   real output (irfft),
                     w_k = 1 for k = 0 and k = n / 2, else 2

The matrix is built in float64 and cast once to the signal's dtype.
"""
from __future__ import annotations

import numpy as np

from ...graph.ir import Value
from ..onnx import converter
from . import rnn_graph as g


def dft_matrix(length: int, parts: int, n: int, inverse: bool, onesided: bool) -> np.ndarray:
    """[length * parts, bins * out_parts] float64: a signal of `length` samples with `parts`
    (1: real, 2: complex) components to its size-`n` DFT, one row per (sample, part) and one
    column per (bin, part), real part first."""
    if inverse and onesided:                                   # irfft: half spectrum in, real signal out
        used = min(length, n // 2 + 1)
        k = np.arange(used)[:, None]
        angle = 2 * np.pi * k * np.arange(n)[None, :] / n
        weight = np.where((k == 0) | (2 * k == n), 1.0, 2.0) / n
        m = np.zeros((length, parts, n, 1))
        m[:used, 0, :, 0] = weight * np.cos(angle)
        if parts == 2:
            m[:used, 1, :, 0] = -weight * np.sin(angle)
        return m.reshape(length * parts, n)
    bins = n // 2 + 1 if onesided else n
    used = min(length, n)
    angle = 2 * np.pi * np.arange(used)[:, None] * np.arange(bins)[None, :] / n
    sign, norm = (1.0, 1.0 / n) if inverse else (-1.0, 1.0)
    cos, sin = norm * np.cos(angle), sign * norm * np.sin(angle)
    m = np.zeros((length, parts, bins, 2))
    m[:used, 0, :, 0], m[:used, 0, :, 1] = cos, sin             # Re x -> Re y, Im y
    if parts == 2:
        m[:used, 1, :, 0], m[:used, 1, :, 1] = -sin, cos        # Im x -> Re y, Im y
    return m.reshape(length * parts, bins * 2)


def dft_along(ctx, x: Value, axis: int, n: int, inverse: bool, onesided: bool) -> Value:
    """The DFT of x [..., N (at axis), ..., c] along `axis`, as [..., K (at axis), ..., c']."""
    rank = x.ndim
    parts = x.shape[-1]
    if parts not in (1, 2):
        raise ValueError(f"the signal's last dimension must be 1 (real) or 2 (complex), got shape {x.shape}")
    if not 0 <= axis < rank - 1:
        raise ValueError(f"axis {axis} must name a signal axis of the rank-{rank} input, not its last "
                         "(complex) axis")
    if n < 1:
        raise ValueError(f"dft_length must be positive, got {n}")
    perm = [d for d in range(rank - 1) if d != axis] + [axis, rank - 1]
    moved = g.transpose(ctx, x, perm)
    lead = moved.shape[:-2]
    rows = int(np.prod(lead, dtype=np.int64))
    flat = g.reshape(ctx, moved, (rows, x.shape[axis] * parts))
    matrix = dft_matrix(x.shape[axis], parts, n, inverse, onesided)
    y = g.matmul(ctx, flat, ctx.const(matrix.astype(x.dtype)))
    out_parts = 1 if inverse and onesided else 2
    y = g.reshape(ctx, y, (*lead, matrix.shape[1] // out_parts, out_parts))
    return g.transpose(ctx, y, list(np.argsort(perm)))


def _scalar_input(ctx, v: Value | None, what: str) -> int | None:
    if v is None:
        return None
    value = np.asarray(ctx.value_of(v, what))
    if value.size != 1:
        raise ValueError(f"{what} must be a scalar, got shape {value.shape}")
    return int(value.reshape(()))


@converter("DFT", since=17)
def convert_dft(ctx, inputs: list, attrs: dict) -> Value:
    x, length_in, axis_in = (list(inputs) + [None] * 3)[:3]
    if ctx.opset >= 20:
        if "axis" in attrs:
            raise ValueError("from opset 20 the axis is an input, not an attribute")
        axis = _scalar_input(ctx, axis_in, "axis")
        axis = -2 if axis is None else axis
    else:
        axis = int(attrs.get("axis", 1))
    rank = x.ndim
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is out of range for an input of rank {rank}")
    axis %= rank
    inverse, onesided = bool(attrs.get("inverse", 0)), bool(attrs.get("onesided", 0))
    n = _scalar_input(ctx, length_in, "dft_length")
    if n is None:
        n = 2 * (x.shape[axis] - 1) if inverse and onesided else x.shape[axis]
    return dft_along(ctx, x, axis, n, inverse, onesided)


@converter("STFT", since=17)
def convert_stft(ctx, inputs: list, attrs: dict) -> Value:
    signal, step_in, window, length_in = (list(inputs) + [None] * 4)[:4]
    if signal.ndim != 3 or signal.shape[2] not in (1, 2):
        raise ValueError(f"signal must have shape [batch, length, 1 or 2], got {signal.shape}")
    step = _scalar_input(ctx, step_in, "frame_step")
    length = _scalar_input(ctx, length_in, "frame_length")
    if window is not None and (window.ndim != 1 or (length is not None and window.shape[0] != length)):
        raise ValueError(f"window must be 1-D of length frame_length ({length}), got shape {window.shape}")
    if length is None:
        length = window.shape[0] if window is not None else signal.shape[1]
    if step is None or step < 1 or not 1 <= length <= signal.shape[1]:
        raise ValueError(f"frame_step ({step}) must be positive and frame_length ({length}) between 1 and the "
                         f"signal length {signal.shape[1]}")
    frames = (signal.shape[1] - length) // step + 1
    index = np.arange(frames)[:, None] * step + np.arange(length)[None, :]
    framed = ctx.add1("gather", [signal, ctx.const(index.astype(np.int64))], {"axis": 1})   # [B, F, L, c]
    if window is not None:
        w = window if window.dtype == signal.dtype else ctx.add1("cast", [window], {"dtype": signal.dtype})
        framed = g.mul(ctx, framed, g.reshape(ctx, w, (length, 1)))
    return dft_along(ctx, framed, 2, length, False, bool(attrs.get("onesided", 1)))
