"""An 8x8 float32 transpose as a tensor intrinsic (te.decl_tensor_intrin), for the layout
change NCHW -> NCHW[x]c (ops/schedules/cpu.py).

    transpose8x8()      C[i, j] = A[j, i]      i, j < 8, A's and C's rows at any stride

nchw_to_nchwc reads one position of B channel planes for each vector it writes: element by
element, B planes at once, which on planes of a multiple of 4 KiB all fall into one set of the
L1 cache.  Transposed in registers, an (8 positions x 8 channels) block is 8 contiguous loads
along the planes, 24 shuffles and 8 contiguous stores (64 channels of 224x224: 4.1 -> 1.65 ms
at one thread).  The helper uses AVX (256-bit vectors) only; it is applied where the target's
float32 vectors have 8 lanes or more.
"""
from __future__ import annotations

import functools

from ..ir.expr import Var
from ..te.intrin import TensorIntrin, decl_buffer, decl_tensor_intrin
from ..te.tensor import compute, placeholder
from ..tir import nodes as N

NAME = "tf_transpose8x8_f32"

_HELPER = """#include <immintrin.h>
static inline __attribute__((target("avx"))) int tf_transpose8x8_f32(float* c, const float* a, int64_t sc, int64_t sa) {
  __m256 r0 = _mm256_loadu_ps(a), r1 = _mm256_loadu_ps(a + sa);
  __m256 r2 = _mm256_loadu_ps(a + 2 * sa), r3 = _mm256_loadu_ps(a + 3 * sa);
  __m256 r4 = _mm256_loadu_ps(a + 4 * sa), r5 = _mm256_loadu_ps(a + 5 * sa);
  __m256 r6 = _mm256_loadu_ps(a + 6 * sa), r7 = _mm256_loadu_ps(a + 7 * sa);
  /* pairs of rows interleaved, then pairs of pairs, then the 128-bit halves swapped */
  __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  _mm256_storeu_ps(c, _mm256_permute2f128_ps(s0, s4, 0x20));
  _mm256_storeu_ps(c + sc, _mm256_permute2f128_ps(s1, s5, 0x20));
  _mm256_storeu_ps(c + 2 * sc, _mm256_permute2f128_ps(s2, s6, 0x20));
  _mm256_storeu_ps(c + 3 * sc, _mm256_permute2f128_ps(s3, s7, 0x20));
  _mm256_storeu_ps(c + 4 * sc, _mm256_permute2f128_ps(s0, s4, 0x31));
  _mm256_storeu_ps(c + 5 * sc, _mm256_permute2f128_ps(s1, s5, 0x31));
  _mm256_storeu_ps(c + 6 * sc, _mm256_permute2f128_ps(s2, s6, 0x31));
  _mm256_storeu_ps(c + 7 * sc, _mm256_permute2f128_ps(s3, s7, 0x31));
  return 0;
}"""


@functools.lru_cache(maxsize=1)
def transpose8x8() -> TensorIntrin:
    """C[i, j] = A[j, i] on an 8x8 float32 block; each operand's rows at a stride of its own,
    its elements contiguous."""
    a = placeholder((8, 8), "float32", name="a")
    c = compute((8, 8), lambda i, j: a[j, i], name="c")

    def lower(ins, outs):
        (ab,), (cb,) = ins, outs
        return N.Evaluate(N.CallExtern("int32", NAME, (cb.access_ptr(), ab.access_ptr(), cb.strides[0], ab.strides[0])))

    binds = {a: decl_buffer((8, 8), "float32", "a", strides=(Var("a_row"), 1)),
             c: decl_buffer((8, 8), "float32", "c", strides=(Var("c_row"), 1))}
    return decl_tensor_intrin(c.op, lower, binds, name="transpose8x8_f32", helpers=((NAME, _HELPER),))
