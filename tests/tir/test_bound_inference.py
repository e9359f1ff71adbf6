"""Bound inference and loop generation (tir/build.py), before any loop-IR pass: a schedule is
lowered with `schedule_to_primfunc` and compared with the loop program written by hand
(`structural_equal` with `map_vars`, so the hand-written loop variables stand for the
schedule's).  The expected programs spell out what bound inference decides: the region an
attached stage computes (its buffer's shape and offset), the extents of split and fused loops,
and the guards a non-dividing split or a region past the tensor's edge needs.  Each schedule is
also run on the C backend and the interpreter against NumPy."""
from __future__ import annotations

from tensorforge import te
from tensorforge.arith import structural_equal
from tensorforge.ir import expr as E
from tensorforge.ir.expr import Var, const
from tensorforge.testing import check_schedule
from tensorforge.tir import nodes as N
from tensorforge.tir.build import schedule_to_primfunc


def loop(var, extent, body, start=0) -> N.For:
    return N.For(var, E.convert(start), E.convert(extent), N.SERIAL, body)


def load(buf, *idx):
    return N.BufferLoad(buf, tuple(E.convert(x) for x in idx))


def store(buf, value, *idx):
    return N.BufferStore(buf, E.convert(value), tuple(E.convert(x) for x in idx))


def buf(name, *shape) -> N.Buffer:
    return N.Buffer(name, shape, "float32")


def check(sch, args, want_params, want_body, reference):
    got = schedule_to_primfunc(sch, args)
    want = N.PrimFunc("main", tuple(want_params), want_body)
    assert structural_equal(got, want, map_vars=True), f"got:\n{got}\nexpected:\n{want}"
    check_schedule(sch, args, reference)


def test_root_stage_split_that_does_not_divide_gets_a_guard():
    A = te.placeholder((10,), name="A")
    C = te.compute((10,), lambda i: A[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    s[C].split(C.op.axis[0], factor=4)
    a, c = buf("A", 10), buf("C", 10)
    io, ii = Var("io"), Var("ii")
    x = io * 4 + ii
    want = loop(io, 3, loop(ii, 4, N.IfThenElse(x < 10, store(c, load(a, x) + 1.0, x))))
    check(s, [A, C], [a, c], want, lambda x: x + 1)


def test_fused_axes_are_rebuilt_by_division_and_remainder():
    A = te.placeholder((4, 6), name="A")
    C = te.compute((4, 6), lambda i, j: A[i, j] + 1.0, name="C")
    s = te.create_schedule(C.op)
    s[C].fuse(*C.op.axis)
    a, c = buf("A", 4, 6), buf("C", 4, 6)
    f = Var("f")
    want = loop(f, 24, store(c, load(a, f // 6, f % 6) + 1.0, f // 6, f % 6))
    check(s, [A, C], [a, c], want, lambda x: x + 1)


def test_compute_at_a_tile_computes_one_tile_of_the_producer():
    A = te.placeholder((8, 8), name="A")
    B = te.compute((8, 8), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((8, 8), lambda i, j: B[i, j] + 1.0, name="C")
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(*C.op.axis, 4, 4)
    s[B].compute_at(s[C], jo)
    a, b, c = buf("A", 8, 8), buf("B", 4, 4), buf("C", 8, 8)
    io, jo, bi, bj, ii, ji = (Var(n) for n in ("io", "jo", "bi", "bj", "ii", "ji"))
    produce = loop(bi, 4, loop(bj, 4, store(b, load(a, io * 4 + bi, jo * 4 + bj) * 2.0, bi, bj)))
    consume = loop(ii, 4, loop(ji, 4, store(c, load(b, ii, ji) + 1.0, io * 4 + ii, jo * 4 + ji)))
    want = loop(io, 2, loop(jo, 2, N.Allocate(b, N.seq(produce, consume))))
    check(s, [A, C], [a, c], want, lambda x: x * 2 + 1)


def test_compute_at_a_stencil_widens_the_region_and_guards_the_tensor_edge():
    # C[i] = B[i] + B[i + 2] over 4 values of i per outer iteration reads 6 values of B; the
    # last outer iteration would read past B's 16 elements, so B's loop is guarded, and the
    # split of C's 14 elements by 4 is guarded too.
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((14,), lambda i: B[i] + B[i + 2], name="C")
    s = te.create_schedule(C.op)
    io, _ = s[C].split(C.op.axis[0], factor=4)
    s[B].compute_at(s[C], io)
    a, b, c = buf("A", 16), buf("B", 6), buf("C", 14)
    io, bi, ii = Var("io"), Var("bi"), Var("ii")
    produce = loop(bi, 6, N.IfThenElse(io * 4 + bi < 16, store(b, load(a, io * 4 + bi) * 2.0, bi)))
    consume = loop(ii, 4, N.IfThenElse(io * 4 + ii < 14,
                                       store(c, load(b, ii) + load(b, ii + 2), io * 4 + ii)))
    want = loop(io, 4, N.Allocate(b, N.seq(produce, consume)))
    check(s, [A, C], [a, c], want, lambda x: 2 * x[:14] + 2 * x[2:])


def test_compute_at_a_region_that_starts_before_the_tensor():
    # C[i] = B[i - 1] * B[i]: B's region at C's i is [i - 1, i]; at i = 0 its first element is
    # outside B, so B's loop computes only from index 0 on.
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((8,), lambda i: B[i - 1] * B[i], name="C")
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    a, b, c = buf("A", 8), buf("B", 2), buf("C", 8)
    ci, bi = Var("ci"), Var("bi")
    produce = loop(bi, 2, N.IfThenElse(E.LE(const(1), ci + bi), store(b, load(a, ci + bi - 1) * 2.0, bi)))
    want = loop(ci, 8, N.Allocate(b, N.seq(produce, store(c, load(b, 0) * load(b, 1), ci))))
    got = schedule_to_primfunc(s, [A, C])
    assert structural_equal(got, N.PrimFunc("main", (a, c), want), map_vars=True), got
    # (C[0] itself reads B[-1], outside B: the compute has no defined value there to check)


def test_a_split_reduction_axis_gets_init_update_and_a_guard():
    A = te.placeholder((6, 10), name="A")
    k = te.reduce_axis((0, 10), name="k")
    C = te.compute((6,), lambda i: te.sum(A[i, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    s[C].split(k, factor=4)
    a, c = buf("A", 6, 10), buf("C", 6)
    i, ko, ki = Var("i"), Var("ko"), Var("ki")
    kk = ko * 4 + ki
    update = N.IfThenElse(kk < 10, store(c, load(c, i) + load(a, i, kk), i))
    want = loop(i, 6, N.seq(store(c, const(0.0), i), loop(ko, 3, loop(ki, 4, update))))
    check(s, [A, C], [a, c], want, lambda x: x.sum(axis=1))


def test_attached_region_follows_a_split_consumer_leaf():
    # B attached inside the inner loop of C's split computes a single element per iteration
    A = te.placeholder((12,), name="A")
    B = te.compute((12,), lambda i: A[i] + 3.0, name="B")
    C = te.compute((12,), lambda i: B[i] * B[i], name="C")
    s = te.create_schedule(C.op)
    _, inner = s[C].split(C.op.axis[0], factor=4)
    s[B].compute_at(s[C], inner)
    a, b, c = buf("A", 12), buf("B", 1), buf("C", 12)
    io, ii, bi = Var("io"), Var("ii"), Var("bi")
    produce = loop(bi, 1, store(b, load(a, io * 4 + bi + ii) + 3.0, bi))
    want = loop(io, 3, loop(ii, 4, N.Allocate(b, N.seq(produce, store(c, load(b, 0) * load(b, 0), io * 4 + ii)))))
    got = schedule_to_primfunc(s, [A, C])
    assert structural_equal(got, N.PrimFunc("main", (a, c), want), map_vars=True), got
    check_schedule(s, [A, C], lambda x: (x + 3) ** 2)
