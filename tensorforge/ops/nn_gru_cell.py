"""One GRU time step as one operator (linear_before_reset, as torch.nn.GRU exports it).

    g        = h_{t-1} R^T                                   (R: [3H, H], ONNX gate order z, r, h)
    z, r     = sigmoid(xw[t] + g) of gates 0, 1
    h~       = tanh(xw[t] of gate 2 + r * (g of gate 2 + Rbh))
    gru_cell(xw, h, R, rbh, step) = h_t = (1 - z) * h~ + z * h_{t-1}

xw is the input projection of every time step, [T * B, 3H] (X W^T + Wb, plus Rb of gates z and
r; Rbh stays apart since the reset gate multiplies it), one GEMM ahead of the loop; the op
reads its step's B rows itself.  The ONNX GRU converter (frontend/onnx_ops/rnn_gru.py) emits it
for the default cell (sigmoid, tanh; no clip, no short sequences) with linear_before_reset.

`gru_cell_packed` takes R packed as for the LSTM (ops/nn_lstm_cell.py, `pack_recurrent`: blocks
of L units, the three gates side by side, k-major; graph pass `alter_layout_rnn`), so the CPU
template (ops/schedules/cpu_rnn.py) streams R once per step and applies the gate math to the
three gate vectors of each block as they leave the registers.  Pattern complex-out-fusable; the
product stage is named `gru_cell_gates`, the output `gru_cell`.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .. import te
from .common import const_shape
from .nn_lstm_cell import unpack_recurrent
from .registry import COMPLEX, OpError, TensorType, op


def _check(name: str, xw: TensorType, h: TensorType, rbh: TensorType, hidden: int, step: int) -> None:
    if xw is None or h is None or rbh is None:
        raise OpError(f"{name}: needs the projected input, the state, the recurrent weight and Rbh")
    if len(h.shape) != 2 or h.shape[1] != hidden or h.shape[0] == 0:
        raise OpError(f"{name}: the state must have shape (batch, {hidden}), got {tuple(h.shape)}")
    batch = h.shape[0]
    if len(xw.shape) != 2 or xw.shape[1] != 3 * hidden or xw.shape[0] % batch:
        raise OpError(f"{name}: the projected input must have shape (steps * {batch}, {3 * hidden}), "
                      f"got {tuple(xw.shape)}")
    if tuple(rbh.shape) != (hidden,):
        raise OpError(f"{name}: Rbh must have shape ({hidden},), got {tuple(rbh.shape)}")
    if not 0 <= int(step) < xw.shape[0] // batch:
        raise OpError(f"{name}: step {step} is outside the {xw.shape[0] // batch} steps of the projected input")
    if not (xw.dtype == h.dtype == rbh.dtype == "float32"):
        raise OpError(f"{name}: takes float32 inputs, got {xw.dtype}, {h.dtype} and {rbh.dtype}")


def _cell(xw: te.Tensor, h: te.Tensor, rbh: te.Tensor, g: Callable, hidden: int, step: int) -> te.Tensor:
    batch = const_shape(h)[0]

    def body(b, u):
        row = step * batch + b
        z = te.sigmoid(xw[row, u] + g(b, 0, u))
        r = te.sigmoid(xw[row, hidden + u] + g(b, 1, u))
        cand = te.tanh(xw[row, 2 * hidden + u] + r * (g(b, 2, u) + rbh[u]))
        return cand + z * (h[b, u] - cand)                  # (1 - z) * h~ + z * h

    return te.compute((batch, hidden), body, name="gru_cell", tag="gru_cell")


def _reference(xw: np.ndarray, h: np.ndarray, r: np.ndarray, rbh: np.ndarray, step: int) -> np.ndarray:
    batch, hidden = h.shape
    sig = lambda v: 1.0 / (1.0 + np.exp(-v))  # noqa: E731
    g = h.astype(np.float64) @ r.astype(np.float64).T
    x = xw[step * batch:(step + 1) * batch].astype(np.float64)
    z = sig(x[:, :hidden] + g[:, :hidden])
    rr = sig(x[:, hidden:2 * hidden] + g[:, hidden:2 * hidden])
    cand = np.tanh(x[:, 2 * hidden:] + rr * (g[:, 2 * hidden:] + rbh))
    return ((1 - z) * cand + z * h).astype(h.dtype)


@op("gru_cell", COMPLEX)
class gru_cell:
    @staticmethod
    def infer(xw: TensorType, h: TensorType, r: TensorType, rbh: TensorType, step: int) -> TensorType:
        if r is None or len(r.shape) != 2 or r.shape[0] != 3 * r.shape[1] or r.dtype != "float32":
            raise OpError(f"gru_cell: the recurrent weight must be float32 of shape (3 * hidden, hidden), got "
                          f"{tuple(r.shape) if r is not None else None}")
        _check("gru_cell", xw, h, rbh, r.shape[1], step)
        return TensorType(tuple(h.shape), h.dtype)

    @staticmethod
    def compute(xw: te.Tensor, h: te.Tensor, r: te.Tensor, rbh: te.Tensor, step: int) -> te.Tensor:
        batch, hidden = const_shape(h)
        k = te.reduce_axis((0, hidden), name="k")
        g = te.compute((batch, 3 * hidden), lambda b, j: te.sum(h[b, k] * r[j, k], axis=k), name="gru_cell_gates")
        return _cell(xw, h, rbh, lambda b, gate, u: g[b, gate * hidden + u], hidden, int(step))

    @staticmethod
    def reference(xw: np.ndarray, h: np.ndarray, r: np.ndarray, rbh: np.ndarray, step: int) -> np.ndarray:
        return _reference(xw, h, r, rbh, int(step))


@op("gru_cell_packed", COMPLEX, schedule={"cpu": "rnn_cell_packed.cpu", "gpu": "rnn_cell_packed.gpu"})
class gru_cell_packed:
    @staticmethod
    def infer(xw: TensorType, h: TensorType, rp: TensorType, rbh: TensorType, step: int) -> TensorType:
        if rp is None or len(rp.shape) != 4 or rp.shape[2] != 3:
            raise OpError(f"gru_cell_packed: the packed recurrent weight must have shape (blocks, hidden, 3, "
                          f"lanes), got {tuple(rp.shape) if rp is not None else None}")
        blocks, hidden, _, lanes = rp.shape
        if not (blocks - 1) * lanes < hidden <= blocks * lanes:
            raise OpError(f"gru_cell_packed: {blocks} blocks of {lanes} units do not cover hidden size {hidden}")
        _check("gru_cell_packed", xw, h, rbh, hidden, step)
        return TensorType(tuple(h.shape), h.dtype)

    @staticmethod
    def compute(xw: te.Tensor, h: te.Tensor, rp: te.Tensor, rbh: te.Tensor, step: int) -> te.Tensor:
        batch = const_shape(h)[0]
        blocks, hidden, _, lanes = const_shape(rp)
        k = te.reduce_axis((0, hidden), name="k")
        g = te.compute((batch, blocks, 3, lanes), lambda b, ub, gate, ul: te.sum(h[b, k] * rp[ub, k, gate, ul], axis=k),
                       name="gru_cell_gates", attrs={"lanes": lanes})
        return _cell(xw, h, rbh, lambda b, gate, u: g[b, u // lanes, gate, u % lanes], hidden, int(step))

    @staticmethod
    def reference(xw: np.ndarray, h: np.ndarray, rp: np.ndarray, rbh: np.ndarray, step: int) -> np.ndarray:
        return _reference(xw, h, unpack_recurrent(rp, h.shape[1]), rbh, int(step))
