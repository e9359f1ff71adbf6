"""Inline a graph-valued ONNX attribute (a GraphProto such as FlexAttention's score_mod) into the
graph being built: its inputs are bound to given Values, its initializers become constants, and
its nodes are converted one by one through the same converter table as the main graph.  The
subgraph may not read names of the enclosing graph; ops it uses must have converters.

Not a converter module: it registers nothing.
"""
from __future__ import annotations

from typing import Any, Sequence

from ...graph.ir import Value


def inline_subgraph(ctx, graph: Any, inputs: Sequence[Value], what: str) -> list[Value]:
    """The outputs of ONNX GraphProto `graph` applied to `inputs` (one Value per graph input)."""
    from onnx import numpy_helper

    # imported here, not at module level: only a node that carries a subgraph depends on the
    # frontend's converter table and attribute reader
    from ..onnx import _CONVERTERS, ConvertContext, _attr_value, op_key
    names = [i.name for i in graph.input]
    if len(names) != len(inputs):
        raise ValueError(f"{what} takes {len(names)} input(s), {len(inputs)} given")
    env: dict[str, Value | None] = {"": None, **dict(zip(names, inputs))}
    for init in graph.initializer:
        env[init.name] = ctx.builder.const(numpy_helper.to_array(init), name=f"{ctx.node_name}_{init.name}")
    for k, node in enumerate(graph.node):
        if op_key(node.op_type, node.domain) not in _CONVERTERS:
            raise NotImplementedError(f"node {ctx.node_name} ({ctx.op_type}): its {what} uses {node.op_type} "
                                      f"(domain {node.domain or 'ai.onnx'!r}), which tensorforge does not support")
        missing = [i for i in node.input if i not in env]
        if missing:
            raise ValueError(f"{what} node {node.name or node.op_type} reads {missing[0]!r}, which the subgraph "
                             "does not define (names of the enclosing graph are not supported)")
        label = f"{ctx.node_name}_{what}_{node.name or f'{node.op_type}_{k}'}"
        sub = ConvertContext(ctx.builder, ctx.default_opset or ctx.opset, label, node.op_type, tuple(node.output),
                             ctx.default_opset)
        fn, _since = _CONVERTERS[op_key(node.op_type, node.domain)]
        outs = fn(sub, [env[i] for i in node.input], {a.name: _attr_value(a) for a in node.attribute})
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        for name, value in zip(node.output, outs):
            if name:
                env[name] = value
    results: list[Value] = []
    for out in graph.output:
        value = env.get(out.name)
        if value is None:
            raise ValueError(f"{what} never produces its output {out.name!r}")
        results.append(value)
    return results
