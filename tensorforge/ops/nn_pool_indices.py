"""max_pool_with_indices: max pooling that also returns where each maximum came from (ONNX
MaxPool's Indices output), over 1, 2 or 3 spatial axes.

Outputs: the pooled values (as max_pool{1,2,3}d computes them) and int64 flat positions into the
input (N, C, D1, ...), row-major, or with the spatial axes column-major for `storage_order` 1; of
equal values the first in window order wins.  OPAQUE: an argmax over windows with that tie rule
does not fit the tensor expressions, so the executor runs the host kernel
(runtime/host_pool.py), which is also the reference.
"""
from __future__ import annotations

import numpy as np

from ..runtime import host_kernels
from .nn_pool import pool_attrs
from .nn_window import out_spatial
from .registry import OPAQUE, OpError, TensorType, op

_DEFAULTS = {"strides": None, "padding": None, "dilations": None, "ceil_mode": False, "storage_order": 0}


def _geometry(shape: tuple, kernel, strides, padding, dilations, ceil_mode) -> tuple:
    rank = len(shape) - 2
    if rank not in (1, 2, 3):
        raise OpError(f"max_pool_with_indices: x must have 1 to 3 spatial axes, got shape {shape}")
    k, s, p, d = pool_attrs("max_pool_with_indices", rank, shape, kernel, strides, padding, dilations)
    return k, s, p, d, out_spatial("max_pool_with_indices", shape[2:], k, s, p, d, bool(ceil_mode))


@op("max_pool_with_indices", pattern=OPAQUE, attr_defaults=_DEFAULTS)
class max_pool_with_indices:
    def infer(x: TensorType, kernel=None, strides=None, padding=None, dilations=None, ceil_mode=False,
              storage_order=0) -> tuple:
        if int(storage_order) not in (0, 1):
            raise OpError(f"max_pool_with_indices: storage_order must be 0 or 1, got {storage_order}")
        *_, out = _geometry(tuple(x.shape), kernel, strides, padding, dilations, ceil_mode)
        shape = (x.shape[0], x.shape[1], *out)
        return TensorType(shape, x.dtype), TensorType(shape, "int64")

    def reference(x: np.ndarray, kernel=None, strides=None, padding=None, dilations=None, ceil_mode=False,
                  storage_order=0) -> tuple:
        k, s, p, d, _ = _geometry(x.shape, kernel, strides, padding, dilations, ceil_mode)
        return host_kernels.get("max_pool_with_indices")(x, k, s, p, d, bool(ceil_mode), int(storage_order))
