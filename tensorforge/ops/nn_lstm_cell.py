"""One LSTM time step as one operator: the recurrent product and the gates in one kernel.

    z        = h_{t-1} R^T                                   (h_{t-1} = state[:, 0], R: [4H, H])
    i, o, f  = sigmoid(xw[t] + z) of gates 0, 1, 2;  c~ = tanh(xw[t] + z) of gate 3 (ONNX order i, o, f, c)
    c_t      = f * c_{t-1} + i * c~                         (c_{t-1} = state[:, 1])
    h_t      = o * tanh(c_t)
    lstm_cell(xw, state, R, step)[b, 0, u] = h_t[b, u],  [b, 1, u] = c_t[b, u]

xw is the input projection of every time step, [T * B, 4H] (X W^T + Wb + Rb, one GEMM ahead of
the loop); the op reads its step's B rows itself, so no per-step slice kernel runs.  The state
(h, c) travels as one [B, 2, H] value: each step is one op reading one state and writing the
next.  The ONNX LSTM converter (frontend/onnx_ops/rnn_lstm.py) emits this op for the LSTM cell
ONNX defines by default (sigmoid, tanh, tanh; no peepholes, clip or input_forget).

`lstm_cell_packed` is the same step with R packed at compile time (graph pass
`alter_layout_rnn`) as (ceil(H / L), H, 4, L): per block of L hidden units, the four gates' rows
of R, k-major.  A CPU kernel (ops/schedules/cpu_rnn.py) then accumulates the four gates of L
units in 4 vectors while it streams R with unit stride, and applies the gate math to those
registers as they leave: the GEMV and the cell update are one pass, one kernel per step.
Pattern complex-out-fusable; the product stage is named `lstm_cell_gates`, the new cell state
`lstm_cell_c`, the output `lstm_cell` (tagged with the op's name).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .. import te
from .common import const_shape
from .registry import COMPLEX, OpError, TensorType, op


def pack_recurrent(r: np.ndarray, lanes: int) -> np.ndarray:
    """R (G * H, H) of G gates -> (ceil(H / lanes), H, G, lanes), zero rows past hidden unit H."""
    rows, hidden = r.shape
    gates = rows // hidden
    blocks = -(-hidden // lanes)
    padded = np.zeros((gates, blocks * lanes, hidden), r.dtype)
    padded[:, :hidden, :] = r.reshape(gates, hidden, hidden)
    return np.ascontiguousarray(padded.reshape(gates, blocks, lanes, hidden).transpose(1, 3, 0, 2))


def unpack_recurrent(rp: np.ndarray, hidden: int) -> np.ndarray:
    """The inverse of `pack_recurrent`: (blocks, H, G, lanes) -> (G * H, H)."""
    blocks, h, gates, lanes = rp.shape
    return np.ascontiguousarray(rp.transpose(2, 0, 3, 1).reshape(gates, blocks * lanes, h)[:, :hidden, :]
                                .reshape(gates * hidden, h))


def _check(name: str, xw: TensorType, state: TensorType, hidden: int, step: int) -> int:
    """The batch size, after checking the shapes that do not depend on R's layout."""
    if xw is None or state is None:
        raise OpError(f"{name}: needs the projected input, the state and the recurrent weight")
    if len(state.shape) != 3 or state.shape[1] != 2 or state.shape[2] != hidden:
        raise OpError(f"{name}: the state must have shape (batch, 2, {hidden}), got {tuple(state.shape)}")
    batch = state.shape[0]
    if len(xw.shape) != 2 or xw.shape[1] != 4 * hidden or batch == 0 or xw.shape[0] % batch:
        raise OpError(f"{name}: the projected input must have shape (steps * {batch}, {4 * hidden}), "
                      f"got {tuple(xw.shape)}")
    if not 0 <= int(step) < xw.shape[0] // batch:
        raise OpError(f"{name}: step {step} is outside the {xw.shape[0] // batch} steps of the projected input")
    if not (xw.dtype == state.dtype == "float32"):
        raise OpError(f"{name}: takes float32 inputs, got {xw.dtype} and {state.dtype}")
    return batch


def _cell(xw: te.Tensor, state: te.Tensor, z: Callable, hidden: int, step: int) -> te.Tensor:
    """The gate math on z(b, gate, u) = (h R^T)[b, gate * H + u]: the new cell state as a stage of
    its own (`lstm_cell_c`, computed once per unit), then the output stage (h and c)."""
    batch = const_shape(state)[0]

    def pre(b, g, u):
        return xw[step * batch + b, g * hidden + u] + z(b, g, u)

    c = te.compute((batch, hidden), lambda b, u: te.sigmoid(pre(b, 2, u)) * state[b, 1, u]
                   + te.sigmoid(pre(b, 0, u)) * te.tanh(pre(b, 3, u)), name="lstm_cell_c")
    return te.compute((batch, 2, hidden),
                      lambda b, s, u: te.if_then_else(s == 0, te.sigmoid(pre(b, 1, u)) * te.tanh(c[b, u]), c[b, u]),
                      name="lstm_cell", tag="lstm_cell")


def _reference(xw: np.ndarray, state: np.ndarray, r: np.ndarray, step: int) -> np.ndarray:
    batch, _, hidden = state.shape
    h, c = state[:, 0].astype(np.float64), state[:, 1].astype(np.float64)
    pre = xw[step * batch:(step + 1) * batch].astype(np.float64) + h @ r.astype(np.float64).T
    sig = lambda v: 1.0 / (1.0 + np.exp(-v))  # noqa: E731
    i, o, f, cand = (pre[:, g * hidden:(g + 1) * hidden] for g in range(4))
    c_new = sig(f) * c + sig(i) * np.tanh(cand)
    h_new = sig(o) * np.tanh(c_new)
    return np.stack([h_new, c_new], axis=1).astype(state.dtype)


@op("lstm_cell", COMPLEX)
class lstm_cell:
    @staticmethod
    def infer(xw: TensorType, state: TensorType, r: TensorType, step: int) -> TensorType:
        if r is None or len(r.shape) != 2 or r.shape[0] != 4 * r.shape[1]:
            raise OpError(f"lstm_cell: the recurrent weight must have shape (4 * hidden, hidden), got "
                          f"{tuple(r.shape) if r is not None else None}")
        _check("lstm_cell", xw, state, r.shape[1], step)
        if r.dtype != "float32":
            raise OpError(f"lstm_cell: takes a float32 recurrent weight, got {r.dtype}")
        return TensorType(tuple(state.shape), state.dtype)

    @staticmethod
    def compute(xw: te.Tensor, state: te.Tensor, r: te.Tensor, step: int) -> te.Tensor:
        batch, _, hidden = const_shape(state)
        k = te.reduce_axis((0, hidden), name="k")
        z = te.compute((batch, 4 * hidden), lambda b, j: te.sum(state[b, 0, k] * r[j, k], axis=k),
                       name="lstm_cell_gates")
        return _cell(xw, state, lambda b, g, u: z[b, g * hidden + u], hidden, int(step))

    @staticmethod
    def reference(xw: np.ndarray, state: np.ndarray, r: np.ndarray, step: int) -> np.ndarray:
        return _reference(xw, state, r, int(step))


@op("lstm_cell_packed", COMPLEX, schedule={"cpu": "rnn_cell_packed.cpu", "gpu": "rnn_cell_packed.gpu"})
class lstm_cell_packed:
    @staticmethod
    def infer(xw: TensorType, state: TensorType, rp: TensorType, step: int) -> TensorType:
        if rp is None or len(rp.shape) != 4 or rp.shape[2] != 4:
            raise OpError(f"lstm_cell_packed: the packed recurrent weight must have shape (blocks, hidden, 4, "
                          f"lanes), got {tuple(rp.shape) if rp is not None else None}")
        blocks, hidden, _, lanes = rp.shape
        if not (blocks - 1) * lanes < hidden <= blocks * lanes:
            raise OpError(f"lstm_cell_packed: {blocks} blocks of {lanes} units do not cover hidden size {hidden}")
        _check("lstm_cell_packed", xw, state, hidden, step)
        return TensorType(tuple(state.shape), state.dtype)

    @staticmethod
    def compute(xw: te.Tensor, state: te.Tensor, rp: te.Tensor, step: int) -> te.Tensor:
        batch = const_shape(state)[0]
        blocks, hidden, _, lanes = const_shape(rp)
        k = te.reduce_axis((0, hidden), name="k")
        # whole blocks of L units: the register tile never needs a guard; padded rows of R are zero
        z = te.compute((batch, blocks, 4, lanes), lambda b, ub, g, ul: te.sum(state[b, 0, k] * rp[ub, k, g, ul], axis=k),
                       name="lstm_cell_gates", attrs={"lanes": lanes})
        return _cell(xw, state, lambda b, g, u: z[b, u // lanes, g, u % lanes], hidden, int(step))

    @staticmethod
    def reference(xw: np.ndarray, state: np.ndarray, rp: np.ndarray, step: int) -> np.ndarray:
        return _reference(xw, state, unpack_recurrent(rp, state.shape[2]), int(step))
