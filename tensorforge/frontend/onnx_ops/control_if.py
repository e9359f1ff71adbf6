"""If with a condition known while the graph is built: the branch it takes is inlined.

Exporters write many conditions that only depend on shapes (PyTorch's `x.squeeze(0)` becomes
`If(Equal(Shape(x)[0], 1))`, an RNN's batch-first check another If), so with static shapes the
condition folds to a constant and the model is one static graph: no host step, one memory
plan, fusion across the branch boundary.  A condition computed from data raises
RuntimeValueError: the staged model (staged.py, frontend/onnx_program.py) then specializes on
the condition's value (a boolean: at most two specializations per If) or runs the If on the
host (onnx_host/control.py), which is also where a branch with an op that has no converter
goes.
"""
from __future__ import annotations

from ...graph.builder import RuntimeValueError
from ...graph.ir import GraphError
from ..onnx import RunOnHost, converter
from .subgraph import inline_subgraph


@converter("If")
def if_(ctx, inputs, attrs):
    cond = inputs[0]
    if cond is None or cond.size != 1:
        raise GraphError(f"node {ctx.node_name} (If): the condition must hold one element, "
                         f"got {cond.type_str() if cond is not None else 'nothing'}")
    flag = bool(ctx.value_of(cond, "condition").reshape(()))     # RuntimeValueError when computed at run time
    which = "then_branch" if flag else "else_branch"
    try:
        outs = inline_subgraph(ctx, attrs[which], [], which, outer=ctx.scope)
    except RuntimeValueError:
        raise
    except (NotImplementedError, GraphError, ValueError) as err:
        raise RunOnHost(f"node {ctx.node_name} (If): its {which} cannot be compiled as part of the "
                        f"graph ({err})") from None
    if len(outs) != len(ctx.outputs):
        raise GraphError(f"node {ctx.node_name} (If): the {which} returns {len(outs)} value(s) for "
                         f"{len(ctx.outputs)} output(s)")
    return outs
