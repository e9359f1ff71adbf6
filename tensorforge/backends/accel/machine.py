"""The accelerator's state and the functional semantics of each instruction (ACCEL.md 1.3).

`Machine` holds the on-chip buffers (INP, WGT, ACC, the micro-op cache) and a DRAM byte image,
and `execute(index, insn)` applies one instruction, bit-exact with NumPy integer arithmetic:

- LOAD writes a contiguous SRAM region of (y_pad_0 + y_size + y_pad_1) rows of
  (x_pad_0 + x_size + x_pad_1) elements; row y copies x_size elements from DRAM element
  dram_base + y * x_stride; padding is zero.  STORE truncates ACC lanes to OUT's width.
- GEMM and ALU run their micro-ops inside a two-level affine loop.  Both are vectorized per
  instruction: the loop's index arrays are built with broadcasting, then one gather, one
  product and one scatter do the work.  Accumulation wraps at the accumulator width.
- ALU is in place (ACC[d] = op(ACC[d], operand)).  When an instruction's iterations depend on
  each other (a destination written twice, or a source read after an earlier iteration wrote
  it) the vectorized form would change the result, so those iterations run in order.

Shift counts beyond the accumulator width saturate (all sign bits for >>, zero for <<), and a
negative SHR operand shifts left (VTA's functional simulator).
"""
from __future__ import annotations

import numpy as np

from .config import AccelConfig
from .cycle_model import elem_bytes
from .dram import words_to_uops
from .isa import Alu, AluOp, Finish, Gemm, Insn, Load, MemType, Store


class SimulationError(RuntimeError):
    """The stream asks the hardware for something it cannot do, or the run went wrong."""


class Machine:
    """SRAM buffers plus a DRAM byte image; `execute` applies one instruction."""

    def __init__(self, config: AccelConfig, dram: np.ndarray) -> None:
        if not isinstance(dram, np.ndarray) or not dram.flags.c_contiguous:
            raise TypeError("dram must be a C-contiguous NumPy array (the byte image the "
                            "stream's addresses refer to)")
        if not dram.flags.writeable:
            raise TypeError("dram must be writable: STORE instructions write into it")
        self.config = c = config
        self.dram = dram.reshape(-1).view(np.uint8)
        self.inp = np.zeros((c.inp_depth, c.batch, c.block_in), c.inp_dtype)
        self.wgt = np.zeros((c.wgt_depth, c.block_out, c.block_in), c.wgt_dtype)
        self.acc = np.zeros((c.acc_depth, c.batch, c.block_out), c.acc_dtype)
        self.uop_dst = np.zeros(c.uop_depth, np.int64)
        self.uop_src = np.zeros(c.uop_depth, np.int64)
        self.uop_wgt = np.zeros(c.uop_depth, np.int64)
        # exact product dtype for the GEMM: float32 while every block product fits 24 bits
        bits = c.inp_width + c.wgt_width - 1 + c.log_block
        self._product_dtype = np.float32 if bits <= 24 else np.float64 if bits <= 53 else np.int64
        self._product_bits = bits

    def execute(self, index: int, insn: Insn) -> None:
        if isinstance(insn, Gemm):
            self._gemm(index, insn)
        elif isinstance(insn, Alu):
            self._alu(index, insn)
        elif isinstance(insn, Load):
            self._load(index, insn)
        elif isinstance(insn, Store):
            self._store(index, insn)
        elif not isinstance(insn, Finish):
            raise SimulationError(f"#{index}: {type(insn).__name__} is not an instruction")

    # --- DMA ---------------------------------------------------------------------------------
    def _dram_elements(self, index: int, insn, elem_shape: tuple[int, ...], dtype) -> np.ndarray:
        """DRAM as an array of elements, and the (y_size, x_size) element indices `insn` moves."""
        nbytes = elem_bytes(insn.memory_type, self.config)
        count = len(self.dram) // nbytes
        view = self.dram[:count * nbytes].view(dtype).reshape((count,) + elem_shape)
        last = insn.dram_base + (insn.y_size - 1) * insn.x_stride + insn.x_size - 1
        if last >= count:
            raise SimulationError(f"#{index} {insn}: reaches DRAM element {last} of "
                                  f"{nbytes} bytes, beyond the {len(self.dram)}-byte image")
        rows = insn.dram_base + np.arange(insn.y_size)[:, None] * insn.x_stride
        return view, rows + np.arange(insn.x_size)[None, :]

    def _sram(self, index: int, insn, buffer: np.ndarray, elements: int, name: str) -> np.ndarray:
        if insn.sram_base + elements > len(buffer):
            raise SimulationError(f"#{index} {insn}: needs {name} elements {insn.sram_base}.."
                                  f"{insn.sram_base + elements - 1}, beyond the buffer's "
                                  f"{len(buffer)}")
        return buffer[insn.sram_base:insn.sram_base + elements]

    def _load(self, index: int, insn: Load) -> None:
        if insn.x_size == 0:
            return
        c = self.config
        kind = MemType(insn.memory_type)
        if kind == MemType.UOP:
            if insn.y_pad_0 or insn.y_pad_1 or insn.x_pad_0 or insn.x_pad_1:
                raise SimulationError(f"#{index} {insn}: a micro-op load cannot be padded")
            view, idx = self._dram_elements(index, insn, (), np.uint32)
            n = insn.y_size * insn.x_size
            words = view[idx].reshape(-1)
            for buffer, values in zip((self.uop_dst, self.uop_src, self.uop_wgt),
                                      words_to_uops(words, c)):
                self._sram(index, insn, buffer, n, "UOP")[:] = values
            return
        if kind == MemType.INP:
            buffer, shape, dtype = self.inp, (c.batch, c.block_in), c.inp_dtype
        elif kind == MemType.WGT:
            buffer, shape, dtype = self.wgt, (c.block_out, c.block_in), c.wgt_dtype
        elif kind == MemType.ACC:
            buffer, shape, dtype = self.acc, (c.batch, c.block_out), c.acc_dtype
        elif kind == MemType.ACC_8BIT:
            buffer, shape, dtype = self.acc, (c.batch, c.block_out), np.int8
        else:
            raise SimulationError(f"#{index} {insn}: LOAD cannot target the {kind.name} buffer")
        rows = insn.y_pad_0 + insn.y_size + insn.y_pad_1
        cols = insn.x_pad_0 + insn.x_size + insn.x_pad_1
        region = self._sram(index, insn, buffer, rows * cols, kind.name).reshape(
            (rows, cols) + shape)
        view, idx = self._dram_elements(index, insn, shape, dtype)
        if rows * cols != insn.y_size * insn.x_size:
            region[...] = 0
        region[insn.y_pad_0:insn.y_pad_0 + insn.y_size,
               insn.x_pad_0:insn.x_pad_0 + insn.x_size] = view[idx]

    def _store(self, index: int, insn: Store) -> None:
        if insn.x_size == 0:
            return
        if MemType(insn.memory_type) != MemType.OUT:
            raise SimulationError(f"#{index} {insn}: STORE moves the OUT buffer only")
        if insn.y_pad_0 or insn.y_pad_1 or insn.x_pad_0 or insn.x_pad_1:
            raise SimulationError(f"#{index} {insn}: a STORE cannot be padded")
        c = self.config
        n = insn.y_size * insn.x_size
        tile = self._sram(index, insn, self.acc, n, "OUT")
        view, idx = self._dram_elements(index, insn, (c.batch, c.block_out), c.out_dtype)
        # truncating store: each lane keeps its low bits (two's-complement wrap, no saturation)
        view[idx] = tile.astype(c.out_dtype).reshape(idx.shape + (c.batch, c.block_out))

    # --- micro-op loops ----------------------------------------------------------------------
    def _indices(self, index: int, insn, uops: np.ndarray, factor_out: int, factor_in: int,
                 depth: int, name: str) -> np.ndarray:
        """uop[u] + i_out * factor_out + i_in * factor_in, in loop order (i_out, i_in, u)."""
        idx = (uops[None, None, :] + np.arange(insn.iter_out)[:, None, None] * factor_out
               + np.arange(insn.iter_in)[None, :, None] * factor_in).reshape(-1)
        if idx.size and idx.max() >= depth:
            raise SimulationError(f"#{index} {insn}: the micro-op loop reaches {name} index "
                                  f"{int(idx.max())}, beyond the buffer's {depth} elements")
        return idx

    def _uop_range(self, index: int, insn) -> slice:
        if insn.uop_end > self.config.uop_depth:
            raise SimulationError(f"#{index} {insn}: uop_end {insn.uop_end} is beyond the "
                                  f"micro-op cache's {self.config.uop_depth} entries")
        return slice(insn.uop_bgn, insn.uop_end)

    def _gemm(self, index: int, insn: Gemm) -> None:
        if insn.num_iterations == 0:
            return
        c = self.config
        u = self._uop_range(index, insn)
        dst = self._indices(index, insn, self.uop_dst[u], insn.dst_factor_out,
                            insn.dst_factor_in, c.acc_depth, "ACC")
        if insn.reset:
            self.acc[dst] = 0
            return
        src = self._indices(index, insn, self.uop_src[u], insn.src_factor_out,
                            insn.src_factor_in, c.inp_depth, "INP")
        wgt = self._indices(index, insn, self.uop_wgt[u], insn.wgt_factor_out,
                            insn.wgt_factor_in, c.wgt_depth, "WGT")
        pdt = self._product_dtype
        # one block product per micro-op iteration: (batch, in) . (out, in)^T
        products = np.matmul(self.inp[src].astype(pdt),
                             self.wgt[wgt].astype(pdt).transpose(0, 2, 1))
        self._accumulate(dst, products)

    def _accumulate(self, dst: np.ndarray, products: np.ndarray) -> None:
        """ACC[dst[n]] += products[n] for every n (repeats add up), wrapping at ACC's width."""
        c = self.config
        lanes = c.batch * c.block_out
        flat = products.reshape(len(dst), lanes)
        if self._product_bits + int(np.ceil(np.log2(len(dst) + 1))) <= 52:
            # exact in float64: one bincount over (element, lane) pairs
            keys = (dst[:, None] * lanes + np.arange(lanes)[None, :]).reshape(-1)
            sums = np.bincount(keys, weights=flat.reshape(-1).astype(np.float64),
                               minlength=c.acc_depth * lanes)
            delta = sums.astype(np.int64).reshape(self.acc.shape)
            touched = np.flatnonzero(np.bincount(dst, minlength=c.acc_depth))
            self.acc[touched] = (self.acc[touched].astype(np.int64)
                                 + delta[touched]).astype(c.acc_dtype)
        else:
            total = self.acc.astype(np.int64)
            np.add.at(total, dst, flat.astype(np.int64).reshape((len(dst),) + self.acc.shape[1:]))
            self.acc[:] = total.astype(c.acc_dtype)

    def _alu(self, index: int, insn: Alu) -> None:
        n = insn.num_iterations
        if n == 0:
            return
        c = self.config
        u = self._uop_range(index, insn)
        dst = self._indices(index, insn, self.uop_dst[u], insn.dst_factor_out,
                            insn.dst_factor_in, c.acc_depth, "ACC")
        op = AluOp(insn.alu_opcode)
        if op not in _ALU_OPS:
            raise SimulationError(f"#{index} {insn}: ALU opcode {op.name} is not implemented")
        if insn.use_imm:
            imm = np.int64(insn.imm)
            # iterations on different elements are independent; repeats of one element apply
            # in order, one round per repeat
            ranks = _occurrence_rank(dst)
            rounds = [dst] if ranks.max() == 0 else [dst[ranks == r]
                                                     for r in range(int(ranks.max()) + 1)]
            for d in rounds:
                self.acc[d] = _ALU_OPS[op](self.acc[d].astype(np.int64), imm).astype(c.acc_dtype)
            return
        src = self._indices(index, insn, self.uop_src[u], insn.src_factor_out,
                            insn.src_factor_in, c.acc_depth, "ACC")
        unique, first = np.unique(dst, return_index=True)
        first_write = np.full(c.acc_depth, n, np.int64)
        first_write[unique] = first
        if len(unique) == n and not (first_write[src] < np.arange(n)).any():
            # every source is read before any iteration writes it: one vectorized step
            self.acc[dst] = _ALU_OPS[op](self.acc[dst].astype(np.int64),
                                         self.acc[src].astype(np.int64)).astype(c.acc_dtype)
            return
        for d, s in zip(dst.tolist(), src.tolist()):
            self.acc[d] = _ALU_OPS[op](self.acc[d].astype(np.int64),
                                       self.acc[s].astype(np.int64)).astype(c.acc_dtype)


def _occurrence_rank(values: np.ndarray) -> np.ndarray:
    """For each position, how many earlier positions hold the same value."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.r_[0, np.flatnonzero(ordered[1:] != ordered[:-1]) + 1]
    run_start = np.repeat(starts, np.diff(np.r_[starts, len(values)]))
    ranks = np.empty(len(values), np.int64)
    ranks[order] = np.arange(len(values)) - run_start
    return ranks


def _shift_right(x: np.ndarray, amount) -> np.ndarray:
    amount = np.asarray(amount, np.int64)
    right = np.right_shift(x, np.clip(amount, 0, 63))
    left = np.left_shift(x, np.clip(-amount, 0, 63))
    return np.where(amount >= 0, right, left)


_ALU_OPS = {
    AluOp.MIN: np.minimum,
    AluOp.MAX: np.maximum,
    AluOp.ADD: np.add,
    AluOp.SHR: _shift_right,
    AluOp.MUL: np.multiply,
}
