"""Vector expressions as GCC/Clang vector extensions (`__attribute__((vector_size(N)))`).

The vectorize pass leaves `float32x16`-typed expressions, `Ramp`/`Broadcast` nodes and vector
loads and stores.  This mixin prints them for C:

* One typedef per vector type used (`tf_float32x16`), plus an unaligned, may-alias variant
  (`tf_float32x16_u`) for contiguous loads and stores through a scalar pointer.
* Lane counts that are not a power of two (GCC requires one) are padded to the next power of
  two.  Padding lanes hold a copy of a real lane, so lane-wise work on them (an integer
  division) cannot fault; loads and stores only ever touch the real lanes.
* Booleans are masks, as vector comparisons produce them: a signed integer vector with -1 for
  true and 0 for false.  Its element width follows what produced it (float32 comparisons give
  32-bit masks); `vmask` returns the text and that width, and conversions happen only where a
  consumer needs another width.  Masks stored in variables are always 8-bit.
* C has no vector ternary: a select with a vector condition is the blend `(t & m) | (f & ~m)`,
  which evaluates both sides.  Min, max, floor division, strided and indexed (gather/scatter)
  accesses and intrinsics go through small `static inline` helpers the compiler inlines.
"""
from __future__ import annotations

from ..ir import dtype as dt
from ..ir import expr as E
from ..tir import nodes as N
from ..tir.lane_offsets import Runs, shuffled_runs, strided_runs
from . import c_bfloat16
from .analysis import const_int, is_multiple_of, is_nonneg, plain_division_ok
from .c_like import CodegenError
from .c_text import LOR, UNARY

_VEC_BINARY = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.Div: "/"}
_VEC_CMP = {E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">=", E.EQ: "==", E.NE: "!="}


def physical_lanes(lanes: int) -> int:
    """The power-of-two lane count a vector of `lanes` is stored in."""
    p = 1
    while p < lanes:
        p *= 2
    return p



def _byte_lookup(buf: N.Buffer, index: E.Expr, elem: str, lanes: int) -> bool:
    """A load of 16 bytes from a table of at least 256 entries at indices widened from 16 bytes
    (so each index is below 256): the case `_lookup256` serves."""
    if dt.itemsize(elem) != 1 or lanes != 16 or not isinstance(index, E.Cast):
        return False
    if dt.element_of(index.value.dtype) != "uint8" or dt.lanes(index.value.dtype) != 16:
        return False
    size = 1
    for d in buf.shape:
        if not isinstance(d, E.IntImm):
            return False
        size *= int(d.value)
    return size >= 256

# (element, lanes) -> (the x86 feature macro, the intrinsic vector type, the intrinsic's width
# infix) of the one-instruction float min/max (VectorExtensions._vminmax)
_X86_MINMAX = {
    ("float32", 16): ("__AVX512F__", "__m512", "512"), ("float32", 8): ("__AVX__", "__m256", "256"),
    ("float32", 4): ("__SSE__", "__m128", ""),
    ("float64", 8): ("__AVX512F__", "__m512d", "512"), ("float64", 4): ("__AVX__", "__m256d", "256"),
    ("float64", 2): ("__SSE2__", "__m128d", ""),
}


class VectorExtensions:
    """Mixin for `CLikePrinter` subclasses that print vectors with GCC vector extensions."""

    typedefs: dict

    # Types -------------------------------------------------------------------------------------
    def vec_type(self, elem: str, lanes: int, unaligned: bool = False) -> str:
        """Typedef name for `lanes` x scalar dtype `elem` (declared on first use)."""
        name = f"tf_{elem}x{lanes}"
        size = dt.itemsize(elem) * physical_lanes(lanes)
        if name not in self.typedefs:
            self.typedefs[name] = (f"typedef {self.scalar_type(elem)} {name} "
                                   f"__attribute__((vector_size({size})));")
        if not unaligned:
            return name
        uname = name + "_u"
        if uname not in self.typedefs:
            self.typedefs[uname] = (f"typedef {self.scalar_type(elem)} {uname} __attribute__(("
                                    f"vector_size({size}), aligned({dt.itemsize(elem)}), may_alias));")
        return uname

    def mask_type(self, width: int, lanes: int) -> str:
        return self.vec_type(f"int{8 * width}", lanes)

    def vector_type_of(self, e, dtype: str) -> str:
        if dt.is_bool(dtype):
            return self.mask_type(1, dt.lanes(dtype))   # stored masks are 8-bit
        return self.vec_type(dt.element_of(dtype), dt.lanes(dtype))

    def _vhelper(self, key: str, definition: str) -> str:
        name = "tf_" + key
        self.helpers.setdefault(name, definition.replace("NAME", name))
        return name

    def _lanewise(self, key: str, ret: str, params: list[str], lane_stmt: str, lanes: int) -> str:
        """A helper `ret NAME(params)` that runs `lane_stmt` (using `l`) for every lane."""
        return self._vhelper(key, f"static inline {ret} NAME({', '.join(params)}) {{\n"
                                  f"  {ret} r;\n  for (int l = 0; l < {physical_lanes(lanes)}; ++l) "
                                  f"{lane_stmt}\n  return r;\n}}")

    # Entry points from the scalar printer ------------------------------------------------------
    def vector_expr(self, e: E.Expr) -> str:
        if dt.is_bool(e.dtype):
            return self.vmask_as(e, 1)
        return self.vvalue(e)

    def vmask_as(self, e: E.Expr, width: int) -> str:
        text, have = self.vmask(e)
        if have == width:
            return text
        return f"__builtin_convertvector({text}, {self.mask_type(width, dt.lanes(e.dtype))})"

    # Non-boolean vectors -----------------------------------------------------------------------
    def vvalue(self, e: E.Expr) -> str:
        lanes, elem = dt.lanes(e.dtype), dt.element_of(e.dtype)
        T = self.vec_type(elem, lanes)
        if isinstance(e, E.Var):
            return self.print_Var(e)[0]
        if isinstance(e, N.BufferLoad):
            return self.vload(e)
        if isinstance(e, E.Broadcast):
            name = self._vhelper(f"bcast_{elem}x{lanes}", f"static inline {T} NAME({self.scalar_type(elem)} v) "
                                 f"{{ return ({T}){{{', '.join(['v'] * physical_lanes(lanes))}}}; }}")
            return f"{name}({self.expr(e.value)})"
        if isinstance(e, E.Ramp):
            s = self.scalar_type(elem)
            name = self._lanewise(f"ramp_{elem}x{lanes}", T, [f"{s} base", f"{s} stride"],
                                  f"r[l] = ({s})(base + l * stride);", lanes)
            return f"{name}({self.expr(e.base)}, {self.expr(e.stride)})"
        if type(e) in _VEC_BINARY:
            return f"({self.vvalue(e.a)} {_VEC_BINARY[type(e)]} {self.vvalue(e.b)})"
        if isinstance(e, (E.FloorDiv, E.FloorMod)):
            return self._vfloor(e, T, elem, lanes)
        if isinstance(e, (E.Min, E.Max)):
            return self._vminmax(e, T, elem, lanes)
        if isinstance(e, E.Select):
            if dt.lanes(e.condition.dtype) == 1:
                # the arms cast to one type (an unaligned load has its own); only one arm runs
                return (f"({self.expr(e.condition, LOR)} ? ({T})({self.vvalue(e.true_value)}) : "
                        f"({T})({self.vvalue(e.false_value)}))")
            m = self.vmask_as(e.condition, dt.itemsize(elem))
            return f"{self._blend(elem, lanes)}({m}, {self.vvalue(e.true_value)}, {self.vvalue(e.false_value)})"
        if isinstance(e, E.Cast):
            if dt.is_bool(e.value.dtype):   # mask -1/0 -> 1/0 -> target type
                return f"__builtin_convertvector(-{self.vmask(e.value)[0]}, {T})"
            if e.value.dtype == e.dtype:
                return self.vvalue(e.value)
            if c_bfloat16.is_bf16_cast(e.value.dtype, e.dtype):
                return c_bfloat16.vector_cast(self, e.value.dtype, e.dtype, self.vvalue(e.value))
            src = dt.element_of(e.value.dtype)
            if src in ("uint8", "int8") and dt.itemsize(elem) >= 4:
                return self._widen_bytes(self.vvalue(e.value), src, elem, lanes, T)
            return f"__builtin_convertvector({self.vvalue(e.value)}, {T})"
        if isinstance(e, E.Call):
            return self._vcall(e, T, elem, lanes)
        if isinstance(e, E.Let):
            return self._vlet(e, lambda: self.vvalue(e.body))
        raise CodegenError(f"{self.func_name}: cannot print vector {type(e).__name__} ({e})")

    def _vminmax(self, e: E.BinaryOp, T: str, elem: str, lanes: int) -> str:
        """min(a, b) as `a < b ? a : b` lane by lane, max as `a > b ? a : b`: a compare and a
        blend, which for floats GCC prints as three dependent instructions.  On x86 a float
        vector of 4 to 16 lanes is one vminps/vmaxps (pd for doubles) instead: it returns its
        second operand where the compare is false (equal values, a NaN in either, +0 and -0), so
        the values are the same bit for bit.  A max or min reduction's chain of them runs 2-3x
        faster."""
        kind, op = ("min", "<") if isinstance(e, E.Min) else ("max", ">")
        blend = self._blend(elem, lanes)
        M = self.mask_type(dt.itemsize(elem), lanes)
        generic = f"{blend}(({M})(a {op} b), a, b)"
        x86 = _X86_MINMAX.get((elem, lanes)) if physical_lanes(lanes) == lanes else None
        if x86 is None:
            body = f"{{ return {generic}; }}"
        else:
            feature, vtype, suffix = x86
            body = (f"{{\n#if defined({feature})\n"
                    f"  return ({T})_mm{suffix}_{kind}_{'ps' if elem == 'float32' else 'pd'}(({vtype})a, ({vtype})b);\n"
                    f"#else\n  return {generic};\n#endif\n}}")
        include = "#if defined(__x86_64__) || defined(__i386__)\n#include <immintrin.h>\n#endif\n"
        name = self._vhelper(f"{kind}_{elem}x{lanes}", (include if x86 else "") +
                             f"static inline {T} NAME({T} a, {T} b) {body}")
        return f"{name}({self.vvalue(e.a)}, {self.vvalue(e.b)})"

    def _vlet(self, e: E.Let, body_fn):
        value = self.expr(e.value)
        with self.bind(e.var, is_nonneg(e.value, self.nonneg)) as name:
            body = body_fn()
        return self.let_text(e, name, value, body)

    def _blend(self, elem: str, lanes: int) -> str:
        """Helper `NAME(mask, t, f)`: lanes of t where mask is set, else of f."""
        T = self.vec_type(elem, lanes)
        M = self.mask_type(dt.itemsize(elem), lanes)
        return self._vhelper(f"select_{elem}x{lanes}", f"static inline {T} NAME({M} m, {T} t, {T} f) "
                             f"{{ return ({T})((({M})t & m) | (({M})f & ~m)); }}")

    def _vfloor(self, e: E.BinaryOp, T: str, elem: str, lanes: int) -> str:
        kind = "floordiv" if isinstance(e, E.FloorDiv) else "floormod"
        a, b = self.vvalue(e.a), self.vvalue(e.b)
        if dt.is_float(elem):
            f = self.float_floor_helper(kind, elem)(f"tf_{kind}_{elem}")
            self.helpers.setdefault(f"tf_{kind}_{elem}", f)
            name = self._lanewise(f"{kind}_{elem}x{lanes}", T, [f"{T} a", f"{T} b"],
                                  f"r[l] = tf_{kind}_{elem}(a[l], b[l]);", lanes)
            return f"{name}({a}, {b})"
        if plain_division_ok(e.a, e.b, self.nonneg):
            return f"({a} {'/' if kind == 'floordiv' else '%'} {b})"
        # Lanes where b == 0 divide by 1 and give 0 (as NumPy); otherwise C's truncating
        # q, r are corrected by one step where r != 0 and r, b have opposite signs.
        lines = [f"const {T} zero = {{0}};",
                 f"{T} z = ({T})(b == zero);   /* all ones where b == 0 */",
                 f"{T} bs = b - z;             /* ... which divide by 1 instead */"]
        if dt.is_uint(elem):
            lines.append(f"return (a {'/' if kind == 'floordiv' else '%'} bs) & ~z;")
        else:
            lines += [f"{T} r = a % bs;",
                      f"{T} fix = ({T})((r != zero) & ((r < zero) != (bs < zero)));   /* -1 or 0 */",
                      f"return ({'a / bs + fix' if kind == 'floordiv' else 'r + (bs & fix)'}) & ~z;"]
        body = "".join(f"  {line}\n" for line in lines)
        name = self._vhelper(f"{kind}_{elem}x{lanes}", f"static inline {T} NAME({T} a, {T} b) {{\n{body}}}")
        return f"{name}({a}, {b})"

    def _widen_bytes(self, text: str, src: str, elem: str, lanes: int, T: str) -> str:
        """A vector of 8-bit integers cast to 32-bit (or wider) lanes.  GCC builds a direct byte ->
        32-bit __builtin_convertvector one lane at a time; through 16 bits it is vector zero/sign
        extensions, and 16 lanes with AVX-512 are one vpmovzxbd/vpmovsxbd."""
        wide = "uint16" if src == "uint8" else "int16"
        generic = f"__builtin_convertvector(__builtin_convertvector(v, {self.vec_type(wide, lanes)}), {T})"
        if lanes != 16:
            return generic.replace("(v,", f"({text},", 1)
        ext = "zx" if src == "uint8" else "sx"
        I = self.vec_type("int32", 16)
        body = (f"#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)\n"
                f"  typedef char tf_v16qi __attribute__((vector_size(16)));\n"
                f"  {I} w = ({I})__builtin_ia32_pmov{ext}bd512_mask((tf_v16qi)v, ({I}){{0}}, (unsigned short)0xFFFF);\n"
                f"  return {'w' if elem == 'int32' else f'__builtin_convertvector(w, {T})'};\n"
                f"#else\n  return {generic};\n#endif\n")
        name = self._vhelper(f"widen_{src}x16_{elem}",
                             f"static inline {T} NAME({self.vec_type(src, 16)} v) {{\n{body}}}")
        return f"{name}({text})"

    def _vcall(self, e: E.Call, T: str, elem: str, lanes: int) -> str:
        arg_elem = dt.element_of(e.args[0].dtype)
        if e.op in ("exp", "sigmoid") and arg_elem == "float32" and lanes == 16:
            x = self.vvalue(e.args[0])
            exp = self._vexp16()
            return f"{exp}({x})" if e.op == "exp" else f"(1.0f / (1.0f + {exp}(-({x}))))"
        if e.op in ("tanh", "erf") and arg_elem == "float32" and lanes == 16:
            return f"{self._vodd16(e.op)}({self.vvalue(e.args[0])})"
        AT = self.vec_type(arg_elem, lanes)
        lane_args = [f"x{k}[l]" for k in range(len(e.args))]
        if dt.is_float(arg_elem):
            text = self.math_call(e.op, lane_args, arg_elem)
        else:
            text = f"({self.scalar_type(elem)})" + self.math_call(
                e.op, [f"(double){a}" for a in lane_args], "float64")
        params = [f"{AT} x{k}" for k in range(len(e.args))]
        name = self._lanewise(f"{e.op}_{e.args[0].dtype}", T, params, f"r[l] = {text};", lanes)
        return f"{name}({', '.join(self.vvalue(a) for a in e.args)})"

    def _vexp16(self) -> str:
        """Helper NAME(v): exp of 16 float32 lanes.  With AVX-512 the inline exp's reduction and
        polynomial (codegen/c.py `exp_reduction`, on a GCC vector), the input clamped to
        [EXP_MIN, EXP_MAX] (NaN kept: it is the second operand of vminps and vmaxps) and the
        scaling by 2^n one vscalefps, which also gives inf above and 0 below: bit for bit the
        scalar helper's values, in half the instructions.  Without AVX-512 the scalar helper lane
        by lane."""
        from .c import EXP_MAX, EXP_MIN, exp_helper, exp_reduction
        T = self.vec_type("float32", 16)
        scalar = self.call_helper("expf", exp_helper, ["v[l]"])[0]
        return self._avx512_or_lanes("expf_x16", T, "defined(__AVX512F__)", [
            f"  __m512 c = _mm512_min_ps(_mm512_set1_ps({EXP_MAX!r}f), (__m512)v);",
            f"  {T} x = ({T})_mm512_max_ps(_mm512_set1_ps({EXP_MIN!r}f), c);",
            *exp_reduction(T),
            f"  return ({T})_mm512_scalef_ps((__m512)p, (__m512)n);"], scalar)

    def _avx512_or_lanes(self, key: str, T: str, feature: str, lines: list[str], scalar: str) -> str:
        """Helper NAME(v) on 16 float32 lanes: `lines` where the `feature` condition holds,
        else `scalar` (a call of the scalar helper on v[l]) lane by lane."""
        return self._vhelper(key, "\n".join([
            "#include <immintrin.h>", f"static inline {T} NAME({T} v) {{", f"#if {feature}", *lines, "#else",
            f"  {T} r;", f"  for (int l = 0; l < 16; ++l) r[l] = {scalar};", "  return r;", "#endif", "}"]))

    def _vodd16(self, op: str) -> str:
        """Helper NAME(v): tanh or erf of 16 float32 lanes.  With AVX-512 the inline odd
        rational's steps (codegen/c.py `odd_rational_body`) on a GCC vector, its clamp and bounds
        each one vminps (`a < k ? a : k` is vminps(a, k): the second operand where the compare
        is false, NaN included) and the sign copied back by masks: bit for bit the scalar
        helper's values.  Without AVX-512 the scalar helper lane by lane."""
        from .c import ODD_RATIONALS, odd_rational_body
        p, q, one = ODD_RATIONALS[op]
        T = self.vec_type("float32", 16)
        scalar = self.math_call(op, ["v[l]"], "float32")       # the inline scalar helper's call
        return self._avx512_or_lanes(f"{op}f_x16", T, "defined(__AVX512F__) && defined(__AVX512DQ__)", [
            "  __m512 sign = _mm512_set1_ps(-0.0f);",
            "  __m512 a = _mm512_andnot_ps(sign, (__m512)v);",
            f"  {T} c = ({T})_mm512_min_ps(a, _mm512_set1_ps({one!r}f));",
            *odd_rational_body(p, q, T),
            f"  __mmask16 inside = _mm512_cmp_ps_mask(a, _mm512_set1_ps({one!r}f), _CMP_LT_OQ);",
            "  __m512 m = _mm512_mask_blend_ps(inside, _mm512_min_ps(_mm512_set1_ps(1.0f), a), "
            "_mm512_min_ps((__m512)r, _mm512_set1_ps(1.0f)));",
            f"  return ({T})_mm512_or_ps(m, _mm512_and_ps(sign, (__m512)v));"], scalar)

    # Boolean vectors (masks) -------------------------------------------------------------------
    def vmask(self, e: E.Expr) -> tuple[str, int]:
        """(text of a -1/0 integer mask, its element width in bytes) for a boolxN expression."""
        lanes = dt.lanes(e.dtype)
        if isinstance(e, E.Var):
            return self.print_Var(e)[0], 1
        if type(e) in _VEC_CMP:
            if dt.is_bool(e.a.dtype):
                a, w = self.vmask(e.a)
                b = self.vmask_as(e.b, w)
            else:
                a, b, w = self.vvalue(e.a), self.vvalue(e.b), dt.itemsize(dt.element_of(e.a.dtype))
            return f"(({self.mask_type(w, lanes)})({a} {_VEC_CMP[type(e)]} {b}))", w
        if isinstance(e, (E.And, E.Or)):
            a, w = self.vmask(e.a)
            return f"({a} {'&' if isinstance(e, E.And) else '|'} {self.vmask_as(e.b, w)})", w
        if isinstance(e, E.Not):
            a, w = self.vmask(e.a)
            return f"(~{a})", w
        if isinstance(e, E.Broadcast):
            M = self.mask_type(1, lanes)
            name = self._vhelper(f"bcast_int8x{lanes}", f"static inline {M} NAME(int8_t v) "
                                 f"{{ return ({M}){{{', '.join(['v'] * physical_lanes(lanes))}}}; }}")
            return f"{name}((int8_t)-{self.expr(e.value, UNARY)})", 1
        if isinstance(e, E.Cast):   # number -> bool: lanes that are nonzero
            elem = dt.element_of(e.value.dtype)
            T, w = self.vec_type(elem, lanes), dt.itemsize(elem)
            return f"(({self.mask_type(w, lanes)})({self.vvalue(e.value)} != ({T}){{0}}))", w
        if isinstance(e, E.Select):
            t, w = self.vmask(e.true_value)
            f = self.vmask_as(e.false_value, w)
            if dt.lanes(e.condition.dtype) == 1:
                return f"({self.expr(e.condition, LOR)} ? {t} : {f})", w
            blend = self._blend(f"int{8 * w}", lanes)
            return f"{blend}({self.vmask_as(e.condition, w)}, {t}, {f})", w
        if isinstance(e, E.Call):   # isnan / isinf
            elem = dt.element_of(e.args[0].dtype)
            w = dt.itemsize(elem)
            M, AT = self.mask_type(w, lanes), self.vec_type(elem, lanes)
            test = self.math_call(e.op, ["x[l]"], elem if dt.is_float(elem) else "float64")
            name = self._lanewise(f"{e.op}_{elem}x{lanes}", M, [f"{AT} x"],
                                  f"r[l] = {test} ? -1 : 0;", lanes)
            return f"{name}({self.vvalue(e.args[0])})", w
        if isinstance(e, N.BufferLoad):
            return self.vload(e), 1
        if isinstance(e, E.Let):
            return self._vlet(e, lambda: self.vmask_as(e.body, 1)), 1
        raise CodegenError(f"{self.func_name}: cannot print boolean vector {type(e).__name__} ({e})")

    # Loads and stores --------------------------------------------------------------------------
    def vload(self, e: N.BufferLoad) -> str:
        buf = e.buffer
        index = self.single_index(buf, e.indices, "load")
        lanes, elem = dt.lanes(index.dtype), dt.element_of(buf.dtype)
        ptr, is_bool = self.buffer_ref(buf), dt.is_bool(elem)
        s = self.scalar_type(elem)
        T = self.mask_type(1, lanes) if is_bool else self.vec_type(elem, lanes)
        lane = "{} ? -1 : 0" if is_bool else "{}"
        pad = f"\n  for (int l = {lanes}; l < {physical_lanes(lanes)}; ++l) r[l] = r[0];" \
            if physical_lanes(lanes) != lanes else ""
        if isinstance(index, E.Ramp) and const_int(index.stride) == 1:
            addr = self._address(ptr, index.base)
            if not is_bool and physical_lanes(lanes) == lanes:
                aligned = self.vector_aligned(buf, index.base, elem, lanes)
                V = self.vec_type(elem, lanes, unaligned=not aligned)
                return f"(*(const {V}*)({addr}))"
            name = self._vhelper(f"load_{elem}x{lanes}", f"static inline {T} NAME(const {s}* p) {{\n"
                                 f"  {T} r;\n  for (int l = 0; l < {lanes}; ++l) r[l] = "
                                 f"{lane.format('p[l]')};{pad}\n  return r;\n}}")
            return f"{name}({addr})"
        if isinstance(index, E.Ramp):
            found = strided_runs(index) if not is_bool and physical_lanes(lanes) == lanes else None
            if found is not None:
                return self._run_load(ptr, found[0], found[1], elem, lanes)
            name = self._vhelper(f"gather_strided_{elem}x{lanes}",
                                 f"static inline {T} NAME(const {s}* p, int64_t base, int64_t stride) {{\n"
                                 f"  {T} r;\n  for (int l = 0; l < {lanes}; ++l) r[l] = "
                                 f"{lane.format('p[base + l * stride]')};{pad}\n  return r;\n}}")
            return f"{name}({ptr}, {self.index_expr(index.base)}, {self.index_expr(index.stride)})"
        if not is_bool and physical_lanes(lanes) == lanes:
            found = shuffled_runs(index)
            if found is not None:
                return self._run_load(ptr, found[0], found[1], elem, lanes)
        if not is_bool and _byte_lookup(buf, index, elem, lanes):
            return self._lookup256(ptr, index.value, elem, T, s)
        I = self.vec_type(dt.element_of(index.dtype), lanes)
        name = self._vhelper(f"gather_{elem}x{lanes}_by_{index.dtype}",
                             f"static inline {T} NAME(const {s}* p, {I} idx) {{\n"
                             f"  {T} r;\n  for (int l = 0; l < {lanes}; ++l) r[l] = "
                             f"{lane.format('p[idx[l]]')};{pad}\n  return r;\n}}")
        return f"{name}({ptr}, {self.vvalue(index)})"

    def _run_load(self, ptr: str, base: E.Expr, runs: Runs, elem: str, lanes: int) -> str:
        """A vector whose lanes read contiguous runs at constant distances from `base`
        (tir/lane_offsets.py): one vector load per run, the runs concatenated pairwise, and one
        shuffle that puts each lane's element in place.  `__builtin_shufflevector` is Clang's
        and GCC's from version 12; older compilers (or -DTF_LANEWISE_RUNS) build the vector lane
        by lane."""
        T, s = self.vec_type(elem, lanes), self.scalar_type(elem)
        count = 1
        while count < len(runs.starts):
            count *= 2
        key = "_".join(str(k) for k in runs.picks)
        name = f"tf_runs_{elem}x{lanes}_{runs.length}x{len(runs.starts)}_{key}"
        if name not in self.helpers:
            R = self.vec_type(elem, runs.length, unaligned=True)
            params = ", ".join(f"const {s}* p{k}" for k in range(len(runs.starts)))
            parts = [f"({self.vec_type(elem, runs.length)})(*(const {R}*)p{k})" for k in range(len(runs.starts))]
            parts += [parts[-1]] * (count - len(parts))       # pad to a power of two of runs
            width, level = runs.length, 0
            body = []
            while len(parts) > 1:
                level += 1
                width *= 2
                W = self.vec_type(elem, width)
                joined = []
                for k in range(0, len(parts), 2):
                    v = f"c{level}_{k // 2}"
                    body.append(f"  {W} {v} = __builtin_shufflevector({parts[k]}, {parts[k + 1]}, "
                                f"{', '.join(map(str, range(width)))});")
                    joined.append(v)
                parts = joined
            whole = parts[0]
            if width == lanes and runs.picks == tuple(range(lanes)):
                body.append(f"  return {whole};")
            else:
                body.append(f"  return __builtin_shufflevector({whole}, {whole}, {', '.join(map(str, runs.picks))});")
            slow = "\n".join(f"  r[{k}] = p{pick // runs.length}[{pick % runs.length}];"
                              for k, pick in enumerate(runs.picks))
            self.helpers[name] = (
                f"static inline {T} {name}({params}) {{\n"
                "#if !defined(TF_LANEWISE_RUNS) && (defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12))\n"
                + "\n".join(body) + "\n#else\n"
                f"  {T} r;\n{slow}\n  return r;\n#endif\n}}")
        args = ", ".join(self._address(ptr, self._offset(base, start)) for start in runs.starts)
        return f"{name}({args})"

    @staticmethod
    def _offset(base: E.Expr, start: int) -> E.Expr:
        return base if start == 0 else base + E.const(start, base.dtype)

    def _lookup256(self, ptr: str, index: E.Expr, elem: str, T: str, s: str) -> str:
        """16 bytes of a 256-byte table at 16 byte indices (a folded quantized activation: GELU,
        a rescaling): with AVX-512 VBMI, two vpermi2b over the table's halves and a blend on each
        index's top bit instead of 16 scalar loads."""
        I = self.vec_type("uint8", 16)
        name = self._vhelper(f"lookup256_{elem}x16", (
            "#include <immintrin.h>\n"
            f"static inline {T} NAME(const {s}* p, {I} idx) {{\n"
            "#if defined(__AVX512VBMI__) && defined(__AVX512VL__) && defined(__AVX512BW__)\n"
            "  __m512i i = _mm512_castsi128_si512((__m128i)idx);\n"
            "  __m128i lo = _mm512_castsi512_si128(_mm512_permutex2var_epi8(_mm512_loadu_si512((const void*)p), i, "
            "_mm512_loadu_si512((const void*)(p + 64))));\n"
            "  __m128i hi = _mm512_castsi512_si128(_mm512_permutex2var_epi8(_mm512_loadu_si512((const void*)(p + 128)), "
            "i, _mm512_loadu_si512((const void*)(p + 192))));\n"
            f"  return ({T})_mm_mask_blend_epi8(_mm_movepi8_mask((__m128i)idx), lo, hi);\n"
            "#else\n"
            f"  {T} r;\n  for (int l = 0; l < 16; ++l) r[l] = p[idx[l]];\n  return r;\n"
            "#endif\n}"))
        return f"{name}({ptr}, {self.vvalue(index)})"

    def _address(self, ptr: str, base: E.Expr) -> str:
        return ptr if E.is_const_int(base, 0) else f"{ptr} + {self.index_expr(base)}"

    def vector_aligned(self, buf: N.Buffer, base: E.Expr, elem: str, lanes: int) -> bool:
        """Whether a contiguous access at `base` is provably aligned to the vector's size: only
        for buffers this function allocated (64-byte aligned) and a base that is a multiple of
        the lane count."""
        nbytes = dt.itemsize(elem) * lanes
        return (buf.data in self.allocated and nbytes <= 64 and 64 % nbytes == 0
                and is_multiple_of(base, lanes))

    def vector_store(self, s: N.BufferStore, index: E.Expr) -> None:
        buf = s.buffer
        lanes, elem = dt.lanes(index.dtype), dt.element_of(buf.dtype)
        if lanes != dt.lanes(s.value.dtype):
            raise CodegenError(f"{self.func_name}: store to {buf.name!r} of a {s.value.dtype} "
                               f"value at a {index.dtype} index (lane counts differ)")
        ptr, is_bool, sc = self.buffer_ref(buf), dt.is_bool(elem), self.scalar_type(elem)
        value = self.vmask_as(s.value, 1) if is_bool else self.vvalue(s.value)
        V = self.mask_type(1, lanes) if is_bool else self.vec_type(elem, lanes)
        lane = "v[l] != 0" if is_bool else "v[l]"
        if isinstance(index, E.Ramp) and const_int(index.stride) == 1:
            addr = self._address(ptr, index.base)
            if not is_bool and physical_lanes(lanes) == lanes:
                aligned = self.vector_aligned(buf, index.base, elem, lanes)
                U = self.vec_type(elem, lanes, unaligned=not aligned)
                self.emit(f"*({U}*)({addr}) = {value};")
                return
            name = self._vhelper(f"store_{elem}x{lanes}", f"static inline void NAME({sc}* p, {V} v) "
                                 f"{{ for (int l = 0; l < {lanes}; ++l) p[l] = {lane}; }}")
            self.emit(f"{name}({addr}, {value});")
        elif isinstance(index, E.Ramp):
            name = self._vhelper(f"scatter_strided_{elem}x{lanes}",
                                 f"static inline void NAME({sc}* p, int64_t base, int64_t stride, {V} v) "
                                 f"{{ for (int l = 0; l < {lanes}; ++l) p[base + l * stride] = {lane}; }}")
            base, stride = self.index_expr(index.base), self.index_expr(index.stride)
            self.emit(f"{name}({ptr}, {base}, {stride}, {value});")
        else:
            I = self.vec_type(dt.element_of(index.dtype), lanes)
            name = self._vhelper(f"scatter_{elem}x{lanes}_by_{index.dtype}",
                                 f"static inline void NAME({sc}* p, {I} idx, {V} v) "
                                 f"{{ for (int l = 0; l < {lanes}; ++l) p[idx[l]] = {lane}; }}")
            self.emit(f"{name}({ptr}, {self.vvalue(index)}, {value});")
