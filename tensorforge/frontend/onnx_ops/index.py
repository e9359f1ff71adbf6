"""ONNX Gather, GatherElements, GatherND, ScatterElements, Scatter and ScatterND -> tensorforge
ops (frontend -> Graph).

Scatter (opsets 9-10) is ScatterElements under its old name.  ScatterElements' and ScatterND's
`reduction` (opsets 16/18) is passed through: none, add, mul, max, min.
"""
from __future__ import annotations

from ..onnx import converter


@converter("Gather")
def convert_gather(ctx, inputs, attrs):
    return ctx.add1("gather", inputs[:2], {"axis": int(attrs.get("axis", 0))})


@converter("GatherElements", since=11)
def convert_gather_elements(ctx, inputs, attrs):
    return ctx.add1("gather_elements", inputs[:2], {"axis": int(attrs.get("axis", 0))})


@converter("GatherND", since=11)
def convert_gather_nd(ctx, inputs, attrs):
    return ctx.add1("gather_nd", inputs[:2], {"batch_dims": int(attrs.get("batch_dims", 0))})


@converter("ScatterElements", "Scatter", since=9)
def convert_scatter_elements(ctx, inputs, attrs):
    return ctx.add1("scatter_elements", inputs[:3], {"axis": int(attrs.get("axis", 0)),
                                                     "reduction": attrs.get("reduction", "none")})


@converter("ScatterND", since=11)
def convert_scatter_nd(ctx, inputs, attrs):
    return ctx.add1("scatter_nd", inputs[:3], {"reduction": attrs.get("reduction", "none")})
