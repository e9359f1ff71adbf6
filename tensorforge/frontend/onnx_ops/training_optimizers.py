"""ONNX training optimizers (domain ai.onnx.preview.training, version 1): Adagrad, Momentum and
Adam -> elementwise graph ops.  Each node takes a scalar learning rate R, a scalar iteration
count T and n tensors to optimize with their gradients and states (X1..Xn, G1..Gn, then the
state tensors), and returns the updated tensors and states in the same grouping.  With g the
gradient plus the L2 term (norm_coefficient * X):

    Adagrad   H' = H + g^2;  X' = X - R / (1 + T * decay_factor) * g / (sqrt(H') + epsilon)
    Momentum  V' = alpha V + (beta if T > 0 else 1) g;  X' = X - R V'   (standard)
                                                        X' = X - R (g + alpha V')   (nesterov)
    Adam      V' = alpha V + (1 - alpha) g;  H' = beta H + (1 - beta) g^2;
              R' = R sqrt(1 - beta^T) / (1 - alpha^T) if T > 0 else R
              X' = (1 - norm_coefficient_post) (X - R' V' / (sqrt(H') + epsilon))

T is read at run time, so its branches become `where` selections.
"""
from __future__ import annotations

import numpy as np

from ...graph.ir import Value
from ..onnx import converter
from . import rnn_graph as g


class _Update:
    """Graph-building arithmetic in one floating dtype, with Python floats as constants."""

    def __init__(self, ctx, dtype: str):
        self.ctx, self.dtype = ctx, dtype

    def v(self, x) -> Value:
        if isinstance(x, Value):
            return x if x.dtype == self.dtype else self.ctx.add1("cast", [x], {"dtype": self.dtype})
        return g.scalar(self.ctx, float(x), self.dtype)

    def op(self, name: str, *xs) -> Value:
        return self.ctx.add1(name, [self.v(x) for x in xs])

    def add(self, a, b) -> Value:
        return self.op("add", a, b)

    def sub(self, a, b) -> Value:
        return self.op("sub", a, b)

    def mul(self, a, b) -> Value:
        return self.op("mul", a, b)

    def div(self, a, b) -> Value:
        return self.op("div", a, b)

    def sqrt(self, a) -> Value:
        return self.op("sqrt", a)

    def where(self, cond: Value, a, b) -> Value:
        return self.ctx.add1("where", [cond, self.v(a), self.v(b)])


def _groups(ctx, inputs: list, per_tensor: int) -> tuple[Value, Value, list[list[Value]]]:
    """(R, T, [[X_i, G_i, states_i...] for each tensor i])."""
    rate, step, rest = inputs[0], inputs[1], list(inputs[2:])
    if rate is None or step is None or any(v is None for v in rest):
        raise ValueError("the inputs R, T and every optimized tensor, gradient and state are required")
    if not rest or len(rest) % per_tensor:
        raise ValueError(f"after R and T the inputs must come in {per_tensor} groups of equal size (X, G, "
                         f"then the states), got {len(rest)} tensors")
    if rate.shape not in ((), (1,)) or step.shape not in ((), (1,)):
        raise ValueError(f"R and T must be scalars, got shapes {rate.shape} and {step.shape}")
    n = len(rest) // per_tensor
    tensors = [[rest[k * n + i] for k in range(per_tensor)] for i in range(n)]
    for group in tensors:
        if len({tuple(v.shape) for v in group}) != 1:
            raise ValueError(f"a tensor, its gradient and its states must share one shape, got "
                             f"{[v.shape for v in group]}")
    return g.reshape(ctx, rate, ()), g.reshape(ctx, step, ()), tensors


def _started(ctx, step: Value) -> Value:
    return ctx.add1("greater", [step, ctx.const(np.array(0, dtype=step.dtype))])


def _regularized(u: _Update, x: Value, grad: Value, norm: float) -> Value:
    return u.add(u.mul(norm, x), grad) if norm else u.v(grad)


@converter("Adagrad", domain="ai.onnx.preview.training")
def convert_adagrad(ctx, inputs: list, attrs: dict) -> list:
    rate, step, tensors = _groups(ctx, inputs, 3)
    decay, eps = float(attrs.get("decay_factor", 0.0)), float(attrs.get("epsilon", 1e-6))
    norm = float(attrs.get("norm_coefficient", 0.0))
    xs, hs = [], []
    for x, grad, h in tensors:
        u = _Update(ctx, x.dtype)
        rate_t = u.div(rate, u.add(1.0, u.mul(step, decay)))
        reg = _regularized(u, x, grad, norm)
        h_new = u.add(h, u.mul(reg, reg))
        xs.append(u.sub(x, u.div(u.mul(rate_t, reg), u.add(u.sqrt(h_new), eps))))
        hs.append(h_new)
    return xs + hs


@converter("Momentum", domain="ai.onnx.preview.training")
def convert_momentum(ctx, inputs: list, attrs: dict) -> list:
    missing = [k for k in ("alpha", "beta", "mode", "norm_coefficient") if k not in attrs]
    if missing:
        raise ValueError(f"missing required attribute(s): {', '.join(missing)}")
    mode = str(attrs["mode"])
    if mode not in ("standard", "nesterov"):
        raise ValueError(f"mode {mode!r} is not one of standard, nesterov")
    alpha, beta, norm = float(attrs["alpha"]), float(attrs["beta"]), float(attrs["norm_coefficient"])
    rate, step, tensors = _groups(ctx, inputs, 3)
    started = _started(ctx, step)
    xs, vs = [], []
    for x, grad, v in tensors:
        u = _Update(ctx, x.dtype)
        reg = _regularized(u, x, grad, norm)
        v_new = u.add(u.mul(alpha, v), u.mul(u.where(started, beta, 1.0), reg))
        direction = v_new if mode == "standard" else u.add(reg, u.mul(alpha, v_new))
        xs.append(u.sub(x, u.mul(rate, direction)))
        vs.append(v_new)
    return xs + vs


@converter("Adam", domain="ai.onnx.preview.training")
def convert_adam(ctx, inputs: list, attrs: dict) -> list:
    alpha, beta = float(attrs.get("alpha", 0.9)), float(attrs.get("beta", 0.999))
    eps, norm = float(attrs.get("epsilon", 1e-6)), float(attrs.get("norm_coefficient", 0.0))
    post = float(attrs.get("norm_coefficient_post", 0.0))
    rate, step, tensors = _groups(ctx, inputs, 4)
    started = _started(ctx, step)
    xs, vs, hs = [], [], []
    for x, grad, v, h in tensors:
        u = _Update(ctx, x.dtype)
        reg = _regularized(u, x, grad, norm)
        v_new = u.add(u.mul(alpha, v), u.mul(1.0 - alpha, reg))
        h_new = u.add(u.mul(beta, h), u.mul(1.0 - beta, u.mul(reg, reg)))
        t = u.v(step)
        corrected = u.div(u.mul(rate, u.sqrt(u.sub(1.0, u.op("pow", beta, t)))), u.sub(1.0, u.op("pow", alpha, t)))
        rate_t = u.where(started, corrected, rate)
        x_new = u.sub(x, u.mul(rate_t, u.div(v_new, u.add(u.sqrt(h_new), eps))))
        xs.append(u.mul(1.0 - post, x_new) if post else x_new)
        vs.append(v_new)
        hs.append(h_new)
    return xs + vs + hs
