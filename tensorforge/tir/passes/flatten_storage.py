"""Storage flattening: multi-dimensional buffer accesses become one row-major offset.

`A[i, j]` on a buffer of shape (n, m) becomes `A[i * m + j]`.  Buffers keep their logical shape
(for printing and argument checks); code generators allocate the product of the shape.
"""
from __future__ import annotations

from ...ir.expr import Expr, const
from ...ir.functor import Mutator
from .. import nodes as N


def flat_index(shape: tuple, indices: tuple) -> Expr:
    """Row-major offset of `indices` in an array of `shape`."""
    if not indices:
        return const(0)
    offset = indices[0]
    for dim, idx in zip(shape[1:], indices[1:]):
        offset = offset * dim + idx
    return offset


class _Flatten(Mutator):
    def visit_BufferLoad(self, node: N.BufferLoad):
        node = self.generic_visit(node)
        if len(node.indices) == 1:
            return node
        return N.BufferLoad(node.buffer, (flat_index(node.buffer.shape, node.indices),))

    def visit_BufferStore(self, node: N.BufferStore):
        node = self.generic_visit(node)
        if len(node.indices) == 1:
            return node
        return N.BufferStore(node.buffer, node.value, (flat_index(node.buffer.shape, node.indices),))


def flatten_storage(func: N.PrimFunc) -> N.PrimFunc:
    return func.with_body(_Flatten().visit(func.body))
