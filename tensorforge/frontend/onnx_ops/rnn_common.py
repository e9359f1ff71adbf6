"""What the ONNX LSTM, GRU and RNN converters share (ONNX -> Graph): attribute parsing, the
hoisted input projection, sequence-length masks, the unrolled time loop and the layout of the
outputs.

Algorithm (per direction): X is brought to [seq, batch, input]; one matmul computes the input
projection X W^T + (Wb + Rb) of all time steps at once ([seq * batch, gates * hidden]); the time
loop is then unrolled.  The cells torch exports (LSTM with its default activations, GRU with
linear_before_reset) become one cell op per step (ops/nn_lstm_cell.py, ops/nn_gru_cell.py: the
recurrent product and the gates in one kernel); other cells are decomposed: each step slices its
rows, adds h_{t-1} R^T (one matmul) and does the gate math with elementwise ops.  The reverse
direction walks the steps backwards.  Step outputs are concatenated into Y.

Sequence lengths shorter than the sequence are handled with a [seq, batch] mask: a masked step
keeps the previous state and writes zeros to Y, which gives ONNX's results for both directions
(a reverse pass over a padded sequence starts from its initial state at its last valid step).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ...graph.ir import Value
from . import rnn_graph as g

DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}


@dataclass(frozen=True)
class RNNSpec:
    """The parsed attributes and static sizes of one LSTM/GRU/RNN node."""

    op: str
    hidden: int
    directions: tuple          # ("forward",), ("reverse",) or ("forward", "reverse")
    layout: int
    seq: int
    batch: int
    dtype: str
    activations: tuple         # per direction: tuple of (name, alpha, beta)
    clip: float | None


def parse_spec(ctx, op: str, inputs: list, attrs: dict, num_gates: int, default_acts: tuple) -> RNNSpec:
    """Validate the node's attributes against its inputs and return the spec."""
    x, w = inputs[0], inputs[1]
    direction = attrs.get("direction", "forward")
    if direction not in DIRECTIONS:
        raise ValueError(f"{op}: direction must be forward, reverse or bidirectional, got {direction!r}")
    num_dirs = DIRECTIONS[direction]
    layout = int(attrs.get("layout", 0))
    if layout not in (0, 1):
        raise ValueError(f"{op}: layout must be 0 or 1, got {layout}")
    if x.ndim != 3:
        raise ValueError(f"{op}: X must have rank 3, got shape {x.shape}")
    seq, batch = (x.shape[0], x.shape[1]) if layout == 0 else (x.shape[1], x.shape[0])
    if seq == 0 or batch == 0:
        raise NotImplementedError(f"{op}: empty inputs (sequence length {seq}, batch {batch}) are not supported")
    hidden = attrs.get("hidden_size")
    if hidden is None:
        hidden = w.shape[1] // num_gates
    hidden = int(hidden)
    expect_w = (num_dirs, num_gates * hidden, x.shape[2])
    if tuple(w.shape) != expect_w:
        raise ValueError(f"{op}: W must have shape {expect_w} (directions, {num_gates}*hidden_size, input), "
                         f"got {w.shape}")
    expect_r = (num_dirs, num_gates * hidden, hidden)
    if tuple(inputs[2].shape) != expect_r:
        raise ValueError(f"{op}: R must have shape {expect_r}, got {inputs[2].shape}")
    clip = attrs.get("clip")
    if clip is not None and clip <= 0:
        raise ValueError(f"{op}: clip must be positive, got {clip}")
    acts = _activations(op, attrs, num_dirs, default_acts)
    names = ("forward", "reverse") if num_dirs == 2 else (direction,)
    return RNNSpec(op, hidden, names, layout, seq, batch, x.dtype, acts, clip)


def _activations(op: str, attrs: dict, num_dirs: int, default: tuple) -> tuple:
    """Per direction, the activation functions with their alpha/beta.  Alphas and betas are
    consumed in order by the functions that take them; defaults fill in when the lists run out."""
    names = tuple(attrs.get("activations") or default * num_dirs)
    per_dir = len(default)
    if len(names) != per_dir * num_dirs:
        raise ValueError(f"{op}: activations must list {per_dir * num_dirs} functions "
                         f"({per_dir} per direction), got {len(names)}: {list(names)}")
    alphas, betas = list(attrs.get("activation_alpha") or ()), list(attrs.get("activation_beta") or ())
    resolved = []
    for name in names:
        if name.lower() not in g.ACTIVATIONS:
            raise NotImplementedError(f"{op}: activation {name!r} is not supported; "
                                      f"supported: {', '.join(sorted(g.ACTIVATIONS))}")
        uses_a, uses_b, def_a, def_b = g.ACTIVATIONS[name.lower()]
        alpha = (alphas.pop(0) if alphas else def_a) if uses_a else None
        beta = (betas.pop(0) if betas else def_b) if uses_b else None
        if (uses_a and alpha is None) or (uses_b and beta is None):
            raise ValueError(f"{op}: activation {name} needs activation_alpha/activation_beta values")
        resolved.append((name, alpha, beta))
    return tuple(tuple(resolved[d * per_dir:(d + 1) * per_dir]) for d in range(num_dirs))


# -- inputs ---------------------------------------------------------------------------------------
def time_major(ctx, spec: RNNSpec, x: Value) -> Value:
    """X as [seq * batch, input], time-major."""
    if spec.layout == 1:
        x = g.transpose(ctx, x, (1, 0, 2))
    return g.reshape(ctx, x, (spec.seq * spec.batch, x.shape[2]))


def direction_weight(ctx, v: Value, d: int) -> Value:
    """v[d] of a per-direction weight or bias (matrices stay [gates * hidden, in], for dense)."""
    return g.take(ctx, v, 0, d)


def initial_state(ctx, spec: RNNSpec, v: Value | None, d: int, what: str) -> Value | None:
    """Direction d's [batch, hidden] slice of initial_h / initial_c (None when absent)."""
    if v is None:
        return None
    num_dirs = len(spec.directions)
    expect = (num_dirs, spec.batch, spec.hidden) if spec.layout == 0 else (spec.batch, num_dirs, spec.hidden)
    if tuple(v.shape) != expect:
        raise ValueError(f"{spec.op}: {what} must have shape {expect}, got {v.shape}")
    return g.take(ctx, v, 0 if spec.layout == 0 else 1, d)


def step_masks(ctx, spec: RNNSpec, lens: Value | None) -> list | None:
    """Per time step a [batch, 1] bool mask of the batch entries still running, or None when
    every sequence has the full length."""
    if lens is None:
        return None
    if tuple(lens.shape) != (spec.batch,):
        raise ValueError(f"{spec.op}: sequence_lens must have shape ({spec.batch},), got {lens.shape}")
    if ctx.is_const(lens):
        values = ctx.value_of(lens, "sequence_lens")
        if np.any(values < 0) or np.any(values > spec.seq):
            raise ValueError(f"{spec.op}: sequence_lens {values.tolist()} must lie in [0, {spec.seq}]")
        if np.all(values == spec.seq):
            return None
    steps = ctx.const(np.arange(spec.seq, dtype=lens.dtype).reshape(spec.seq, 1))
    mask = ctx.add1("less", [steps, g.reshape(ctx, lens, (1, spec.batch))])        # [seq, batch]
    mask = g.reshape(ctx, mask, (spec.seq * spec.batch, 1))
    return [g.slice_axis(ctx, mask, 0, t * spec.batch, (t + 1) * spec.batch) for t in range(spec.seq)]


# -- the unrolled loop ----------------------------------------------------------------------------
@dataclass(frozen=True)
class StepInput:
    """Step t's rows of the projected input xw [seq * batch, gates * hidden].  Each read is one
    slice of xw, so no per-step copy of the rows is shared by several gates (which would cost a
    kernel of its own)."""

    ctx: Any
    xw: Value
    rows: tuple

    def all(self) -> Value:
        return g.slice_axis(self.ctx, self.xw, 0, *self.rows)

    def gates(self, parts: int) -> list[Value]:
        width = self.xw.shape[1] // parts
        return [g.slice_block(self.ctx, self.xw, self.rows, (k * width, (k + 1) * width)) for k in range(parts)]


StepFn = Callable[[StepInput, tuple], tuple]


def unroll(ctx, spec: RNNSpec, xw: Value, state: tuple, step: StepFn, reverse: bool,
           masks: list | None) -> tuple[list, tuple]:
    """Run `step(x_t, state) -> new state` over the time steps of xw ([seq * batch, gates * hidden],
    the projected input); state[0] is h.  Returns (h of every step in time order, final state).
    A None entry in `state` is a zero state not materialized yet."""
    outs: list = [None] * spec.seq
    order = range(spec.seq - 1, -1, -1) if reverse else range(spec.seq)
    for t in order:
        new = step(StepInput(ctx, xw, (t * spec.batch, (t + 1) * spec.batch)), state)
        if masks is not None:
            zero = g.scalar(ctx, 0, spec.dtype)
            outs[t] = g.where(ctx, masks[t], new[0], zero)
            new = tuple(g.where(ctx, masks[t], n, o if o is not None else zero) for n, o in zip(new, state))
        else:
            outs[t] = new[0]
        state = new
    return outs, state


def zeros_if_none(ctx, spec: RNNSpec, v: Value | None) -> Value:
    """A state value, materializing an all-zero state (an initial state that never changed)."""
    if v is not None:
        return v
    return ctx.const(np.zeros((spec.batch, spec.hidden), spec.dtype))


# -- outputs --------------------------------------------------------------------------------------
def assemble_y(ctx, spec: RNNSpec, per_dir_outs: list) -> Value:
    """Y: [seq, dirs, batch, hidden] (layout 0) or [batch, seq, dirs, hidden] (layout 1)."""
    num_dirs = len(per_dir_outs)
    ys = []
    for outs in per_dir_outs:
        y = g.concat(ctx, outs, 0)                                             # [seq * batch, hidden]
        ys.append(g.reshape(ctx, y, (spec.seq, 1, spec.batch, spec.hidden)))
    y = g.concat(ctx, ys, 1)
    assert tuple(y.shape) == (spec.seq, num_dirs, spec.batch, spec.hidden)
    return g.transpose(ctx, y, (2, 0, 1, 3)) if spec.layout == 1 else y


def assemble_state(ctx, spec: RNNSpec, per_dir: list) -> Value:
    """Y_h / Y_c: [dirs, batch, hidden] (layout 0) or [batch, dirs, hidden] (layout 1)."""
    states = [zeros_if_none(ctx, spec, s) for s in per_dir]
    y = g.stack(ctx, states, 0)
    return g.transpose(ctx, y, (1, 0, 2)) if spec.layout == 1 else y


def check_optional_shape(spec: RNNSpec, v: Value | None, shape: tuple, what: str) -> None:
    if v is not None and tuple(v.shape) != tuple(shape):
        raise ValueError(f"{spec.op}: {what} must have shape {shape}, got {v.shape}")


def gate_activation(ctx, spec: RNNSpec, act: tuple, x: Value) -> Value:
    """Clip (when the node asks) and apply one (name, alpha, beta) activation."""
    if spec.clip is not None:
        x = g.clip(ctx, x, -spec.clip, spec.clip)
    name, alpha, beta = act
    return g.activation(ctx, name, x, alpha, beta)
