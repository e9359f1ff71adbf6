"""ONNX NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss -> existing graph ops (frontend ->
Graph), as the ONNX function bodies build them.

Input (N, C, d1..dk) holds (log-)probabilities along axis 1, target (N, d1..dk) class indices,
weight (C) optional per-class weights.  Per element

    loss[n, d] = -input[n, target[n, d], d] * w[n, d],   w = weight[target] (1 without weights),

and 0 where target == ignore_index (that element's w is 0 too).  reduction "none" returns loss,
"sum" its sum, "mean" sum(loss) / sum(w): the weighted mean over the elements not ignored.
SoftmaxCrossEntropyLoss is the same loss on log_softmax(scores) along axis 1 and optionally
returns that log-probability tensor as its second output.

The pick along C is a gather_elements of the target (ignored entries read class 0 and are
masked after), so the fuser makes a few small kernels of it and nothing runs on the host.
"""
from __future__ import annotations

from ...graph.ir import Value
from ..onnx import converter
from .nn_common import wants_output

REDUCTIONS = ("none", "sum", "mean")


def _check(ctx, x: Value, target: Value, weight: Value | None, reduction: str) -> None:
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction={reduction!r} must be one of {', '.join(REDUCTIONS)}")
    if len(x.shape) < 2:
        raise ValueError(f"input has shape {x.shape}; it must be (N, C, d1, .., dk) with rank >= 2")
    want = (x.shape[0],) + tuple(x.shape[2:])
    if tuple(target.shape) != want:
        raise ValueError(f"target has shape {tuple(target.shape)}; for input {tuple(x.shape)} it must be {want}")
    if not target.dtype.startswith("int"):
        raise ValueError(f"target has dtype {target.dtype}; it must be int32 or int64")
    if weight is not None and tuple(weight.shape) != (x.shape[1],):
        raise ValueError(f"weight has shape {tuple(weight.shape)}; it must be ({x.shape[1]},), one per class")


def nll_loss(ctx, x: Value, target: Value, weight: Value | None, reduction: str,
             ignore_index: int | None) -> Value:
    """The loss of -x picked at `target` along axis 1, weighted, masked and reduced (see above)."""
    _check(ctx, x, target, weight, reduction)
    zero = ctx.const(0, x.dtype)
    valid = None
    if ignore_index is not None:
        hit = ctx.add1("equal", [target, ctx.const(ignore_index, target.dtype)])
        valid = ctx.add1("logical_not", [hit])
        target = ctx.add1("where", [valid, target, ctx.const(0, target.dtype)])
    picked = ctx.add1("gather_elements", [x, ctx.add1("unsqueeze", [target], {"axes": (1,)})], {"axis": 1})
    loss = ctx.add1("neg", [ctx.add1("squeeze", [picked], {"axes": (1,)})])
    w = None
    if weight is not None:
        w = ctx.add1("gather", [weight, target], {"axis": 0})
        if valid is not None:
            w = ctx.add1("where", [valid, w, zero])
        loss = ctx.add1("mul", [loss, w])
    elif valid is not None:
        w = ctx.add1("cast", [valid], {"dtype": x.dtype})
        loss = ctx.add1("where", [valid, loss, zero])
    if reduction == "none":
        return loss
    total = ctx.add1("reduce_sum", [loss], {"axes": None, "keepdims": 0})
    if reduction == "sum":
        return total
    if w is None:
        return ctx.add1("reduce_mean", [loss], {"axes": None, "keepdims": 0})
    return ctx.add1("div", [total, ctx.add1("reduce_sum", [w], {"axes": None, "keepdims": 0})])


def _loss_attrs(attrs: dict) -> tuple[str, int | None]:
    reduction = attrs.get("reduction", "mean")
    reduction = reduction.decode() if isinstance(reduction, bytes) else str(reduction)
    ignore = attrs.get("ignore_index")
    return reduction, None if ignore is None else int(ignore)


def _weight(inputs: list) -> Value | None:
    return inputs[2] if len(inputs) > 2 else None


@converter("NegativeLogLikelihoodLoss", since=12)
def negative_log_likelihood_loss(ctx, inputs: list, attrs: dict):
    reduction, ignore = _loss_attrs(attrs)
    return nll_loss(ctx, inputs[0], inputs[1], _weight(inputs), reduction, ignore)


@converter("SoftmaxCrossEntropyLoss", since=12)
def softmax_cross_entropy_loss(ctx, inputs: list, attrs: dict):
    reduction, ignore = _loss_attrs(attrs)
    scores = inputs[0]
    if len(scores.shape) < 2:
        raise ValueError(f"scores has shape {scores.shape}; it must be (N, C, d1, .., dk) with rank >= 2")
    log_prob = ctx.add1("log_softmax", [scores], {"axes": (1,)})
    loss = nll_loss(ctx, log_prob, inputs[1], _weight(inputs), reduction, ignore)
    return [loss, log_prob] if wants_output(ctx, 1) else [loss]
