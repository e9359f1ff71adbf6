"""x86 tensor intrinsics for int8 products: AVX-512 VNNI (`vpdpbusd`), AVX-VNNI and AMX
(`tdpbusd`), declared with te.decl_tensor_intrin, plus the host's CPU features.

Every intrinsic computes u8 x s8 -> s32 dot products of 4 (what `vpdpbusd` does per lane):

  vnni_dot(lanes)                 C[j] += sum_k A[k] * B[j, k]                 j < lanes, k < 4
  vnni_block(mr, nv, kb, lanes)   C[i, j] += sum_k A[i, k] * B[j // L, k // 4, j % L, k % 4]
                                  i < mr, j < nv * L, k < kb   (L = lanes)
  amx_block(nv, kb)               the block pattern with mr = 16, L = 16, kb a multiple of 64

The block pattern reads the right operand in the layout both units want: column panels of L
lanes, each a sequence of (L x 4) groups of 4 consecutive k per lane (`pack_b_vnni`).  One row
of an AMX B tile is one such group, so VNNI and AMX share the packed weights.  The block
intrinsics keep the (mr x nv) accumulators in registers (VNNI) or tiles (AMX) for all kb steps;
their C helpers are generated per shape.  Each helper carries a `target` attribute, so the
source compiles on any x86 compiler that knows the instructions; running one on a CPU without
them is refused at build time (`check_features`).

AMX needs the kernel's permission first: the helper asks once per process with
`arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)` before it configures the tiles.
"""
from __future__ import annotations

import functools
import platform

from ..ir.expr import const
from ..te.intrin import TensorIntrin, decl_buffer, decl_tensor_intrin
from ..te.tensor import compute, placeholder, reduce_axis
from ..te.tensor import sum as te_sum
from ..tir import nodes as N

# /proc/cpuinfo flag -> what the intrinsics call the unit
FEATURES = {"avx512_vnni": "avx512vnni", "avx_vnni": "avxvnni", "avx512_bf16": "avx512bf16",
            "amx_tile": "amx-tile", "amx_int8": "amx-int8", "amx_bf16": "amx-bf16", "avx512f": "avx512f"}


@functools.lru_cache(maxsize=1)
def host_features() -> frozenset:
    """The tensor units of this machine's CPU (names as in `FEATURES`' values), read from the
    flags the kernel reports; empty off Linux/x86."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return frozenset()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return frozenset(v for k, v in FEATURES.items() if k in flags)
    except OSError:
        pass
    return frozenset()


def check_features(requires, where: str, features: frozenset | None = None) -> None:
    """RuntimeError naming the missing units when `requires` are not all on this CPU."""
    have = host_features() if features is None else features
    missing = sorted(set(requires) - set(have))
    if missing:
        raise RuntimeError(f"{where} uses {', '.join(missing)}, which this CPU does not have "
                           f"(it has {', '.join(sorted(have)) or 'none of the tensor units'}); "
                           "choose another intrinsic or build for another machine")


def int8_unit(features: frozenset | None = None) -> str | None:
    """The best int8 dot-product unit of the CPU: "amx", "avx512vnni", "avxvnni" or None."""
    have = host_features() if features is None else features
    if {"amx-tile", "amx-int8"} <= have:
        return "amx"
    if {"avx512vnni", "avx512f"} <= have:
        return "avx512vnni"
    if "avxvnni" in have:
        return "avxvnni"
    return None


LANES = {"amx": 16, "avx512vnni": 16, "avxvnni": 8}
# vector registers the block helpers can use: zmm0-31 (EVEX), ymm0-15 (the VEX form of AVX-VNNI)
VECTOR_REGISTERS = {"avx512vnni": 32, "avxvnni": 16}
_TARGET_ATTR = {"avx512vnni": "avx512f,avx512vnni", "avxvnni": "avx2,avxvnni",
                "amx": "amx-tile,amx-int8"}
_REQUIRES = {"avx512vnni": ("avx512f", "avx512vnni"), "avxvnni": ("avxvnni",),
             "amx": ("amx-tile", "amx-int8")}
_VEC = {16: ("__m512i", "_mm512_loadu_si512", "_mm512_storeu_si512", "_mm512_set1_epi32",
             "_mm512_dpbusd_epi32", "_mm512_setzero_si512"),
        8: ("__m256i", "_mm256_loadu_si256", "_mm256_storeu_si256", "_mm256_set1_epi32",
            "_mm256_dpbusd_avx_epi32", "_mm256_setzero_si256")}


def _call(name: str, *args) -> N.Evaluate:
    return N.Evaluate(N.CallExtern("int32", name, tuple(args)))


# -- the 4-wide dot (one instruction) ---------------------------------------------------------
@functools.lru_cache(maxsize=None)
def vnni_dot(lanes: int = 16) -> TensorIntrin:
    """`vpdpbusd` on one vector: C[j] += sum_{k<4} A[k] * B[j, k] for j < lanes (16: AVX-512
    VNNI, 8: AVX-VNNI); B's (lanes x 4) bytes and C's lanes are contiguous."""
    unit = {16: "avx512vnni", 8: "avxvnni"}[lanes]
    a = placeholder((4,), "uint8", name="a")
    b = placeholder((lanes, 4), "int8", name="b")
    k = reduce_axis((0, 4), name="k")
    c = compute((lanes,), lambda j: te_sum(a[k].astype("int32") * b[j, k].astype("int32"), axis=k), name="c")
    vt, load, store, set1, dp, zero = _VEC[lanes]
    name = f"tf_vnni_dot{lanes}"
    attr = f'__attribute__((target("{_TARGET_ATTR[unit]}")))'
    helper = (f"#include <immintrin.h>\n"
              f"static inline {attr} int {name}(int32_t* c, const uint8_t* a, const int8_t* b, int reset) {{\n"
              f"  int32_t a4; __builtin_memcpy(&a4, a, 4);\n"
              f"  {vt} acc = reset ? {zero}() : {load}((const void*)c);\n"
              f"  {store}((void*)c, {dp}(acc, {set1}(a4), {load}((const void*)b)));\n"
              f"  return 0;\n}}")
    reset_name = f"tf_vnni_zero{lanes}"
    reset_helper = (f"#include <immintrin.h>\n"
                    f"static inline {attr} int {reset_name}(int32_t* c) {{ {store}((void*)c, {zero}()); return 0; }}")

    def lower(ins, outs):
        (ab, bb), (cb,) = ins, outs
        body = _call(name, cb.access_ptr(), ab.access_ptr(), bb.access_ptr(), const(1))
        update = _call(name, cb.access_ptr(), ab.access_ptr(), bb.access_ptr(), const(0))
        return body, _call(reset_name, cb.access_ptr()), update

    binds = {a: decl_buffer((4,), "uint8", "a", strides=(1,)),
             b: decl_buffer((lanes, 4), "int8", "b", strides=(4, 1)),
             c: decl_buffer((lanes,), "int32", "c", strides=(1,))}
    return decl_tensor_intrin(c.op, lower, binds, name=f"vnni_dot_{lanes}x4",
                              helpers=((name, helper), (reset_name, reset_helper)), requires=_REQUIRES[unit])


# -- the register-blocked micro-kernel ----------------------------------------------------------
def block_pattern(mr: int, ncols: int, kb: int, lanes: int):
    """The (mr x ncols) int8 block over kb steps of k, B packed as in `pack_b_vnni`."""
    a = placeholder((mr, kb), "uint8", name="a")
    b = placeholder((ncols // lanes, kb // 4, lanes, 4), "int8", name="b")
    k = reduce_axis((0, kb), name="k")
    c = compute((mr, ncols), lambda i, j: te_sum(
        a[i, k].astype("int32") * b[j // lanes, k // 4, j % lanes, k % 4].astype("int32"), axis=k), name="c")
    return a, b, c


def _vnni_block_helper(name: str, unit: str, mr: int, nv: int, kb: int, lanes: int) -> str:
    # the instruction as inline assembly: with the intrinsic, GCC 12 copies every accumulator
    # after each vpdpbusd and spills some, which halves the speed of the loop.
    # The helper is never inlined: inlined into a kernel whose epilogue keeps a dozen vectors
    # live across the tile loop (requantize's bias, correction and multiplier per vector, zero
    # point, clamp bounds), the 4x4 block has too few registers left for its nv B vectors and
    # GCC reloads B before every vpdpbusd (mr*nv loads per k step instead of nv): ResNet-18's
    # 3x3 convs ran at ~75% of the int8 peak instead of ~95%.  A call per tile costs a few
    # cycles against the kb/4 * mr * nv instructions of the block.
    vt, load, store, set1, dp, zero = _VEC[lanes]
    # (AVX-VNNI is the VEX form, which reaches registers 0-15 only: constraint "x", not "v")
    asm, reg = ("", "v") if lanes == 16 else ("%{vex%} ", "x")
    lines = ["#include <immintrin.h>",
             f'static __attribute__((noinline, target("{_TARGET_ATTR[unit]}"))) int {name}(int32_t* c, '
             "const uint8_t* a, const int8_t* b, int64_t sc, int64_t sa, int64_t sb, int phase) {"]
    # phase 0: body (start at zero), 1: update (accumulate onto c), 2: reset (store zeros)
    for r in range(mr):
        for v in range(nv):
            lines.append(f"  {vt} c{r}_{v} = phase == 1 ? {load}((const void*)(c + {r} * sc + {v * lanes})) : {zero}();")
    lines.append("  if (phase != 2) {")
    lines.append(f"    for (int64_t k = 0; k < {kb // 4}; ++k) {{")
    for v in range(nv):
        lines.append(f"      {vt} b{v} = {load}((const void*)(b + {v} * sb + k * {4 * lanes}));")
    for r in range(mr):
        lines.append(f"      int32_t a{r}; __builtin_memcpy(&a{r}, a + {r} * sa + 4 * k, 4);")
        lines.append(f"      {vt} x{r} = {set1}(a{r});")
        for v in range(nv):
            lines.append(f'      __asm__("{asm}vpdpbusd %2, %1, %0" : "+{reg}"(c{r}_{v}) : "{reg}"(x{r}), "{reg}"(b{v}));')
    lines.append("    }")
    lines.append("  }")
    for r in range(mr):
        for v in range(nv):
            lines.append(f"  {store}((void*)(c + {r} * sc + {v * lanes}), c{r}_{v});")
    lines += ["  return 0;", "}"]
    return "\n".join(lines)


@functools.lru_cache(maxsize=None)
def vnni_block(mr: int, nv: int, kb: int, lanes: int = 16) -> TensorIntrin:
    """An (mr x nv*lanes) int32 block accumulated over kb (a multiple of 4) with `vpdpbusd`,
    the accumulators in registers (body, reset and update)."""
    unit = {16: "avx512vnni", 8: "avxvnni"}[lanes]
    if kb % 4:
        raise ValueError(f"vnni_block: kb must be a multiple of 4, got {kb}")
    a, b, c = block_pattern(mr, nv * lanes, kb, lanes)
    name = f"tf_vnni{lanes}_block_{mr}x{nv}_k{kb}"
    helper = _vnni_block_helper(name, unit, mr, nv, kb, lanes)

    def lower(ins, outs):
        (ab, bb), (cb,) = ins, outs
        args = (cb.access_ptr(), ab.access_ptr(), bb.access_ptr(), cb.strides[0], ab.strides[0], bb.strides[0])
        return (_call(name, *args, const(0)), _call(name, *args, const(2)), _call(name, *args, const(1)))

    return decl_tensor_intrin(c.op, lower, _row_strided(a, b, c, lanes),
                              name=f"vnni{lanes}_block_{mr}x{nv}_k{kb}", helpers=((name, helper),),
                              requires=_REQUIRES[unit])


def _row_strided(a, b, c, lanes: int) -> dict:
    """The block helpers step through A's rows, B's panels and C's rows with one stride each;
    everything inside a row or a panel is contiguous (declared), the row strides are bound at
    the match."""
    from ..ir.expr import Var
    return {a: decl_buffer(a.shape, "uint8", "a", strides=(Var("a_row"), 1)),
            b: decl_buffer(b.shape, "int8", "b", strides=(Var("b_panel"), 4 * lanes, 4, 1)),
            c: decl_buffer(c.shape, "int32", "c", strides=(Var("c_row"), 1))}


# -- AMX ----------------------------------------------------------------------------------------
_AMX_PERMISSION = """#include <unistd.h>
#include <sys/syscall.h>
/* Linux hands out AMX tile data state only on request, once per process. */
static int tf_amx_request(void) {
  static int state = 0;   /* 0: not asked, 1: granted, -1: refused */
  if (state == 0) state = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0 ? 1 : -1;
  return state;
}"""


# What differs between the AMX block helpers, per element kind: the feature, the C types of
# C, A and B, the k covered by one 64-byte row of A, A's bytes per element, and the instruction.
AMX_KINDS = {
    "int8": ("amx-int8", "int32_t", "uint8_t", "int8_t", 64, 1, "_tile_dpbusd"),
    "bf16": ("amx-bf16", "float", "uint16_t", "uint16_t", 32, 2, "_tile_dpbf16ps"),
}


def amx_block_helper(name: str, nv: int, kb: int, kind: str = "int8") -> str:
    """C text of an AMX block helper: tiles 0..nv-1 hold C (16 rows x 64 bytes), tile 4 a
    16 x 64-byte tile of A, tile 5 one of B (packed 4-interleaved for int8, in pairs for bf16).
    `phase` 0 computes, 1 accumulates onto C, 2 only zeroes C."""
    feature, c_type, a_type, b_type, k_step, a_bytes, insn = AMX_KINDS[kind]
    rows = ", ".join(["16"] * 6)
    colsb = ", ".join(["64"] * 6)
    a_stride = "sa" if a_bytes == 1 else f"sa * {a_bytes}"
    lines = ["#include <immintrin.h>",
             "#include <stdio.h>",
             f'static __attribute__((target("amx-tile,{feature}"))) int {name}({c_type}* c, '
             f"const {a_type}* a, const {b_type}* b, int64_t sc, int64_t sa, int64_t sb, int phase) {{",
             "  if (tf_amx_request() != 1) { fprintf(stderr, \"tensorforge: the kernel refused AMX tile "
             "data (arch_prctl)\\n\"); abort(); }",
             "  struct { uint8_t palette, start; uint8_t reserved[14]; uint16_t colsb[16]; uint8_t rows[16]; }"
             " __attribute__((aligned(64))) cfg = {1, 0, {0}, {" + colsb + "}, {" + rows + "}};",
             "  _tile_loadconfig(&cfg);"]
    for v in range(nv):
        lines.append(f"  if (phase == 1) _tile_loadd({v}, c + {16 * v}, sc * 4); else _tile_zero({v});")
    lines.append("  if (phase != 2) {")
    lines.append(f"    for (int64_t k = 0; k < {kb}; k += {k_step}) {{")
    lines.append(f"      _tile_loadd(4, a + k, {a_stride});")
    for v in range(nv):
        lines.append(f"      _tile_loadd(5, b + {v} * sb + k * 16, 64);")
        lines.append(f"      {insn}({v}, 4, 5);")
    lines.append("    }")
    lines.append("  }")
    for v in range(nv):
        lines.append(f"  _tile_stored({v}, c + {16 * v}, sc * 4);")
    lines += ["  _tile_release();", "  return 0;", "}"]
    return "\n".join(lines)


@functools.lru_cache(maxsize=None)
def amx_block(nv: int, kb: int) -> TensorIntrin:
    """A (16 x 16*nv) int32 block over kb (a multiple of 64) with AMX `tdpbusd`: C in nv tiles,
    each step loads a 16 x 64 A tile and a 16 x 64 B tile (16 groups of 4 k for 16 columns)."""
    if kb % 64 or not 1 <= nv <= 4:
        raise ValueError(f"amx_block: kb must be a multiple of 64 and nv 1 to 4, got kb={kb}, nv={nv}")
    a, b, c = block_pattern(16, 16 * nv, kb, 16)
    name = f"tf_amx_block_{nv}_k{kb}"
    helpers = (("tf_amx_request", _AMX_PERMISSION), (name, amx_block_helper(name, nv, kb)))

    def lower(ins, outs):
        (ab, bb), (cb,) = ins, outs
        args = (cb.access_ptr(), ab.access_ptr(), bb.access_ptr(), cb.strides[0], ab.strides[0], bb.strides[0])
        return (_call(name, *args, const(0)), _call(name, *args, const(2)), _call(name, *args, const(1)))

    return decl_tensor_intrin(c.op, lower, _row_strided(a, b, c, 16), name=f"amx_block_{nv}_k{kb}",
                              helpers=helpers, requires=_REQUIRES["amx"])


def block_intrin(unit: str, mr: int, nv: int, kb: int) -> TensorIntrin:
    """The block intrinsic of `unit` ("avx512vnni", "avxvnni", "amx"; AMX ignores mr: 16 rows)."""
    if unit == "amx":
        return amx_block(nv, kb)
    return vnni_block(mr, nv, kb, LANES[unit])
