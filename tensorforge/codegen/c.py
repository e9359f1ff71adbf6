"""PrimFuncs -> one C source file for the CPU backend (OpenMP threads + GCC vector extensions).

Calling convention of every generated kernel (what `runtime/module.py` calls through ctypes):

    int32_t <name>(<T0>* restrict <buf0>, ..., <int type> <shape_var0>, ...);

One pointer per parameter buffer, in `PrimFunc.params` order (`const` when the kernel never
writes it), then one integer per `PrimFunc.shape_vars` entry, in order.  The result is 0 on
success and `STATUS_ALLOC_FAILED` when a heap allocation failed.  Each library also defines
`int32_t tf_num_threads`, the team size of its parallel loops, which the runtime sets.

Parallel loops are `#pragma omp parallel for`, but they run on tensorforge's own thread pool
(runtime/thread_pool.py), not on the OpenMP runtime: with GCC, the library defines the three
OpenMP entry points GCC's outlined loops call (POOL_SHIM, hidden so that nothing outside the
library binds to them) and forwards them to the pool.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import dtype as dt
from ..ir import expr as E
from ..ir.functor import post_order_visit, uses_var
from ..tir import nodes as N
from . import c_bfloat16
from .c_like import CLikePrinter, CodegenError, Dialect
from .c_text import ATOM, comment, kernel_symbol
from .c_vector import VectorExtensions

STATUS_OK, STATUS_ALLOC_FAILED = 0, 1
# Larger local buffers go to the heap.  A cache-blocked GEMM's block of accumulators takes up to
# cpu_matmul.BLOCK_BYTES: on the stack, GCC keeps each register tile of it in registers through
# the reduction; on the heap, inside a parallel loop, it could not tell the block from the
# operands and loaded and stored the tile at every multiply-add.
STACK_LIMIT_BYTES = 64 * 1024
ALIGN = 64

# narrow storage types (float8, float4, int4, int2, ...) are bytes that kernels only move
NARROW_STORAGE = {t: "uint8_t" for t in dt.NARROW_TYPES}

C_DIALECT = Dialect(
    name="C",
    scalar_types={"bool": "bool", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t",
                  "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t",
                  "uint32": "uint32_t", "uint64": "uint64_t", "float16": "tf_float16",
                  "bfloat16": "tf_bfloat16", "float32": "float", "float64": "double",
                  **NARROW_STORAGE},
    includes=("math.h", "stdbool.h", "stddef.h", "stdint.h", "stdlib.h"),
    index_type="int64_t",
    prefetch="__builtin_prefetch({address}, 0, 3)",
)

# ("pragma_<name>", value) loop annotations that have a C spelling; others become comments.
# (No OpenMP spellings: those would have to take part in the nesting rules of _omp_construct.)
_LOOP_PRAGMAS = {"unroll": "GCC unroll {value}", "ivdep": "GCC ivdep"}

# Heap allocation, ALIGN-byte aligned.  The byte count is checked for negative extents and
# size_t overflow, which fail like an exhausted heap instead of returning a short buffer.  With
# the thread pool loaded, blocks come from and go back to its cache of freed blocks (weak
# references, as POOL_SHIM's: runtime/thread_pool.py), so a kernel called again reuses them.
_ALLOC_HELPER = """extern void* tf_pool_alloc(size_t) __attribute__((weak));
extern void tf_pool_free(void*) __attribute__((weak));
static inline void* tf_alloc(size_t elem_bytes, int ndim, const int64_t* dims) {
  size_t n = elem_bytes;
  for (int k = 0; k < ndim; ++k) {
    if (dims[k] < 0 || __builtin_mul_overflow(n, (size_t)dims[k], &n)) return NULL;
  }
  if (tf_pool_alloc) return tf_pool_alloc(n ? n : %d);
  void* p = NULL;
  if (posix_memalign(&p, %d, n ? n : %d) != 0) return NULL;
  return p;
}
static inline void tf_free(void* p) {
  if (tf_pool_free) tf_pool_free(p); else free(p);
}""" % (ALIGN, ALIGN, ALIGN)


# float16 is only stored, loaded and converted (legalize.py moves its arithmetic to float32), so
# clang before 15, which lacks _Float16 on x86, can use its storage-only __fp16 instead.
_FLOAT16_TYPEDEF = """#if defined(__clang__) && __clang_major__ < 15
typedef __fp16 tf_float16;
#else
typedef _Float16 tf_float16;
#endif
"""


# Vector math: declared SIMD-callable so that GCC vectorizes `omp simd` loops over these calls with
# glibc's libmvec (a few ulp, like NumPy's own SIMD math).  Only when the backend links libmvec
# (-DTF_USE_LIBMVEC -lmvec); other compilers and libcs keep the scalar calls.
_VECTOR_MATH = ("exp", "log", "erf", "tanh", "sin", "cos", "exp2", "log2", "log1p", "expm1",
                "sinh", "cosh", "tan", "atan", "asin", "acos")
_LIBMVEC_DECLS = "#if defined(TF_USE_LIBMVEC) && defined(__GNUC__) && !defined(__clang__)\n" + "".join(
    f"#pragma omp declare simd notinbranch\nfloat {f}f(float);\n#pragma omp declare simd notinbranch\n"
    f"double {f}(double);\n" for f in _VECTOR_MATH) + "#endif\n"


# float32 erf, inline: x * P(x^2) / Q(x^2) on |x| < 3.92 (erf rounds to 1 beyond), the sign
# copied back.  A rational least-squares fit (weights 1/(erf * Q)), within 2.6e-7 relative of
# erf (2-3 ulp).  Inline, an `omp simd` loop vectorizes it as plain arithmetic, about twice as fast as the
# libmvec call, which clobbers every vector register (GELU after BERT's FFN product).
ERF_P = (1.1283791682947402, 0.18517786690155622, 0.054255061797521154, 0.003841163022908649,
         0.00037703713248402873, 4.615182328207568e-06, -1.2832012757924005e-08)
ERF_Q = (1.0, 0.4974430078160423, 0.11389618611506083, 0.015435954254232732, 0.0013024332895716273,
         6.245766439664201e-05)
ERF_ONE_FROM = 3.92


# float32 tanh, inline: x * P(x^2) / Q(x^2) on |x| < 9 (tanhf rounds to 1 from 8.67), the sign
# copied back.  A rational fit of degree 4 over 4 in x^2 (least squares weighted toward the
# largest relative error), within relative 2.5e-7 of tanh (3 ulp) and 0.64 ulp on average over
# [-12, 12].  The libmvec call took three times ONNX Runtime's time on an elementwise Tanh
# (8x128x768); inline, the loop vectorizes as plain arithmetic (LSTM gates, GELU's tanh form).
TANH_P = (0.9999999799722594, 0.13381439951331936, 0.003496077834121468, 2.0617043671982645e-05,
          1.3365501210531103e-08)
TANH_Q = (1.0, 0.46714755752500814, 0.02587885133381639, 0.00032864315390489305, 7.781035968352061e-07)
TANH_ONE_FROM = 9.0


# float32 exp, inline: x = n ln2 + r with n = x / ln2 rounded by adding 1.5 * 2^23 (whose low
# bits are then n), ln2 split in two (the high part has 16 significant bits, so n * high is
# exact), exp(r) on |r| <= ln2 / 2 by a degree-6 polynomial with 1 + r exact (its other
# coefficients fit for relative error), scaled by 2^n in two steps: 2^(n/2) added to the
# exponent of exp(r), then a product with 2^(n - n/2), so that results down to the subnormals
# round once.  Within 1.2 ulp of exp (NumPy's float32 exp: 2.4).  Inputs outside (EXP_MIN,
# EXP_MAX) are fixed up at the end by two selects: 0 below (exp(-inf) = 0: masked attention
# scores), x + inf above and for NaN (a clamp of the input first cost a quarter more: the
# compiler makes each clamp a compare and a blend).  libmvec's call took 1.9x ONNX Runtime's
# time on an elementwise Exp (8x128x768) and 2x on softmax; inline, the loop vectorizes as plain
# arithmetic.  A loop vectorized on 16 float32 lanes calls the vector form instead
# (c_vector.py, `_vexp16`): the same steps as AVX-512 intrinsics, the scaling one vscalefps.
EXP_P = (1.0, 1.0, 0.49999993457169833, 0.1666652084841213, 0.0416683875620527, 0.008368691390777129,
         0.001381450205687065)
EXP_LN2_HI, EXP_LN2_LO = 0.693145751953125, 1.428606765330187e-06
EXP_MIN, EXP_MAX = -104.0, 89.0        # exp rounds to 0 below and overflows to inf above


def _horner(var: str, coeffs: tuple, t: str = "t", ctype: str = "float") -> list[str]:
    out = f"{coeffs[-1]!r}f"
    # a * b + c: the backend compiles with -ffp-contract=fast, so this is one fused multiply-add
    # where the target has them and a multiply and an add (no libm call to fmaf) where it has not
    # (`ctype` a GCC vector type: the float constants broadcast)
    return [f"  {ctype} {var} = {out};" if ctype == "float" else f"  {ctype} {var} = ({ctype}){{0}} + {out};"] + \
        [f"  {var} = {var} * {t} + {c!r}f;" for c in coeffs[-2::-1]]


def _odd_rational(name: str, p: tuple, q: tuple, one_from: float) -> str:
    """An odd function below 1 in magnitude, inline in float32: x * P(x^2) / Q(x^2) for |x| <
    `one_from`, 1 beyond with x's sign (at most 1 throughout); NaN stays NaN."""
    return "\n".join([
        f"static inline float {name}(float x) {{",
        "  float a = fabsf(x);",
        f"  float c = a < {one_from}f ? a : {one_from}f;",
        *odd_rational_body(p, q),
        f"  r = a < {one_from}f ? (r < 1.0f ? r : 1.0f) : (a == a ? 1.0f : a);",
        "  return copysignf(r, x);",
        "}"])


def odd_rational_body(p: tuple, q: tuple, ctype: str = "float") -> list[str]:
    """The rational's steps from the clamped magnitude `c` to `r` = c * P(c^2) / Q(c^2): C lines
    for float, or for a GCC vector of floats (c_vector.py's 16-lane form)."""
    return [f"  {ctype} t = c * c;", *_horner("p", p, "t", ctype), *_horner("q", q, "t", ctype),
            f"  {ctype} r = c * p / q;"]


# (P, Q, the magnitude from which the value is 1) of the inline odd rationals, by math function
ODD_RATIONALS = {"tanh": (TANH_P, TANH_Q, TANH_ONE_FROM), "erf": (ERF_P, ERF_Q, ERF_ONE_FROM)}


def exp_reduction(ctype: str = "float") -> list[str]:
    """The inline exp's steps up to exp(r) in `p`, from `x`, with `t` (the magic-number sum whose
    low bits are n) and `n` left defined: C lines for float, or for a GCC vector of floats
    (c_vector.py's 16-lane exp, which scales by 2^n with vscalefps)."""
    return [
        f"  {ctype} t = x * 1.4426950408889634f + 12582912.0f;",
        f"  {ctype} n = t - 12582912.0f;",
        f"  {ctype} r = x - n * {EXP_LN2_HI!r}f;",       # n * EXP_LN2_HI is exact
        f"  r = r - n * {EXP_LN2_LO!r}f;",
        *_horner("p", EXP_P, "r", ctype)]


def exp_helper(name: str) -> str:
    """The C definition of the inline float32 exp under `name`."""
    return "\n".join([
        f"static inline float {name}(float x) {{",
        *exp_reduction(),
        "  int32_t i, e;",
        "  __builtin_memcpy(&i, &t, 4);",
        "  __builtin_memcpy(&e, &p, 4);",
        "  i -= 0x4B400000;",
        "  int32_t half = i >> 1;",
        "  int32_t b = (i - half + 127) << 23;",
        "  e += half << 23;",
        "  float a, s;",
        "  __builtin_memcpy(&a, &e, 4);",
        "  __builtin_memcpy(&s, &b, 4);",
        "  float y = a * s;",
        f"  y = x > {EXP_MIN!r}f ? y : 0.0f;",
        f"  return x < {EXP_MAX!r}f ? y : x + __builtin_inff();",
        "}"])


def erf_helper(name: str) -> str:
    """The C definition of the inline float32 erf under `name`."""
    return _odd_rational(name, ERF_P, ERF_Q, ERF_ONE_FROM)


def tanh_helper(name: str) -> str:
    """The C definition of the inline float32 tanh under `name`."""
    return _odd_rational(name, TANH_P, TANH_Q, TANH_ONE_FROM)


@dataclass(frozen=True)
class CSource:
    """Generated C text and the C symbol of each PrimFunc (by PrimFunc name).  `units`: the
    same code as several translation units (when there are several functions), which the C
    compiler can build in parallel and link; `text` is the whole, as one unit."""

    text: str
    symbols: dict
    units: tuple = ()

    def __str__(self) -> str:
        return self.text


# GCC lowers `omp parallel for schedule(static)` to GOMP_parallel(body, data, team, flags) with
# a body that asks omp_get_num_threads/omp_get_thread_num for its share.  These definitions
# send those calls to the pool (weak references: without the pool loaded the loop runs on the
# calling thread).  Clang lowers to its own runtime's entry points and keeps using it.
POOL_SHIM = """#if defined(_OPENMP) && defined(__GNUC__) && !defined(__clang__)
extern void tf_pool_parallel(void (*)(void*), void*, int32_t) __attribute__((weak));
extern int32_t tf_pool_thread_num(void) __attribute__((weak));
extern int32_t tf_pool_team_size(void) __attribute__((weak));
__attribute__((visibility("hidden"))) void GOMP_parallel(void (*fn)(void*), void* data, unsigned team,
                                                          unsigned flags) {
  (void)flags;
  if (tf_pool_parallel) tf_pool_parallel(fn, data, (int32_t)team); else fn(data);
}
__attribute__((visibility("hidden"))) int omp_get_thread_num(void) {
  return tf_pool_thread_num ? tf_pool_thread_num() : 0;
}
__attribute__((visibility("hidden"))) int omp_get_num_threads(void) {
  return tf_pool_team_size ? tf_pool_team_size() : 1;
}
#endif
"""


def codegen_c(funcs: list[N.PrimFunc], target=None, sequences=(), text_cache: dict | None = None,
              units: int = 1) -> CSource:
    """Print all `funcs` into one C translation unit (and, with `units` > 1, also as that many
    units that can be compiled in parallel: CSource.units).

    `text_cache`: {function name: store} for functions whose printed text (with the typedefs
    and helpers it needs) is kept by the caller: `store.load(symbol)` gives the entry
    ({"symbol", "text", "typedefs", "helpers"}) or None, `store.store(entry)` keeps a new one
    (the graph compiler keeps them beside its lowering cache: lowering.CachedText).

    `sequences`: (name, [(function name, [slot, ...]), ...]) pairs; each becomes a C function
    `int32_t name(void **v, int32_t *failed)` that calls the functions in order with the
    pointers v[slot] as arguments, stops at the first nonzero status and stores the position
    of the call that failed in *failed (the graph executor's loop, run in C: see
    runtime/executor.py)."""
    printer = CPrinter()
    symbols: dict[str, str] = {}
    bodies = []
    for func in funcs:
        if func.name in symbols:
            raise CodegenError(f"two functions are named {func.name!r}; kernel names must be unique")
        symbol = kernel_symbol(func.name)
        if symbol in symbols.values():
            raise CodegenError(f"kernel names {func.name!r} and another both become C name {symbol!r}")
        symbols[func.name] = symbol
        cached = text_cache.get(func.name) if text_cache else None
        if cached is None:
            bodies.append(printer.print_function(func, symbol))
            continue
        entry = cached.load(symbol)
        if entry is None:
            # printed alone, so the entry holds every typedef and helper the function needs
            alone = CPrinter()
            entry = {"symbol": symbol, "text": alone.print_function(func, symbol),
                     "typedefs": dict(alone.typedefs), "helpers": dict(alone.helpers)}
            cached.store(entry)
        for name, text in entry["typedefs"].items():
            printer.typedefs.setdefault(name, text)
        for name, text in entry["helpers"].items():
            printer.helpers.setdefault(name, text)
        bodies.append(entry["text"])
    head = [f"/* Generated by tensorforge for target \"{target if target is not None else 'c'}\". */"]
    head += [f"#include <{h}>" for h in C_DIALECT.includes]
    if any(f"{f}f(" in text or f"{f}(" in text for text in bodies for f in _VECTOR_MATH):
        head += [_LIBMVEC_DECLS]
    head += ["", "/* Team size of the parallel loops below; the runtime sets it after loading. */",
             "int32_t tf_num_threads = 1;", ""]
    if any("#pragma omp parallel" in text for text in bodies):
        head += [POOL_SHIM]
    if any("tf_float16" in text for text in bodies + list(printer.typedefs.values())):
        head.append(_FLOAT16_TYPEDEF)
    if any(c_bfloat16.used_in(text) for text in bodies + list(printer.typedefs.values()) + list(printer.helpers.values())):
        head.append(c_bfloat16.PRELUDE)
    head += list(printer.typedefs.values()) + ([""] if printer.typedefs else [])
    head += [h + "\n" for h in printer.helpers.values()]
    runners = [_sequence(name, calls, symbols) for name, calls in sequences]
    for name, _ in sequences:
        symbols[name] = name
    text = "\n".join(head + bodies + runners) + "\n"
    return CSource(text, symbols, _split_units(head, bodies, runners, units))


_NUM_THREADS_DEF = "int32_t tf_num_threads = 1;"


def _split_units(head: list, bodies: list, runners: list, count: int) -> tuple:
    """`count` translation units of about equal size: each has the whole head (typedefs and
    static helpers), the first defines tf_num_threads and the pool shim and the others declare
    tf_num_threads; the kernel
    runners come with prototypes of the kernels they call."""
    count = min(count, len(bodies))
    if count < 2:
        return ()
    if head.count(_NUM_THREADS_DEF) != 1:
        raise CodegenError("the C head must define tf_num_threads once")
    shared = [("extern int32_t tf_num_threads;" if line == _NUM_THREADS_DEF else line)
              for line in head if line != POOL_SHIM]      # the shim is defined once, in unit 0
    parts: list[list[str]] = [[] for _ in range(count)]
    sizes = [0] * count
    for body in sorted(bodies, key=len, reverse=True):     # largest first, each to the smallest unit
        k = sizes.index(min(sizes))
        parts[k].append(body)
        sizes[k] += len(body)
    prototypes = [body.split("{", 1)[0].rstrip() + ";" for body in bodies]
    units = []
    for k, part in enumerate(parts):
        lines = (head if k == 0 else shared) + part
        if k == 0 and runners:
            lines = lines + prototypes + [""] + runners
        units.append("\n".join(lines) + "\n")
    return tuple(units)


def _sequence(name: str, calls, symbols: dict) -> str:
    if not name.isidentifier() or name in symbols:
        raise CodegenError(f"sequence name {name!r} is not a free C identifier")
    lines = [f"int32_t {name}(void **v, int32_t *failed) {{", "  int32_t s;"]
    for k, (func, slots) in enumerate(calls):
        if func not in symbols:
            raise CodegenError(f"sequence {name} calls {func!r}, which is not a function of this module")
        args = ", ".join(f"v[{int(i)}]" for i in slots)
        lines.append(f"  if ((s = {symbols[func]}({args})) != {STATUS_OK}) {{ *failed = {k}; return s; }}")
    lines += [f"  return {STATUS_OK};", "}", ""]
    return "\n".join(lines)


class CPrinter(VectorExtensions, CLikePrinter):
    """The C dialect: OpenMP loops, heap/stack allocations, vector extensions."""

    def __init__(self):
        self.typedefs: dict[str, str] = {}
        super().__init__(C_DIALECT)

    def _reset(self) -> None:
        super()._reset()
        self.allocated: set = set()     # data Vars of buffers this function allocated
        self.parallel_depth = 0         # open `omp parallel for` loops around the statement
        self.simd_depth = 0             # open `omp simd` loops
        self.uses_status = False

    def math_call(self, op: str, args: list[str], dtype: str) -> str:
        if op == "erf" and dtype == "float32":
            return self.call_helper("erff", erf_helper, args[:1])[0]
        if op == "tanh" and dtype == "float32":
            return self.call_helper("tanhf", tanh_helper, args[:1])[0]
        if op == "exp" and dtype == "float32":
            return self.call_helper("expf", exp_helper, args[:1])[0]
        if op == "sigmoid" and dtype == "float32":
            return f"(1.0f / (1.0f + {self.call_helper('expf', exp_helper, [f'-({args[0]})'])[0]}))"
        return super().math_call(op, args, dtype)

    def print_Cast(self, e):
        if c_bfloat16.is_bf16_cast(e.value.dtype, e.dtype) and e.value.dtype != e.dtype:
            return c_bfloat16.scalar_cast(e.value.dtype, e.dtype, self.expr(e.value)), ATOM
        return super().print_Cast(e)

    def print_function(self, func: N.PrimFunc, symbol: str) -> str:
        """The C definition of `func` under the name `symbol` (convention: module docstring)."""
        func, params = self.begin_function(func, symbol)
        self.indent = 1
        self.stmt(func.body)
        head = [f"{self.dialect.kernel_prefix}int32_t {symbol}({', '.join(params) or 'void'}) {{"]
        if self.uses_status:
            head.append(f"  int32_t tf_status = {STATUS_OK};")
        tail = ["  return tf_status;" if self.uses_status else f"  return {STATUS_OK};", "}", ""]
        return "\n".join(head + self.lines + tail)

    # Loops -------------------------------------------------------------------------------------
    def _omp_construct(self, s: N.For) -> str | None:
        """The OpenMP construct loop `s` opens: "parallel" for the outermost parallel loop,
        "simd" for a vectorized loop with independent iterations, else None.  Nothing is
        opened inside a simd loop (OpenMP forbids nesting there)."""
        if self.simd_depth:
            return None
        if s.kind == N.PARALLEL and self.parallel_depth == 0:
            return "parallel"
        if s.kind == N.VECTORIZED and self._iterations_independent(s):
            return "simd"
        return None

    def loop_pragmas(self, s: N.For) -> list[str]:
        lines, pragmas = [], []
        construct = self._omp_construct(s)
        if s.kind == N.THREAD_BINDING:
            raise CodegenError(f"{self.func_name}: loop {s.loop_var.name} is bound to thread axis "
                               f"{s.thread_tag!r}, but the C target has no thread axes; bind is "
                               "for GPU targets")
        if s.kind not in (N.SERIAL, N.PARALLEL, N.VECTORIZED, N.UNROLLED):
            raise CodegenError(f"{self.func_name}: unknown loop kind {s.kind!r}")
        if s.kind == N.PARALLEL and construct is None:
            lines.append("/* parallel loop inside a parallel or simd loop: runs serially */")
        if s.kind == N.VECTORIZED and construct is None:
            lines.append(f"/* vectorized loop {s.loop_var.name} left scalar (a store does not "
                         "depend on it, or it is inside a simd loop) */")
        for key, value in s.annotations:
            if key == "pragma_parallel_min" and construct == "parallel":
                continue                            # printed as the parallel loop's if() below
            name = key[len("pragma_"):] if key.startswith("pragma_") else None
            spelling = _LOOP_PRAGMAS.get(name) if name else None
            # An OpenMP construct must directly precede its loop: other pragmas become comments.
            if spelling and construct is None:
                pragmas.append("#pragma " + spelling.format(value=value))
            else:
                lines.append(comment(f"{key} = {value}"))
        if s.kind == N.UNROLLED and construct is None:
            extent = s.extent.value if isinstance(s.extent, E.IntImm) else 8
            pragmas.append(f"#pragma GCC unroll {max(1, min(extent, 64))}")
        if construct == "parallel":
            # a loop over a shape variable (shape_generic.py) opens a parallel region only when it
            # has `parallel_min` iterations (pragma; default 2): the calling thread runs less work
            least = next((int(v) for k, v in s.annotations if k == "pragma_parallel_min"), 2)
            serial_if = "" if isinstance(s.extent, E.IntImm) else f" if({self.index_expr(s.extent)} >= {least})"
            pragmas.append(f"#pragma omp parallel for num_threads(tf_num_threads) schedule(static){serial_if}")
        elif construct == "simd":
            pragmas.append("#pragma omp simd")
        return lines + pragmas

    def loop_body(self, s: N.For) -> None:
        construct = self._omp_construct(s)
        self.parallel_depth += construct == "parallel"
        self.simd_depth += construct == "simd"
        try:
            if construct is None and _paired_guarded_stores(s):
                # GCC 12's loop vectorizer, tuned for AVX-512 cores (-march=native on Zen 4/5,
                # Skylake-X), builds a wrong mask for two stores per iteration whose loads are
                # guarded by a range of the loop variable: `pad[2i] = 1 <= i && i < 6 ? x[2i - 2] :
                # 0; pad[2i + 1] = ...` left pad[4], pad[5] zero (a 2-column image's padding).
                # An empty asm statement keeps the compiler from vectorizing this (short) loop.
                self.emit('__asm__ volatile("");')
            self.stmt(s.body)
        finally:
            self.parallel_depth -= construct == "parallel"
            self.simd_depth -= construct == "simd"

    @staticmethod
    def _iterations_independent(s: N.For) -> bool:
        """Every store in the loop writes an index that depends on the loop variable (the
        vectorize schedule asserts the rest); a store that does not is a reduction."""
        ok = [True]

        def check(node):
            if isinstance(node, N.BufferStore) and not all(uses_var(i, s.loop_var) for i in node.indices):
                ok[0] = False
        post_order_visit(s.body, check)
        return ok[0]

    # Allocation --------------------------------------------------------------------------------
    def visit_Allocate(self, s: N.Allocate) -> None:
        buf = s.buffer
        if buf.scope not in (N.GLOBAL, N.LOCAL, N.SHARED):
            raise CodegenError(f"{self.func_name}: buffer {buf.name!r} has memory scope "
                               f"{buf.scope!r}; the C target has global and local")
        ctype = self.scalar_type(buf.dtype)
        count = 1
        for extent in buf.shape:
            count = count * extent.value if isinstance(extent, E.IntImm) and count is not None else None
        name = self.bind_buffer(buf)
        self.allocated.add(buf.data)
        try:
            if buf.scope != N.GLOBAL and count is not None and count * dt.itemsize(buf.dtype) <= STACK_LIMIT_BYTES:
                self.emit(f"{ctype} {name}[{max(1, count)}] __attribute__((aligned({ALIGN})));")
                self.stmt(s.body)
                return
            self._heap_allocate(s, name, ctype)
        finally:
            self.unbind_buffer(buf, name)

    def _heap_allocate(self, s: N.Allocate, name: str, ctype: str) -> None:
        """`ptr = tf_alloc(n)`; on failure set the status and skip the body (a `return` is not
        allowed inside an OpenMP region), else run the body and free."""
        self.helpers.setdefault("tf_alloc", _ALLOC_HELPER)
        self.uses_status = True
        dims = ", ".join(self.index_expr(x) for x in s.buffer.shape) or "1"
        self.emit(f"{ctype}* {self.dialect.restrict} {name} = ({ctype}*)tf_alloc(sizeof({ctype}), "
                  f"{max(1, len(s.buffer.shape))}, (const int64_t[]){{{dims}}});")
        with self.block(f"if ({name} == NULL)"):
            if self.parallel_depth:
                self.emit("#pragma omp atomic write")
            self.emit(f"tf_status = {STATUS_ALLOC_FAILED};")
        self.lines[-1] += " else {"
        self.indent += 1
        self.stmt(s.body)
        self.emit(f"tf_free({name});")
        self.indent -= 1
        self.emit("}")


def _paired_guarded_stores(s: N.For) -> bool:
    """The loop's body is two stores whose values select on a condition of the loop variable (a
    guarded load): the shape GCC 12 mis-vectorizes (see CPrinter.loop_body)."""
    body = s.body
    return (isinstance(body, N.SeqStmt) and len(body.seq) == 2
            and all(isinstance(st, N.BufferStore) and _guarded_by(st.value, s.loop_var) for st in body.seq))


def _guarded_by(value: E.Expr, var: E.Var) -> bool:
    """Whether `value` holds a select (or if_then_else) whose condition uses `var`."""
    found = []

    def visit(node) -> None:
        cond = node.condition if isinstance(node, E.Select) else \
            node.args[0] if isinstance(node, E.Call) and node.op == "if_then_else" else None
        if cond is not None and uses_var(cond, var):
            found.append(node)

    post_order_visit(value, visit)
    return bool(found)
