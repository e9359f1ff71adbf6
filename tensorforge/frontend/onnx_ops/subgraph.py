"""Inline a graph-valued ONNX attribute (a GraphProto such as FlexAttention's score_mod, or the
branch an If takes) into the graph being built: its inputs are bound to given Values, its
initializers become constants, and its nodes are converted one by one through the same converter
table as the main graph.  With `outer`, the subgraph may also read names of the enclosing graph
(an If branch does); ops it uses must have converters.

Not a converter module: it registers nothing.
"""
from __future__ import annotations

from typing import Any, Sequence

from ...graph.ir import Value


def inline_subgraph(ctx, graph: Any, inputs: Sequence[Value], what: str, outer: Any = None) -> list[Value]:
    """The outputs of ONNX GraphProto `graph` applied to `inputs` (one Value per graph input);
    `outer` maps the enclosing graph's names to Values, for a subgraph that reads them."""
    from collections import ChainMap

    from onnx import numpy_helper

    # imported here, not at module level: only a node that carries a subgraph depends on the
    # frontend's converter table and attribute reader
    from ..onnx import _CONVERTERS, ConvertContext, _attr_value, op_key
    names = [i.name for i in graph.input]
    if len(names) != len(inputs):
        raise ValueError(f"{what} takes {len(names)} input(s), {len(inputs)} given")
    local: dict[str, Value | None] = {"": None, **dict(zip(names, inputs))}
    env = ChainMap(local, outer) if outer is not None else local
    for init in graph.initializer:
        local[init.name] = ctx.builder.const(numpy_helper.to_array(init), name=f"{ctx.node_name}_{init.name}")
    for k, node in enumerate(graph.node):
        if op_key(node.op_type, node.domain) not in _CONVERTERS:
            raise NotImplementedError(f"node {ctx.node_name} ({ctx.op_type}): its {what} uses {node.op_type} "
                                      f"(domain {node.domain or 'ai.onnx'!r}), which tensorforge does not support")
        missing = [i for i in node.input if i not in env]
        if missing:
            where = "it nor the enclosing graph defines" if outer is not None else \
                "the subgraph does not define (names of the enclosing graph are not supported)"
            raise ValueError(f"{what} node {node.name or node.op_type} reads {missing[0]!r}, which {where}")
        label = f"{ctx.node_name}_{what}_{node.name or f'{node.op_type}_{k}'}"
        sub = ConvertContext(ctx.builder, ctx.default_opset or ctx.opset, label, node.op_type, tuple(node.output),
                             ctx.default_opset, scope=env if outer is not None else None)
        fn, _since = _CONVERTERS[op_key(node.op_type, node.domain)]
        outs = fn(sub, [env[i] for i in node.input], {a.name: _attr_value(a) for a in node.attribute})
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        for name, value in zip(node.output, outs):
            if name:
                local[name] = value
    results: list[Value] = []
    for out in graph.output:
        value = env.get(out.name)
        if value is None:
            raise ValueError(f"{what} never produces its output {out.name!r}")
        results.append(value)
    return results
