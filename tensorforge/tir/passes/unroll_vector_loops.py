"""Vectorized loops become unrolled loops, for targets whose printer has no vector types.

On a GPU, the lanes of a CPU vector are better spent as threads, and each thread's few
consecutive elements as independent scalar instructions: `vectorize` in a schedule written for a
GPU asks for that.  Meaning is unchanged: only the loop kind differs.
"""
from __future__ import annotations

from ...ir.functor import Mutator
from .. import nodes as N


class _Unvectorize(Mutator):
    def visit_For(self, node: N.For):
        node = self.generic_visit(node)
        if node.kind != N.VECTORIZED:
            return node
        return N.For(node.loop_var, node.min, node.extent, N.UNROLLED, node.body, node.thread_tag,
                     node.annotations)


def unroll_vector_loops(func: N.PrimFunc) -> N.PrimFunc:
    body = _Unvectorize().visit(func.body)
    return func if body is func.body else func.with_body(body)
