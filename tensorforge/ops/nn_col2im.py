"""col2im (ONNX Col2Im): rebuild an image from its sliding blocks, adding where blocks overlap
(ops -> TE).  The inverse layout of im2col, for any number of spatial axes.

x is (N, C * prod(block), L) with L = prod(nb_i) blocks; the result is (N, C, *image):

    out[n, c, p] = sum over kernel offsets k of x[n, c * K + flat(k), flat(b)]
                   for the k where every axis i has t_i = p_i + pad_begin_i - k_i * d_i >= 0,
                   t_i divisible by s_i and b_i = t_i / s_i < nb_i,
    nb_i = (image_i + pad_begin_i + pad_end_i - d_i * (block_i - 1) - 1) // s_i + 1.

A REDUCTION over the kernel offsets with that condition: each output element gathers its
contributions, so no two threads add into one element.  Indices are clamped into range so that
no read leaves x even where the condition masks the value.
"""
from __future__ import annotations

import itertools
from typing import Any, Sequence

import numpy as np

from .. import te
from .common import const_shape
from .registry import REDUCTION, OpError, TensorType, op

_DEFAULTS = {"strides": None, "pads": None, "dilations": None}


def _geometry(shape: tuple, image: Sequence[int], block: Sequence[int], strides, pads, dilations) -> tuple:
    """(image, block, strides, pads (begin.., end..), dilations, blocks per axis), checked."""
    r = len(image)
    image, block = tuple(int(v) for v in image), tuple(int(v) for v in block)
    if r < 1 or len(block) != r:
        raise OpError(f"col2im: image_shape {image} and block_shape {block} must have the same length >= 1")
    s = tuple(int(v) for v in strides) if strides is not None else (1,) * r
    d = tuple(int(v) for v in dilations) if dilations is not None else (1,) * r
    p = tuple(int(v) for v in pads) if pads is not None else (0,) * (2 * r)
    if len(s) != r or len(d) != r or len(p) != 2 * r:
        raise OpError(f"col2im: strides {s}, dilations {d} need {r} values and pads {p} {2 * r}")
    if min(s + d + block + image) < 1 or min(p) < 0:
        raise OpError("col2im: image, block, strides and dilations must be >= 1 and pads >= 0")
    nb = tuple((image[i] + p[i] + p[r + i] - d[i] * (block[i] - 1) - 1) // s[i] + 1 for i in range(r))
    if min(nb) < 1:
        raise OpError(f"col2im: block_shape {block} does not fit image_shape {image} with pads {p}")
    k = int(np.prod(block))
    if len(shape) != 3 or shape[1] % k or shape[2] != int(np.prod(nb)):
        raise OpError(f"col2im: input has shape {tuple(shape)}; for block {block} and {int(np.prod(nb))} blocks "
                      f"it must be (N, C * {k}, {int(np.prod(nb))})")
    return image, block, s, p, d, nb


def _flat(indices: Sequence[Any], sizes: Sequence[int]) -> Any:
    out = indices[0]
    for i, n in zip(indices[1:], sizes[1:]):
        out = out * n + i
    return out


@op("col2im", pattern=REDUCTION, attr_defaults=_DEFAULTS)
class col2im:
    def infer(x: TensorType, image_shape: Sequence[int], block_shape: Sequence[int], **a: Any) -> TensorType:
        image, block, *_ = _geometry(tuple(x.shape), image_shape, block_shape, a["strides"], a["pads"],
                                     a["dilations"])
        return TensorType((x.shape[0], x.shape[1] // int(np.prod(block))) + image, x.dtype)

    def compute(x: te.Tensor, image_shape: Sequence[int], block_shape: Sequence[int], **a: Any) -> Any:
        shape = const_shape(x)
        image, block, s, p, d, nb = _geometry(shape, image_shape, block_shape, a["strides"], a["pads"],
                                              a["dilations"])
        r, kk = len(image), int(np.prod(block))

        def f(*index):
            n, c, pos = index[0], index[1], index[2:]
            ks = [te.reduce_axis((0, block[i]), name=f"k{i}") for i in range(r)]
            conds, blocks = [], []
            for i in range(r):
                t = pos[i] + p[i] - ks[i].var * d[i]
                tc = te.max(t, 0)
                conds += [t >= 0, tc % s[i] == 0, tc // s[i] < nb[i]]
                blocks.append(te.min(tc // s[i], nb[i] - 1))
            value = x[n, c * kk + _flat([k.var for k in ks], block), _flat(blocks, nb)]
            return te.sum(value, axis=ks, where=te.all(*conds))

        return te.compute((shape[0], shape[1] // kk) + image, f, name="col2im", tag="col2im")

    def reference(x: np.ndarray, image_shape: Sequence[int], block_shape: Sequence[int], **a: Any) -> np.ndarray:
        image, block, s, p, d, nb = _geometry(x.shape, image_shape, block_shape, a["strides"], a["pads"],
                                              a["dilations"])
        r, kk = len(image), int(np.prod(block))
        n, c = x.shape[0], x.shape[1] // kk
        cols = x.reshape((n, c) + block + nb)
        # pad the image, add every kernel offset's blocks at their strided positions, then crop
        padded = np.zeros((n, c) + tuple(image[i] + p[i] + p[r + i] for i in range(r)), x.dtype)
        for k in itertools.product(*[range(b) for b in block]):
            where = tuple(slice(k[i] * d[i], k[i] * d[i] + (nb[i] - 1) * s[i] + 1, s[i]) for i in range(r))
            padded[(slice(None), slice(None)) + where] += cols[(slice(None), slice(None)) + k]
        crop = tuple(slice(p[i], p[i] + image[i]) for i in range(r))
        return padded[(slice(None), slice(None)) + crop]
