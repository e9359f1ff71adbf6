"""Before/expected tests for the GPU loop-IR passes: virtual threads, thread binding, barriers."""
from __future__ import annotations

import pytest

from tensorforge.arith import structural_equal
from tensorforge.ir import expr as E
from tensorforge.ir.expr import Var, const
from tensorforge.tir import nodes as N
from tensorforge.tir.kernel import KERNEL_ATTR, device_program
from tensorforge.tir.passes.inject_virtual_threads import inject_virtual_threads
from tensorforge.tir.passes.insert_barriers import insert_barriers
from tensorforge.tir.passes.lower_thread_binding import ThreadBindingError, lower_thread_binding

A = N.Buffer("A", (64,), "float32")
B = N.Buffer("B", (64,), "float32")


def loop(var, extent, body, kind=N.SERIAL, tag=""):
    return N.For(var, const(0), E.convert(extent), kind, body, tag)


def load(buf, idx):
    return N.BufferLoad(buf, (E.convert(idx),))


def store(buf, value, idx):
    return N.BufferStore(buf, E.convert(value), (E.convert(idx),))


def func(body, params=(A, B)):
    return N.PrimFunc("f", tuple(params), body)


def test_vthread_repeats_statements_and_gives_local_buffers_one_copy_each():
    v, i = Var("v"), Var("i")
    L = N.Buffer("L", (4,), "float32", N.LOCAL)
    body = loop(v, 2, N.Allocate(L, N.seq(
        loop(i, 4, store(L, load(A, v * 4 + i), i)),
        loop(i, 4, store(B, load(L, i), v * 4 + i)))), N.THREAD_BINDING, "vthread")
    got = inject_virtual_threads(func(body))
    alloc = got.body
    assert isinstance(alloc, N.Allocate) and structural_equal(alloc.buffer.shape[0], const(8))
    L2 = alloc.buffer
    want = N.Allocate(L2, N.seq(
        loop(i, 4, N.seq(store(L2, load(A, const(0) * 4 + i), const(0) * 4 + i),
                         store(L2, load(A, const(1) * 4 + i), const(1) * 4 + i))),
        loop(i, 4, N.seq(store(B, load(L2, const(0) * 4 + i), const(0) * 4 + i),
                         store(B, load(L2, const(1) * 4 + i), const(1) * 4 + i)))))
    assert structural_equal(got.body, want), f"got:\n{got}"


def test_vthread_keeps_statements_that_do_not_depend_on_it_once():
    v, i = Var("v"), Var("i")
    S = N.Buffer("S", (4,), "float32", N.SHARED)
    body = loop(v, 2, N.Allocate(S, N.seq(loop(i, 4, store(S, load(A, i), i)),
                                          store(B, load(S, v), v))), N.THREAD_BINDING, "vthread")
    got = inject_virtual_threads(func(body))
    want = N.Allocate(S, N.seq(loop(i, 4, store(S, load(A, i), i)),
                               store(B, load(S, const(0)), const(0)), store(B, load(S, const(1)), const(1))))
    assert structural_equal(got.body, want), f"got:\n{got}"


def test_thread_binding_makes_launch_dimensions_and_guards_shorter_loops():
    b, t, u = Var("b"), Var("t"), Var("u")
    body = loop(b, 4, N.seq(loop(t, 16, store(B, load(A, b * 16 + t), b * 16 + t), N.THREAD_BINDING, "threadIdx.x"),
                            loop(u, 8, store(B, const(0.0), b * 16 + u), N.THREAD_BINDING, "threadIdx.x")),
                N.THREAD_BINDING, "blockIdx.x")
    got = lower_thread_binding(func(body))
    program = device_program(got)
    assert len(program.kernels) == 1
    info, kbody = program.kernels[0]
    assert [(tag, int(ext.value)) for tag, _, ext in info.threads] == [("blockIdx.x", 4), ("threadIdx.x", 16)]
    bx, tx = info.var("blockIdx.x"), info.var("threadIdx.x")
    want = N.seq(store(B, load(A, bx * 16 + tx), bx * 16 + tx),
                 N.IfThenElse(tx < 8, store(B, const(0.0), bx * 16 + tx)))
    assert structural_equal(kbody, want), f"got:\n{got}"


def test_each_top_level_nest_is_a_kernel_and_global_buffers_are_workspaces():
    t, u = Var("t"), Var("u")
    W = N.Buffer("W", (64,), "float32")
    body = N.Allocate(W, N.seq(loop(t, 64, store(W, load(A, t), t), N.THREAD_BINDING, "threadIdx.x"),
                               loop(u, 64, store(B, load(W, 63 - u), u), N.THREAD_BINDING, "threadIdx.x")))
    program = device_program(lower_thread_binding(func(body)))
    assert program.workspaces == (W,)
    assert [info.name for info, _ in program.kernels] == ["f_kernel0", "f_kernel1"]


def test_unbound_nest_is_an_error_that_says_what_to_bind():
    i = Var("i")
    with pytest.raises(ThreadBindingError, match="not bound to GPU threads.*blockIdx.x"):
        lower_thread_binding(func(loop(i, 64, store(B, load(A, i), i))))


def test_nest_that_writes_only_a_scalar_is_a_one_thread_kernel():
    """A reduction to a 0-d tensor has no data axis to bind: its nest runs as one thread."""
    k = Var("k")
    S = N.Buffer("S", (1,), "float32")
    nest = N.seq(store(S, 0.0, 0), loop(k, 64, store(S, load(S, 0) + load(A, k), 0)))
    program = device_program(lower_thread_binding(func(nest, params=(A, S))))
    assert [info.name for info, _ in program.kernels] == ["f_kernel0", "f_kernel1"]   # init, then update
    for (info, body), expected in zip(program.kernels, nest.seq):
        assert info.grid == (1, 1, 1) and info.block == (1, 1, 1)
        assert structural_equal(body, expected)


def test_inner_loop_longer_than_enclosing_loop_on_same_tag_is_an_error():
    t, u = Var("t"), Var("u")
    body = loop(t, 4, loop(u, 8, store(B, load(A, u), u), N.THREAD_BINDING, "threadIdx.x"),
                N.THREAD_BINDING, "threadIdx.x")
    with pytest.raises(ThreadBindingError, match="more than the enclosing loop"):
        lower_thread_binding(func(body))


def _kernel(body):
    t = Var("t")
    return func(N.AttrStmt(KERNEL_ATTR, None, body)), t


def test_barrier_between_shared_write_and_read_and_at_loop_end():
    t, k = Var("t"), Var("k")
    S = N.Buffer("S", (64,), "float32", N.SHARED)
    fetch = store(S, load(A, k * 0 + t), t)
    use = store(B, load(S, 63 - t), t)
    body = N.Allocate(S, loop(k, 4, N.seq(fetch, use)))
    got = insert_barriers(func(N.AttrStmt(KERNEL_ATTR, None, body)))
    want = N.AttrStmt(KERNEL_ATTR, None, N.Allocate(S, loop(k, 4, N.seq(
        fetch, N.Barrier(N.SHARED), use, N.Barrier(N.SHARED)))))
    assert structural_equal(got.body, want), f"got:\n{got}"


def test_no_barrier_without_shared_memory_or_outside_kernels():
    t = Var("t")
    L = N.Buffer("L", (64,), "float32", N.LOCAL)
    body = N.Allocate(L, N.seq(store(L, load(A, t), t), store(B, load(L, t), t)))
    before = func(N.AttrStmt(KERNEL_ATTR, None, body))
    assert insert_barriers(before) is before
