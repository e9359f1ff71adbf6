"""Memory on a device: allocation and the copies between host arrays and device buffers.

The executor never allocates or copies by itself; it asks a `Memory` (a backend's allocator,
backends/base.py).  On the host a buffer is a NumPy array and a copy is (at most) making it
contiguous; a device backend gives device buffers and real transfers behind the same calls.
"""
from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np


class Memory(Protocol):
    """Allocation and copies on one device."""

    def empty(self, shape: tuple, dtype: Any) -> Any:
        """An uninitialized buffer of `shape` and `dtype` on the device."""

    def from_host(self, array: np.ndarray) -> Any:
        """A device buffer holding `array`'s values (C-contiguous)."""

    def constant(self, array: np.ndarray) -> Any:
        """A buffer holding `array`'s values for as long as the executor lives (its params)."""

    def to_host(self, buffer: Any) -> np.ndarray:
        """The values of `buffer` as a NumPy array."""


ALIGN = 64      # bytes: a cache line, and one 512-bit vector


def aligned_empty(shape: tuple, dtype: Any, align: int = ALIGN) -> np.ndarray:
    """An uninitialized C-contiguous array whose data starts on an `align`-byte boundary."""
    dtype = np.dtype(dtype)
    array = np.empty(shape, dtype)
    if array.ctypes.data % align == 0:      # large arrays come page-aligned from the allocator
        return array
    count = math.prod(shape)
    raw = np.empty(count * dtype.itemsize + align, np.uint8)
    start = -raw.ctypes.data % align
    return raw[start:start + count * dtype.itemsize].view(dtype).reshape(shape)


def aligned(array: np.ndarray, align: int = ALIGN) -> np.ndarray:
    """`array` itself when it is C-contiguous and starts on an `align`-byte boundary, else an
    aligned copy.  Weights read from a model file go through this once, so that every model
    compiled from them (each specialization of a staged model) takes them without a copy."""
    array = np.asarray(array)
    if array.flags.c_contiguous and array.ctypes.data % align == 0:
        return array
    out = aligned_empty(array.shape, array.dtype, align)
    out[...] = array
    return out


class HostMemory:
    """The host: buffers are C-contiguous NumPy arrays; a copy in only makes an array contiguous
    (a contiguous array is passed as is, zero-copy).  Buffers the executor owns (the arena, the
    params) start on a cache line: a vector load that straddles two lines (the 512-bit loads of
    packed int8 weights) measured up to 1.7x slower per kernel."""

    def empty(self, shape: tuple, dtype: Any) -> np.ndarray:
        return aligned_empty(shape, dtype)

    def from_host(self, array: np.ndarray) -> np.ndarray:
        if array.flags.c_contiguous:
            return array
        return np.ascontiguousarray(array).reshape(np.shape(array))

    def constant(self, array: np.ndarray) -> np.ndarray:
        return aligned(array)

    def to_host(self, buffer: np.ndarray) -> np.ndarray:
        return buffer


HOST = HostMemory()
