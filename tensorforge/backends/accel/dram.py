"""The accelerator's view of DRAM: one flat byte array addressed in buffer elements.

A LOAD or STORE names a DRAM address in elements of the buffer it moves (ACCEL.md 1.3): the
byte address is `dram_base * element_bytes`.  `DramBuilder` places arrays and micro-op kernels
at element-aligned offsets and returns those element addresses; `build()` gives the byte image
that `Simulator.run` reads and writes in place.  `read` views a region back as an array.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .config import AccelConfig
from .isa import EncodingError, Uop


class DramBuilder:
    """Lays out a DRAM image: every `put` is aligned to the element size it will be read with."""

    def __init__(self, config: AccelConfig | None = None) -> None:
        self.config = config or AccelConfig()
        self._chunks: list[tuple[int, bytes]] = []
        self._size = 0

    def alloc(self, nbytes: int, elem_bytes: int) -> int:
        """Reserve `nbytes` (zero-filled) aligned to `elem_bytes`; return the element address."""
        offset = -(-self._size // elem_bytes) * elem_bytes
        self._size = offset + nbytes
        return offset // elem_bytes

    def put(self, array: np.ndarray, elem_bytes: int) -> int:
        """Copy `array` (C order) into the image; return its address in `elem_bytes` elements."""
        data = np.ascontiguousarray(array).tobytes()
        if len(data) % elem_bytes:
            raise ValueError(f"an array of {len(data)} bytes is not a whole number of "
                             f"{elem_bytes}-byte elements")
        address = self.alloc(len(data), elem_bytes)
        self._chunks.append((address * elem_bytes, data))
        return address

    def put_uops(self, uops: Sequence[Uop]) -> int:
        """Place a micro-op kernel; return its address in micro-ops (for LOAD UOP's dram_base)."""
        return self.put(uops_to_words(uops, self.config), self.config.uop_elem_bytes)

    def build(self, extra_bytes: int = 0) -> np.ndarray:
        """The byte image (uint8), with `extra_bytes` of zeros at the end."""
        image = np.zeros(self._size + extra_bytes, np.uint8)
        for offset, data in self._chunks:
            image[offset:offset + len(data)] = np.frombuffer(data, np.uint8)
        return image


def read(dram: np.ndarray, address: int, elem_bytes: int, shape: Sequence[int],
         dtype) -> np.ndarray:
    """A copy of the array of `shape` and `dtype` at element `address` of `elem_bytes` bytes."""
    dtype = np.dtype(dtype)
    start = address * elem_bytes
    nbytes = int(np.prod(shape)) * dtype.itemsize
    return dram[start:start + nbytes].view(dtype).reshape(shape).copy()


def uops_to_words(uops: Sequence[Uop], config: AccelConfig | None = None) -> np.ndarray:
    """Encode micro-ops into uint32 words (vectorized `isa.encode_uop`), checking field widths."""
    config = config or AccelConfig()
    fields = np.array([(u.dst, u.src, u.wgt) for u in uops], np.int64).reshape(-1, 3)
    widths = (config.uop_dst_bits, config.uop_src_bits, config.uop_wgt_bits)
    for column, (name, width) in enumerate(zip(("dst", "src", "wgt"), widths)):
        bad = (fields[:, column] < 0) | (fields[:, column] >= (1 << width))
        if bad.any():
            value = int(fields[np.argmax(bad), column])
            raise EncodingError(f"micro-op field {name} = {value} does not fit in {width} bits "
                             f"(allowed 0..{(1 << width) - 1}) for configuration {config.name}")
    words = (fields[:, 0] | (fields[:, 1] << widths[0]) | (fields[:, 2] << (widths[0] + widths[1])))
    return words.astype(np.uint32)


def words_to_uops(words: np.ndarray, config: AccelConfig | None = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decode uint32 micro-op words into (dst, src, wgt) index arrays."""
    config = config or AccelConfig()
    words = np.asarray(words).astype(np.int64)
    dst_bits, src_bits = config.uop_dst_bits, config.uop_src_bits
    return (words & ((1 << dst_bits) - 1),
            (words >> dst_bits) & ((1 << src_bits) - 1),
            (words >> (dst_bits + src_bits)) & ((1 << config.uop_wgt_bits) - 1))
