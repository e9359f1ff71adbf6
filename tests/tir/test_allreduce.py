"""Cross-thread reduction (tir/allreduce.py): a reduce axis bound to threadIdx.x lowers to a
per-thread partial in a register, then a shared-memory tree (a non-power-of-two extent folds its
tail first), then one thread writes the result; compared with a hand-written expected program."""
from __future__ import annotations

import pytest

from tensorforge import te
from tensorforge.arith import structural_equal
from tensorforge.ir import expr as E
from tensorforge.ir.expr import Var, const
from tensorforge.te.schedule import ScheduleError
from tensorforge.tir import nodes as N
from tensorforge.tir.build import schedule_to_primfunc


def _bound_row_sum(rows: int, cols: int):
    A = te.placeholder((rows, cols), name="A")
    k = te.reduce_axis((0, cols), name="k")
    B = te.compute((rows,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("blockIdx.x"))
    s[B].bind(k, te.thread_axis("threadIdx.x"))
    return s, A, B


def test_reduce_axis_bound_to_threads_becomes_a_shared_memory_tree():
    s, A, B = _bound_row_sum(3, 6)
    got = schedule_to_primfunc(s, [A, B])
    a_buf, b_buf = got.params
    red = N.Buffer("B.red", (6,), "float32", N.SHARED)
    acc = N.Buffer("B.acc", (1,), "float32", N.LOCAL)
    i, k = Var("i"), Var("k")

    def tloop(body_of):
        t = Var("k")
        return N.For(t, const(0), const(6), N.THREAD_BINDING, body_of(t), "threadIdx.x")

    def fold(t, cond, stride):
        return N.IfThenElse(cond, N.BufferStore(red, N.BufferLoad(red, (t,)) + N.BufferLoad(red, (t + stride,)), (t,)))

    zero = const(0)
    partial = N.For(k, const(0), const(6), N.THREAD_BINDING, N.Allocate(acc, N.seq(
        N.BufferStore(acc, E.convert(0.0), (zero,)),
        N.BufferStore(acc, N.BufferLoad(acc, (zero,)) + N.BufferLoad(a_buf, (i, k)), (zero,)),
        N.BufferStore(red, N.BufferLoad(acc, (zero,)), (k,)))), "threadIdx.x")
    want_body = N.For(i, const(0), const(3), N.THREAD_BINDING, N.Allocate(red, N.seq(
        partial,
        tloop(lambda t: fold(t, t < 2, 4)),      # 6 = 4 + 2: fold the two extra slots first
        tloop(lambda t: fold(t, t < 2, 2)),
        tloop(lambda t: fold(t, t < 1, 1)),
        tloop(lambda t: N.IfThenElse(t == 0, N.BufferStore(b_buf, N.BufferLoad(red, (zero,)), (i,)))))),
        "blockIdx.x")
    want = got.with_body(want_body)
    assert structural_equal(got, want, map_vars=True), f"got:\n{got}\nexpected:\n{want}"


def test_power_of_two_extent_has_no_fold_step():
    s, A, B = _bound_row_sum(2, 8)
    text = str(schedule_to_primfunc(s, [A, B]))
    assert text.count("thread_binding threadIdx.x") == 1 + 3 + 1   # partial, strides 4 2 1, store


def test_thread_bound_data_axis_beside_a_thread_reduction_is_an_error():
    A = te.placeholder((4, 8), name="A")
    k = te.reduce_axis((0, 8), name="k")
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("threadIdx.y"))
    s[B].bind(k, te.thread_axis("threadIdx.x"))
    with pytest.raises(ScheduleError, match="bind data axes to blockIdx"):
        schedule_to_primfunc(s, [A, B])
