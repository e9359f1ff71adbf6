"""ONNX MaxPool, AveragePool, LpPool -> {max,avg,lp}_pool{1,2,3}d, and GlobalMaxPool,
GlobalAveragePool, GlobalLpPool -> global_{max,avg,lp}_pool.

auto_pad is resolved into explicit padding here.  A MaxPool whose second output (Indices) is used
becomes max_pool_with_indices (ops/nn_pool_indices.py), with storage_order.
"""
from __future__ import annotations

from ...ops.nn_window import resolve_auto_pad
from ..onnx import converter
from .nn_common import int_tuple, spatial_rank, wants_output

_KINDS = {"MaxPool": "max", "AveragePool": "avg", "LpPool": "lp"}
_GLOBAL = {"GlobalMaxPool": "max", "GlobalAveragePool": "avg", "GlobalLpPool": "lp"}


def _lp_p(attrs: dict) -> float:
    p = float(attrs.get("p", 2))
    if p <= 0:
        raise ValueError(f"p={p} must be positive")
    return p


@converter("MaxPool", "AveragePool", "LpPool")
def pool(ctx, inputs: list, attrs: dict):
    kind = _KINDS[ctx.op_type]
    indices = kind == "max" and wants_output(ctx, 1)
    x = inputs[0]
    rank = spatial_rank(ctx, x)
    if "kernel_shape" not in attrs:
        raise ValueError("the attribute kernel_shape is required")
    kernel = int_tuple(attrs, "kernel_shape", None, rank)
    strides = int_tuple(attrs, "strides", (1,) * rank, rank)
    dilations = int_tuple(attrs, "dilations", (1,) * rank, rank)
    pads = resolve_auto_pad(attrs.get("auto_pad", "NOTSET"), x.shape[2:], kernel, strides, dilations,
                            int_tuple(attrs, "pads", None), op=ctx.op_type)
    op_attrs = {"kernel": kernel, "strides": strides, "padding": pads, "dilations": dilations,
                "ceil_mode": bool(attrs.get("ceil_mode", 0))}
    if kind == "avg":
        op_attrs["count_include_pad"] = bool(attrs.get("count_include_pad", 0))
    if kind == "lp":
        op_attrs["p"] = _lp_p(attrs)
    if indices:
        op_attrs["storage_order"] = int(attrs.get("storage_order", 0))
        return ctx.add("max_pool_with_indices", [x], op_attrs)
    return ctx.add1(f"{kind}_pool{rank}d", [x], op_attrs)


@converter("GlobalMaxPool", "GlobalAveragePool", "GlobalLpPool")
def global_pool(ctx, inputs: list, attrs: dict):
    kind = _GLOBAL[ctx.op_type]
    x = inputs[0]
    if len(x.shape) < 3:
        raise ValueError(f"X must be (N, C, D1, ...), got shape {x.shape}")
    return ctx.add1(f"global_{kind}_pool", [x], {"p": _lp_p(attrs)} if kind == "lp" else {})
