"""ONNX ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare, ArgMax, ArgMin, CumSum,
CumProd, TopK and Einsum -> tensorforge ops (frontend -> Graph).

* Reduce*: `axes` is an attribute until opset 13 (ReduceSum) or 18 (the others), then an optional
  constant input.  No axes (or an empty list) means every axis, unless noop_with_empty_axes=1,
  which reduces over no axis (the op still applies its elementwise part: |x|, x^2, log, ...).
* CumSum's / CumProd's axis and TopK's K (opset 10+) are read from constant inputs.
"""
from __future__ import annotations

from ..onnx import converter
from .transform_util import const_ints, const_scalar, input_at, present

REDUCE_OPS = {
    "ReduceSum": ("reduce_sum", 13), "ReduceMean": ("reduce_mean", 18), "ReduceMax": ("reduce_max", 18),
    "ReduceMin": ("reduce_min", 18), "ReduceProd": ("reduce_prod", 18), "ReduceL1": ("reduce_l1", 18),
    "ReduceL2": ("reduce_l2", 18), "ReduceLogSum": ("reduce_log_sum", 18),
    "ReduceLogSumExp": ("reduce_log_sum_exp", 18), "ReduceSumSquare": ("reduce_sum_square", 18),
}


@converter(*REDUCE_OPS)
def convert_reduce(ctx, inputs, attrs):
    name, axes_input_since = REDUCE_OPS[ctx.op_type]
    if ctx.opset < axes_input_since:
        axes = tuple(int(a) for a in attrs["axes"]) if attrs.get("axes") else ()
    else:
        v = input_at(inputs, 1)
        axes = const_ints(ctx, v, f"{ctx.op_type} axes") if present(v) else ()
    if not axes:
        axes = () if attrs.get("noop_with_empty_axes", 0) else None
    return ctx.add1(name, [inputs[0]], {"axes": axes, "keepdims": int(attrs.get("keepdims", 1))})


@converter("ArgMax", "ArgMin")
def convert_arg(ctx, inputs, attrs):
    name = "argmax" if ctx.op_type == "ArgMax" else "argmin"
    return ctx.add1(name, [inputs[0]], {"axis": int(attrs.get("axis", 0)), "keepdims": int(attrs.get("keepdims", 1)),
                                        "select_last_index": int(attrs.get("select_last_index", 0))})


@converter("CumSum", "CumProd", since=11)
def convert_cumsum(ctx, inputs, attrs):
    axis = int(const_scalar(ctx, inputs[1], f"{ctx.op_type} axis"))
    name = "cumsum" if ctx.op_type == "CumSum" else "cumprod"
    return ctx.add1(name, [inputs[0]], {"axis": axis, "exclusive": int(attrs.get("exclusive", 0)),
                                            "reverse": int(attrs.get("reverse", 0))})


@converter("TopK")
def convert_topk(ctx, inputs, attrs):
    k = int(attrs["k"]) if ctx.opset < 10 else int(const_scalar(ctx, inputs[1], "TopK K"))
    return ctx.add("topk", [inputs[0]], {"k": k, "axis": int(attrs.get("axis", -1)),
                                         "largest": int(attrs.get("largest", 1)),
                                         "sorted": int(attrs.get("sorted", 1))})


@converter("Einsum", since=12)
def convert_einsum(ctx, inputs, attrs):
    return ctx.add1("einsum", [v for v in inputs if v is not None], {"equation": attrs["equation"]})
