"""The project's best hand-written fp32 GEMM schedule (used by `tensorforge demo` and
`benchmarks/gemm.py`).

C = A @ B with B first packed into column panels `PB[j // nr, k, j % nr]` so the inner kernel
reads it contiguously.  Each (mr x nr) tile of C accumulates in a local buffer that the C
compiler keeps in SIMD registers: the mr rows are unrolled, the nr columns are one vector, and
the k loop runs outside them (register blocking: mr * nr / lanes accumulators).
"""
from __future__ import annotations

from .. import te


def gemm_schedule(m: int, n: int, k: int, mr: int | None = None, nr: int | None = None,
                  lanes: int | None = None, dtype: str = "float32"):
    """Returns (schedule, [A, B, C]) for C[m, n] = A[m, k] @ B[k, n].  The tile (mr x nr, vectors
    of `lanes`) not given is this machine's GEMM micro-kernel (ops/schedules/gemm_kernel.py): a
    fixed 8 x 32 tile of 16-lane vectors took twice AVX2's 16 registers and ran at 7% of its
    peak."""
    if mr is None or nr is None or lanes is None:
        from ..ops.schedules import gemm_kernel
        from ..target import Target
        kernel = gemm_kernel.for_target(Target.parse("c -mcpu=native"), dtype)
        mr, nr, lanes = mr or kernel.mr, nr or kernel.nr, lanes or kernel.lanes
    A = te.placeholder((m, k), dtype, name="A")
    B = te.placeholder((k, n), dtype, name="B")
    panels = (n + nr - 1) // nr
    PB = te.compute((panels, k, nr),
                    lambda p, r, c: te.if_then_else(p * nr + c < n, B[r, p * nr + c], te.const(0, dtype)),
                    name="B_packed")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * PB[j // nr, r, j % nr], axis=r), name="C")

    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, mr, nr)
    s[CC].compute_at(s[C], jo)
    ci, cj = s[CC].op.axis
    (ck,) = s[CC].op.reduce_axis
    cjo, cji = s[CC].split(cj, factor=lanes)
    s[CC].reorder(ck, ci, cjo, cji)
    s[CC].unroll(ci)
    s[CC].unroll(cjo)
    s[CC].vectorize(cji)
    jio, jii = s[C].split(ji, factor=lanes)
    s[C].vectorize(jii)
    s[C].parallel(io)
    p, _, c = s[PB].op.axis
    co, ci_ = s[PB].split(c, factor=lanes)
    s[PB].vectorize(ci_)
    s[PB].parallel(p)
    return s, [A, B, C]
