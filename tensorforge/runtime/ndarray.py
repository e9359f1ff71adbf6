"""`tensorforge.nd`: tensors in 64-byte-aligned host memory that kernels take without copying.

NumPy arrays work as kernel arguments too; an NDArray only adds the alignment guarantee (full
cache lines, aligned vector loads) and a cached data pointer (cheaper calls).

    x = tensorforge.nd.array(np.random.rand(4, 4).astype("float32"))
    y = tensorforge.nd.empty((4, 4), "float32")
    f(x, y); print(y.numpy())
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..ir import dtype as dt

ALIGNMENT = 64


def _aligned_empty(shape: tuple, dtype: np.dtype) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on an ALIGNMENT-byte boundary."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
    offset = (-raw.ctypes.data) % ALIGNMENT
    return raw[offset:offset + nbytes].view(dtype).reshape(shape)


class NDArray:
    """A tensor in aligned host memory.  `numpy()` copies it out; `.shape`, `.dtype` describe it."""

    __slots__ = ("_array", "_ptr")

    def __init__(self, array: np.ndarray):
        if array.ctypes.data % ALIGNMENT and array.size:
            raise ValueError("NDArray memory must be 64-byte aligned; use nd.array() or nd.empty()")
        self._array = array
        self._ptr = array.ctypes.data

    @property
    def shape(self) -> tuple:
        return self._array.shape

    @property
    def dtype(self) -> str:
        return self._array.dtype.name

    @property
    def ndim(self) -> int:
        return self._array.ndim

    @property
    def size(self) -> int:
        return self._array.size

    @property
    def data_ptr(self) -> int:
        """Address of the first element."""
        return self._ptr

    def numpy(self) -> np.ndarray:
        """A NumPy copy of the contents."""
        return self._array.copy()

    def copyfrom(self, source) -> "NDArray":
        """Overwrite the contents with `source` (same shape; converted to this dtype)."""
        source = source.numpy() if isinstance(source, NDArray) else np.asarray(source)
        if source.shape != self.shape:
            raise ValueError(f"copyfrom: shape {source.shape} does not match the array's {self.shape}")
        np.copyto(self._array, source, casting="unsafe")
        return self

    def __array__(self, dtype=None, copy=None):
        return self._array.astype(dtype) if dtype is not None else self._array

    def __repr__(self) -> str:
        return f"<tensorforge.nd.NDArray shape={self.shape} dtype={self.dtype}>\n{self._array}"


def empty(shape: Sequence[int] | int, dtype: str = "float32") -> NDArray:
    """An uninitialised aligned array."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"negative dimension in shape {shape}")
    return NDArray(_aligned_empty(shape, np.dtype(dt.check(np.dtype(dtype).name))))


def array(source, dtype: str | None = None) -> NDArray:
    """An aligned copy of `source` (a NumPy array, nested lists or another NDArray)."""
    data = source.numpy() if isinstance(source, NDArray) else np.asarray(source, dtype=dtype)
    if dtype is not None:
        data = data.astype(dtype, copy=False)
    out = empty(data.shape, data.dtype.name)
    np.copyto(out._array, data)
    return out
