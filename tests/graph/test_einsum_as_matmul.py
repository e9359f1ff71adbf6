"""einsum_as_matmul: a two-operand einsum that is a batched matrix product (any order of its
batch, row, column and contracted labels in the operands and the output) becomes transposes,
reshapes and one matmul with the reference's values; equations that are not such a product keep
the einsum."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorforge
from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.passes.einsum_as_matmul import einsum_as_matmul
from tensorforge.graph.reference import run_reference
from tensorforge.target import Target

C = Target.parse("c")


def _graph(equation, xshape, yshape, dtype="float32"):
    b = GraphBuilder("einsum")
    x, y = b.input("x", xshape, dtype), b.input("y", yshape, dtype)
    return b.finish([b.add1("einsum", [x, y], {"equation": equation})])


@settings(max_examples=30, deadline=None)
@given(data=st.data(), counts=st.tuples(*(st.integers(0, 2) for _ in range(4))))
def test_batched_products_in_any_label_order_become_one_matmul(data, counts):
    nb, nr, nc, nk = counts
    letters = iter("abcdefgh")
    batch, rows, cols, contracted = ([next(letters) for _ in range(n)] for n in counts)
    sizes = {lab: data.draw(st.integers(1, 4)) for lab in batch + rows + cols + contracted}
    lx = data.draw(st.permutations(batch + rows + contracted))
    ly = data.draw(st.permutations(batch + contracted + cols))
    lz = data.draw(st.permutations(batch + rows + cols))
    equation = f"{''.join(lx)},{''.join(ly)}->{''.join(lz)}"
    xshape, yshape = tuple(sizes[lab] for lab in lx), tuple(sizes[lab] for lab in ly)
    graph = _graph(equation, xshape, yshape)
    got = einsum_as_matmul(graph, C)
    assert [n.op for n in got.nodes].count("matmul") == 1 and "einsum" not in [n.op for n in got.nodes]
    rng = np.random.default_rng(len(equation))
    xs = rng.standard_normal(xshape).astype("float32")
    ys = rng.standard_normal(yshape).astype("float32")
    want = np.einsum(equation, xs, ys)
    np.testing.assert_allclose(run_reference(got, xs, ys)[0], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(tensorforge.compile(graph)(xs, ys)[0], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("equation, xshape, yshape, dtype", [
    ("ij,jk->k", (2, 3), (3, 4), "float32"),          # i summed within x alone
    ("ii,ij->ij", (3, 3), (3, 4), "float32"),         # a diagonal
    ("ij,jk", (2, 3), (3, 4), "float32"),             # implicit output
    ("bij,bjk->bik", (1, 2, 3), (5, 3, 4), "float32"),  # a broadcast batch
    ("ij,jk->ik", (2, 3), (3, 4), "int32"),           # integers keep einsum's accumulation
])
def test_other_equations_keep_the_einsum(equation, xshape, yshape, dtype):
    graph = _graph(equation, xshape, yshape, dtype)
    assert einsum_as_matmul(graph, C) is graph
