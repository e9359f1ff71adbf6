"""Host kernel of max pooling with the Indices output (ONNX MaxPool's second output): the maximum
of each window and the flat position in the input of the first element that holds it.

Windows run over the padded input with strides and dilations, as the compiled pooling does;
padded cells never win.  The position counts over the whole input (N, C, D1, ...) in row-major
order, or with the spatial axes in column-major order when `storage_order` is 1.
"""
from __future__ import annotations

import itertools

import numpy as np


def window_out_size(size: int, kernel: int, stride: int, dilation: int, pad_begin: int, pad_end: int,
                    ceil_mode: bool = False) -> int:
    """Number of window positions along one axis.  With ceil_mode a last, partial window is kept
    unless it would start in the end padding (the rule ONNX and PyTorch share).  The pooling and
    convolution ops (ops/nn_window.py) count their outputs with it too."""
    span = size + pad_begin + pad_end - ((kernel - 1) * dilation + 1)
    if span < 0:
        return 0
    if not ceil_mode:
        return span // stride + 1
    out = -(-span // stride) + 1
    return out - 1 if (out - 1) * stride >= size + pad_begin else out


def max_pool_with_indices(x: np.ndarray, kernel, strides=None, padding=None, dilations=None, ceil_mode=False,
                          storage_order: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rank = len(kernel)
    kernel = tuple(int(k) for k in kernel)
    strides = tuple(strides or (1,) * rank)
    dilations = tuple(dilations or (1,) * rank)
    padding = tuple(padding or (0,) * (2 * rank))
    n, c, *spatial = x.shape
    out_spatial = tuple(window_out_size(spatial[i], kernel[i], strides[i], dilations[i], padding[i], padding[rank + i],
                                  bool(ceil_mode)) for i in range(rank))
    pad_lo, pad_hi = padding[:rank], padding[rank:]
    # enough high padding for every window the output asks for (ceil_mode's partial windows)
    need = [(o - 1) * s + (k - 1) * d + 1 for o, s, k, d in zip(out_spatial, strides, kernel, dilations)]
    extra = [max(0, nd - (sp + lo + hi)) for nd, sp, lo, hi in zip(need, spatial, pad_lo, pad_hi)]
    widths = [(0, 0), (0, 0)] + [(lo, hi + e) for lo, hi, e in zip(pad_lo, pad_hi, extra)]
    fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    xp = np.pad(x, widths, constant_values=fill)
    # the flat index of every padded cell (-1 for padding), in the order storage_order asks for
    grids = np.meshgrid(*[np.arange(-lo, sp + hi + e) for sp, lo, hi, e in zip(spatial, pad_lo, pad_hi, extra)],
                        indexing="ij")
    inside = np.ones(grids[0].shape, bool)
    for g, sp in zip(grids, spatial):
        inside &= (g >= 0) & (g < sp)
    order = range(rank) if not storage_order else range(rank - 1, -1, -1)
    flat = np.zeros(grids[0].shape, np.int64)
    for axis in order:
        flat = flat * spatial[axis] + np.clip(grids[axis], 0, spatial[axis] - 1)
    flat = np.where(inside, flat, -1)
    best = np.full((n, c, *out_spatial), fill, dtype=x.dtype)
    where = np.full((n, c, *out_spatial), -1, np.int64)
    for offset in itertools.product(*[range(k) for k in kernel]):
        sl = tuple(slice(o * d, o * d + (size - 1) * s + 1, s)
                   for o, d, s, size in zip(offset, dilations, strides, out_spatial))
        vals = xp[(slice(None), slice(None)) + sl]
        pos = flat[sl]
        better = (vals > best) & (pos >= 0)
        best = np.where(better, vals, best)
        where = np.where(better, pos, where)
    plane = int(np.prod(spatial, dtype=np.int64))
    base = (np.arange(n)[:, None] * c + np.arange(c)[None, :]) * plane
    return best, where + base.reshape(n, c, *([1] * rank))
