"""structural_equal: Vars by identity, everything else by value; and the Interner numbering."""
from __future__ import annotations

from tensorforge.arith import structural_equal
from tensorforge.arith.structural import Interner
from tensorforge.ir import expr as E
from tensorforge.ir.expr import Var, const
from tensorforge.tir import nodes as N


def test_vars_compare_by_identity():
    a, b = Var("i"), Var("i")
    assert structural_equal(a + 1, a + 1)
    assert not structural_equal(a + 1, b + 1)
    assert structural_equal(a + 1, b + 1, map_vars=True)


def test_map_vars_is_one_to_one():
    a, b, c = Var("a"), Var("b"), Var("c")
    assert not structural_equal(a + a, b + c, map_vars=True)
    assert not structural_equal(a + b, c + c, map_vars=True)
    assert not structural_equal(a, Var("x", "int64"), map_vars=True)


def test_constants_compare_by_dtype_and_value():
    assert structural_equal(const(3), const(3))
    assert not structural_equal(const(3), const(3, "int64"))
    assert not structural_equal(const(0.0), const(-0.0))
    assert structural_equal(const(float("nan")), const(float("nan")))
    assert not structural_equal(const(1), const(1.0))


def test_node_types_and_fields_matter():
    i = Var("i")
    assert not structural_equal(i + 1, i - 1)
    assert not structural_equal(i // 2, i % 2)
    assert not structural_equal(E.Ramp(i, const(1), 4), E.Ramp(i, const(1), 8))
    assert structural_equal((i, 1, "x"), (i, 1, "x"))
    assert not structural_equal((i,), (i, i))


def test_statements_and_functions():
    i = Var("i")
    buf = N.Buffer("A", (16,), "float32")
    body = N.For(i, const(0), const(16), N.SERIAL, N.BufferStore(buf, const(1.0), (i,)))
    same = N.For(i, const(0), const(16), N.SERIAL, N.BufferStore(buf, const(1.0), (i,)))
    other = N.For(i, const(0), const(16), N.PARALLEL, N.BufferStore(buf, const(1.0), (i,)))
    assert structural_equal(body, same)
    assert not structural_equal(body, other)
    f = N.PrimFunc("f", (buf,), body)
    assert structural_equal(f, N.PrimFunc("f", (buf,), same))


def test_deep_chains_do_not_overflow_the_stack():
    i = Var("i")
    a = b = i
    for t in range(5000):
        a, b = a + t, b + t
    assert structural_equal(a, b)


def test_interner_numbers_equal_structures_equally():
    i, j = Var("i"), Var("j")
    it = Interner()
    assert it.key(i * 4 + j) == it.key(i * 4 + j)
    assert it.key(i * 4 + j) != it.key(j * 4 + i)
    assert it.key(Var("i")) != it.key(i)
    assert it.sort_key(i) < it.sort_key(j)
