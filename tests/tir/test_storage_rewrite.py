"""Before/expected tests for shared-memory reuse (tir/passes/storage_rewrite.py): shared
buffers with disjoint lifetimes in one kernel share one allocation of the larger size, buffers
alive together keep their own, and the barrier pass then separates the reuse."""
from __future__ import annotations

import dataclasses

from tensorforge.arith import structural_equal
from tensorforge.ir import expr as E
from tensorforge.ir.expr import Var, const
from tensorforge.tir import nodes as N
from tensorforge.tir.kernel import KERNEL_ATTR, KernelInfo
from tensorforge.tir.passes.insert_barriers import insert_barriers
from tensorforge.tir.passes.storage_rewrite import storage_rewrite

A = N.Buffer("A", (64,), "float32")
B = N.Buffer("B", (64,), "float32")
S1 = N.Buffer("S1", (4,), "float32", N.SHARED)
S2 = N.Buffer("S2", (8,), "float32", N.SHARED)
S3 = N.Buffer("S3", (4,), "float32", N.SHARED)
tx, j = Var("threadIdx.x"), Var("j")


def load(buf, idx):
    return N.BufferLoad(buf, (E.convert(idx),))


def store(buf, value, idx):
    return N.BufferStore(buf, E.convert(value), (E.convert(idx),))


def kernel(body):
    info = KernelInfo("f_kernel", (("threadIdx.x", tx, const(4)),))
    return N.PrimFunc("f", (A, B), N.AttrStmt(KERNEL_ATTR, info, body))


def phase_one(s1):
    return N.seq(store(s1, load(A, tx), tx), store(B, load(s1, 3 - tx), tx))


def phase_two(s2, s3):
    return N.For(j, const(0), const(2), N.SERIAL, N.seq(
        store(s2, load(A, tx + j), tx), store(s2, load(A, tx), tx + 4), store(s3, load(s2, 7 - tx), tx),
        store(B, load(B, tx) + load(s3, 3 - tx), tx)))


def test_disjoint_shared_buffers_share_one_allocation_of_the_larger_size():
    before = kernel(N.seq(N.Allocate(S1, phase_one(S1)), N.Allocate(S2, N.Allocate(S3, phase_two(S2, S3)))))
    got = storage_rewrite(before)
    slot = dataclasses.replace(S1, shape=(8,))
    want = kernel(N.Allocate(slot, N.Allocate(S3, N.seq(phase_one(slot), phase_two(slot, S3)))))
    assert structural_equal(got, want, map_vars=True), f"got:\n{got}\nexpected:\n{want}"


def test_buffers_alive_together_keep_their_own_memory():
    body = N.Allocate(S2, N.Allocate(S3, phase_two(S2, S3)))
    before = kernel(body)
    assert structural_equal(storage_rewrite(before), before)


def test_a_barrier_separates_the_last_read_of_one_buffer_from_the_first_write_of_the_next():
    two = kernel(N.seq(N.Allocate(S1, phase_one(S1)), N.Allocate(S2, N.Allocate(S3, phase_two(S2, S3)))))
    apart = str(insert_barriers(two)).count("barrier")
    shared = str(insert_barriers(storage_rewrite(two))).count("barrier")
    assert shared == apart + 1
