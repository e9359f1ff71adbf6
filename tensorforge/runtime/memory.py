"""Memory on a device: allocation and the copies between host arrays and device buffers.

The executor never allocates or copies by itself; it asks a `Memory` (a backend's allocator,
backends/base.py).  On the host a buffer is a NumPy array and a copy is (at most) making it
contiguous; a device backend gives device buffers and real transfers behind the same calls.
"""
from __future__ import annotations

from typing import Any, Protocol

import numpy as np


class Memory(Protocol):
    """Allocation and copies on one device."""

    def empty(self, shape: tuple, dtype: Any) -> Any:
        """An uninitialized buffer of `shape` and `dtype` on the device."""

    def from_host(self, array: np.ndarray) -> Any:
        """A device buffer holding `array`'s values (C-contiguous)."""

    def to_host(self, buffer: Any) -> np.ndarray:
        """The values of `buffer` as a NumPy array."""


class HostMemory:
    """The host: buffers are C-contiguous NumPy arrays; a copy in only makes an array contiguous
    (a contiguous array is passed as is, zero-copy)."""

    def empty(self, shape: tuple, dtype: Any) -> np.ndarray:
        return np.empty(shape, dtype)

    def from_host(self, array: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(array).reshape(np.shape(array))

    def to_host(self, buffer: np.ndarray) -> np.ndarray:
        return buffer


HOST = HostMemory()
