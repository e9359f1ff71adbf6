"""TE schedules for the GPU tests (shared by the OpenCL and CUDA files)."""
from __future__ import annotations

from tensorforge import te


def matmul_shared_vthread(n: int = 128, m: int = 96, K: int = 64, vthread: bool = True):
    """C = A @ B with the paper's GPU schedule: 32x32 tiles per block, 8x8 threads, a vthread
    axis, a local accumulator, and A and B fetched cooperatively into shared memory per k-step."""
    A = te.placeholder((n, K), name="A")
    B = te.placeholder((K, m), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "shared", [C])
    BB = s.cache_read(B, "shared", [C])
    CL = s.cache_write(C, "local")
    i, j = s[C].op.axis
    bi, ii = s[C].split(i, factor=32)
    bj, jj = s[C].split(j, factor=32)
    order = [bi, bj]
    if vthread:
        vi, ii = s[C].split(ii, nparts=2)
        order.append(vi)
    ti, ii = s[C].split(ii, nparts=8)
    tj, jj = s[C].split(jj, nparts=8)
    s[C].reorder(*order, ti, tj, ii, jj)
    s[C].bind(bi, te.thread_axis("blockIdx.y"))
    s[C].bind(bj, te.thread_axis("blockIdx.x"))
    if vthread:
        s[C].bind(vi, te.thread_axis("vthread"))
    s[C].bind(ti, te.thread_axis("threadIdx.y"))
    s[C].bind(tj, te.thread_axis("threadIdx.x"))
    s[CL].compute_at(s[C], tj)
    ko, ki = s[CL].split(s[CL].op.reduce_axis[0], factor=8)
    s[CL].reorder(ko, ki, *s[CL].op.axis)
    for T in (AA, BB):
        s[T].compute_at(s[CL], ko)
        fused = s[T].fuse(*s[T].op.axis)
        fo, fi = s[T].split(fused, nparts=8)
        fy, _ = s[T].split(fi, nparts=8)
        s[T].bind(fo, te.thread_axis("threadIdx.y"))
        s[T].bind(fy, te.thread_axis("threadIdx.x"))
    return s, [A, B, C]


def injective(shape, threads: int, fn):
    """B = fn(A) over a flattened 1-D launch: blocks of `threads` threads."""
    A = te.placeholder(shape, name="A")
    B = te.compute(shape, lambda *i: fn(A[i]), name="B")
    s = te.create_schedule(B.op)
    fused = s[B].fuse(*s[B].op.axis) if len(shape) > 1 else s[B].op.axis[0]
    bo, bi = s[B].split(fused, factor=threads)
    s[B].bind(bo, te.thread_axis("blockIdx.x"))
    s[B].bind(bi, te.thread_axis("threadIdx.x"))
    return s, [A, B]


def row_sum(rows: int, cols: int, threads: int):
    """B[r] = sum(A[r, :]): rows split over blocks and threads, the reduction serial per thread."""
    A = te.placeholder((rows, cols), name="A")
    k = te.reduce_axis((0, cols), name="k")
    B = te.compute((rows,), lambda r: te.sum(A[r, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    bo, bi = s[B].split(B.op.axis[0], factor=threads)
    s[B].bind(bo, te.thread_axis("blockIdx.x"))
    s[B].bind(bi, te.thread_axis("threadIdx.x"))
    return s, [A, B]
