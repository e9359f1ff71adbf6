"""x86 tensor intrinsics for bfloat16 products with float32 accumulation: AVX-512 BF16
(`vdpbf16ps`), declared with te.decl_tensor_intrin like the int8 ones (ops/x86_intrin.py).

`vdpbf16ps` adds, to each of 16 float32 lanes, the dot product of 2 bfloat16 pairs.  The block
intrinsic

  bf16_block(mr, nv, kb)   C[i, j] += sum_k f32(A[i, k]) * f32(B[j // 16, k // 2, j % 16, k % 2])
                           i < mr, j < nv * 16, k < kb (a multiple of 2)

reads the right operand packed by `pack_b_bf16`: column panels of 16 lanes, each a sequence of
(16 x 2) groups of 2 consecutive k per lane, the operand layout of the instruction and, one
group per row, of an AMX bf16 B tile.  So

  amx_bf16_block(nv, kb)   the same pattern with mr = 16 and kb a multiple of 32, on AMX
                           (`tdpbf16ps`: C in nv float32 tiles, a 16 x 32 A tile and a B tile per step)

shares the packed weights.  The (mr x nv) accumulators stay in registers (tiles) for all kb
steps; the C helpers are generated per shape, with a `target` attribute, and refused at build
time on a CPU without the unit.  AMX asks the kernel for the tile state first, as the int8
kernels do.
"""
from __future__ import annotations

import functools

import numpy as np

from ..ir.expr import Var, const
from ..te.intrin import TensorIntrin, decl_buffer, decl_tensor_intrin
from ..te.tensor import compute, placeholder, reduce_axis
from ..te.tensor import sum as te_sum
from ..tir import nodes as N
from .common import round_up
from .x86_intrin import _AMX_PERMISSION, amx_block_helper, host_features

LANES = 16
K_ALIGN = 32             # k is padded to this
REQUIRES = ("avx512f", "avx512bf16")
AMX_REQUIRES = ("amx-tile", "amx-bf16")


def has_bf16_unit(features: frozenset | None = None) -> bool:
    """Whether the CPU has AVX-512 BF16 (vdpbf16ps)."""
    return set(REQUIRES) <= (host_features() if features is None else features)


def has_amx_bf16(features: frozenset | None = None) -> bool:
    """Whether the CPU has AMX with bf16 tiles (tdpbf16ps)."""
    return set(AMX_REQUIRES) <= (host_features() if features is None else features)


def packed_shape(n: int, k: int) -> tuple:
    return (round_up(n, LANES) // LANES, round_up(k, K_ALIGN) // 2, LANES, 2)


def pack_b_bf16(b: np.ndarray) -> np.ndarray:
    """(K x N) float -> (N/16, Kp/2, 16, 2) bfloat16: lane l of group g holds b[2g:2g+2, panel*16 + l]."""
    from ..ir.dtype import to_numpy
    k, n = b.shape
    kp, np_ = round_up(k, K_ALIGN), round_up(n, LANES)
    padded = np.zeros((kp, np_), to_numpy("bfloat16"))
    padded[:k, :n] = b.astype(np.float32).astype(to_numpy("bfloat16"))
    return np.ascontiguousarray(padded.reshape(kp // 2, 2, np_ // LANES, LANES).transpose(2, 0, 3, 1))


def unpack_b_bf16(bp: np.ndarray) -> np.ndarray:
    """(N/16, Kp/2, 16, 2) -> (Kp, N/16 * 16), the inverse of pack_b_bf16 before the padding is cut."""
    panels, groups, lanes, _ = bp.shape
    return bp.transpose(1, 3, 0, 2).reshape(groups * 2, panels * lanes)


def block_pattern(mr: int, ncols: int, kb: int):
    a = placeholder((mr, kb), "bfloat16", name="a")
    b = placeholder((ncols // LANES, kb // 2, LANES, 2), "bfloat16", name="b")
    k = reduce_axis((0, kb), name="k")
    c = compute((mr, ncols), lambda i, j: te_sum(
        a[i, k].astype("float32") * b[j // LANES, k // 2, j % LANES, k % 2].astype("float32"), axis=k), name="c")
    return a, b, c


def _helper(name: str, mr: int, nv: int, kb: int) -> str:
    # inline assembly, as for vpdpbusd: the intrinsic makes GCC 12 copy the accumulators
    lines = ["#include <immintrin.h>",
             f'static inline __attribute__((target("avx512f,avx512bf16"))) int {name}(float* c, '
             "const uint16_t* a, const uint16_t* b, int64_t sc, int64_t sa, int64_t sb, int phase) {"]
    # phase 0: body (start at zero), 1: update (accumulate onto c), 2: reset (store zeros)
    for r in range(mr):
        for v in range(nv):
            lines.append(f"  __m512 c{r}_{v} = phase == 1 ? _mm512_loadu_ps(c + {r} * sc + {v * LANES}) "
                         ": _mm512_setzero_ps();")
    lines.append("  if (phase != 2) {")
    lines.append(f"    for (int64_t k = 0; k < {kb // 2}; ++k) {{")
    for v in range(nv):
        lines.append(f"      __m512i b{v} = _mm512_loadu_si512((const void*)(b + {v} * sb + k * {2 * LANES}));")
    for r in range(mr):
        lines.append(f"      int32_t a{r}; __builtin_memcpy(&a{r}, a + {r} * sa + 2 * k, 4);")
        lines.append(f"      __m512i x{r} = _mm512_set1_epi32(a{r});")
        for v in range(nv):
            lines.append(f'      __asm__("vdpbf16ps %2, %1, %0" : "+v"(c{r}_{v}) : "v"(x{r}), "v"(b{v}));')
    lines.append("    }")
    lines.append("  }")
    for r in range(mr):
        for v in range(nv):
            lines.append(f"  _mm512_storeu_ps(c + {r} * sc + {v * LANES}, c{r}_{v});")
    lines += ["  return 0;", "}"]
    return "\n".join(lines)


def _call(name: str, *args) -> N.Evaluate:
    return N.Evaluate(N.CallExtern("int32", name, tuple(args)))


@functools.lru_cache(maxsize=None)
def bf16_block(mr: int, nv: int, kb: int) -> TensorIntrin:
    """An (mr x nv*16) float32 block accumulated over kb (a multiple of 2) with `vdpbf16ps`."""
    if kb % 2 or not 1 <= nv <= 4 or not 1 <= mr <= 8:
        raise ValueError(f"bf16_block: kb must be even, nv 1 to 4 and mr 1 to 8, got kb={kb}, nv={nv}, mr={mr}")
    name = f"tf_bf16_block_{mr}x{nv}_k{kb}"
    return _block_intrin(mr, nv, kb, name, f"bf16_block_{mr}x{nv}_k{kb}",
                         ((name, _helper(name, mr, nv, kb)),), REQUIRES)


@functools.lru_cache(maxsize=None)
def amx_bf16_block(nv: int, kb: int) -> TensorIntrin:
    """A (16 x 16*nv) float32 block over kb (a multiple of 32) with AMX `tdpbf16ps`."""
    if kb % 32 or not 1 <= nv <= 4:
        raise ValueError(f"amx_bf16_block: kb must be a multiple of 32 and nv 1 to 4, got kb={kb}, nv={nv}")
    name = f"tf_amx_bf16_block_{nv}_k{kb}"
    return _block_intrin(16, nv, kb, name, f"amx_bf16_block_{nv}_k{kb}",
                         (("tf_amx_request", _AMX_PERMISSION), (name, amx_block_helper(name, nv, kb, "bf16"))),
                         AMX_REQUIRES)


def _block_intrin(mr: int, nv: int, kb: int, helper: str, intrin: str, helpers: tuple, requires) -> TensorIntrin:
    """The (mr x nv*16) float32 += bfloat16 block pattern, lowered to calls of C function
    `helper` (reset, update, body) over bfloat16 A rows and a B panel of column pairs."""
    a, b, c = block_pattern(mr, nv * LANES, kb)

    def lower(ins, outs):
        (ab, bb), (cb,) = ins, outs
        args = (cb.access_ptr(), ab.access_ptr(), bb.access_ptr(), cb.strides[0], ab.strides[0], bb.strides[0])
        return (_call(helper, *args, const(0)), _call(helper, *args, const(2)), _call(helper, *args, const(1)))

    binds = {a: decl_buffer(a.shape, "bfloat16", "a", strides=(Var("a_row"), 1)),
             b: decl_buffer(b.shape, "bfloat16", "b", strides=(Var("b_panel"), 2 * LANES, 2, 1)),
             c: decl_buffer(c.shape, "float32", "c", strides=(Var("c_row"), 1))}
    return decl_tensor_intrin(c.op, lower, binds, name=intrin, helpers=helpers, requires=requires)


def block_intrin(unit: str, mr: int, nv: int, kb: int) -> TensorIntrin:
    """The bf16 block intrinsic of `unit` ("avx512bf16" or "amx"; AMX ignores mr: 16 rows)."""
    return amx_bf16_block(nv, kb) if unit == "amx" else bf16_block(mr, nv, kb)
