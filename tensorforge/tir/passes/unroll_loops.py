"""Unrolling: a loop marked `unrolled` with a constant extent becomes copies of its body.

Loops whose extent is not a constant, or larger than `max_extent`, stay loops of kind `unrolled`
and the code generator asks the C compiler to unroll them.
"""
from __future__ import annotations

from ...te.expr import IntImm, const
from .. import nodes as N
from ..functor import Mutator, substitute

MAX_UNROLL = 128


class _Unroll(Mutator):
    def __init__(self, max_extent: int):
        self.max_extent = max_extent

    def visit_For(self, node: N.For):
        node = self.generic_visit(node)
        if node.kind != N.UNROLLED or not isinstance(node.extent, IntImm) or not isinstance(node.min, IntImm):
            return node
        if node.extent.value > self.max_extent:
            return node
        start = node.min.value
        return N.seq(*[substitute(node.body, {node.loop_var: const(start + k, node.loop_var.dtype)})
                       for k in range(node.extent.value)]) if node.extent.value > 0 else N.NOP


def unroll_loops(func: N.PrimFunc, max_extent: int = MAX_UNROLL) -> N.PrimFunc:
    return func.with_body(_Unroll(max_extent).visit(func.body))
