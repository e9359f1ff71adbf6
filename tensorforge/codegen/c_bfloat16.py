"""bfloat16 in C: 16-bit storage (`tf_bfloat16`, the top half of a float32's bits) and the two
conversions the printers need; everything else about bfloat16 is done in float32.

legalize.py leaves bfloat16 only in loads, stores, selects, broadcasts and casts from or to
float32 (arithmetic, comparisons and intrinsics run on float32; casts from or to other types
go through float32).  bfloat16 -> float32 is exact: the bits shifted up.  float32 -> bfloat16
rounds to nearest even (adding 0x7fff plus the lowest kept bit, then truncating) and keeps NaN
a quiet NaN, as NumPy's ml_dtypes does.  Vectors of L lanes use the same arithmetic on GCC
vector extensions (a cast between vector types of one size is a reinterpretation).
"""
from __future__ import annotations

from ..ir import dtype as dt

TYPE = "tf_bfloat16"

PRELUDE = """typedef uint16_t tf_bfloat16;
static inline float tf_bf16_to_f32(tf_bfloat16 h) {
  uint32_t u = (uint32_t)h << 16; float f; __builtin_memcpy(&f, &u, 4); return f;
}
static inline tf_bfloat16 tf_f32_to_bf16(float f) {
  uint32_t u; __builtin_memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (tf_bfloat16)((u >> 16) | 0x40u);
  return (tf_bfloat16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
"""


def used_in(text: str) -> bool:
    """Whether C text needs PRELUDE: it names the type or a scalar conversion (a fused
    float32 -> bfloat16 -> float32 round trip names no bfloat16 buffer)."""
    return TYPE in text or "tf_f32_to_bf16(" in text or "tf_bf16_to_f32(" in text


def is_bf16_cast(src: str, dst: str) -> bool:
    return "bfloat16" in (dt.element_of(src), dt.element_of(dst))


def scalar_cast(src: str, dst: str, text: str) -> str:
    """C text converting `text` (of dtype src) to dst; one of them bfloat16, the other float32."""
    if dt.element_of(dst) == "bfloat16":
        return f"tf_f32_to_bf16({text})"
    return f"tf_bf16_to_f32({text})"


def vector_cast(printer, src: str, dst: str, text: str) -> str:
    """The same for vectors, through a helper on the printer's vector typedefs."""
    lanes = dt.lanes(dst)
    h, f = printer.vec_type("bfloat16", lanes), printer.vec_type("float32", lanes)
    u, i = printer.vec_type("uint32", lanes), printer.vec_type("int32", lanes)
    if dt.element_of(dst) == "bfloat16":
        name = printer._vhelper(
            f"f32_to_bf16x{lanes}",
            f"static inline {h} NAME({f} f) {{\n"
            f"  {u} x = ({u})f;\n"
            f"  {u} nan = ({u})(({i})((x & 0x7fffffffu) > 0x7f800000u));\n"
            f"  {u} r = ((x + 0x7fffu + ((x >> 16) & 1u)) >> 16 & ~nan) | (((x >> 16) | 0x40u) & nan);\n"
            f"  return __builtin_convertvector(r, {h});\n}}")
    else:
        name = printer._vhelper(f"bf16_to_f32x{lanes}",
                                f"static inline {f} NAME({h} h) {{ return ({f})(__builtin_convertvector(h, {u}) << 16); }}")
    return f"{name}({text})"
