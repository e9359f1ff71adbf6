"""How C tokens are spelled: identifiers, comments, literals, math-library calls, operator
precedence.  Pure functions shared by every C-family printer (c_like.py and its dialects)."""
from __future__ import annotations

import math
import re
from typing import Callable

import numpy as np

from ..ir import dtype as dt

# Precedence of C operators (higher binds tighter); an atom never needs parentheses.
ATOM, UNARY, MUL, ADD, REL, EQ, BITAND, BITOR, LAND, LOR, COND = 16, 14, 13, 12, 10, 9, 8, 6, 5, 4, 3

# Intrinsics whose C name is the IR name plus the precision suffix (expf, exp).
_PLAIN_MATH = {"exp", "exp2", "log", "log2", "log1p", "expm1", "sqrt", "tanh", "erf", "floor",
               "ceil", "trunc", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
               "asinh", "acosh", "atanh", "pow", "atan2", "fmod"}
_RENAMED_MATH = {"abs": "fabs", "round": "nearbyint"}   # nearbyint rounds half to even

# Names a generated identifier must not take: C keywords, the type and macro names the
# generated code uses, and the functions math.h and stdlib.h declare (with glibc's extras).
_C_WORDS = """
auto break case char const continue default do double else enum extern float for goto if inline
int long register restrict return short signed sizeof static struct switch typedef union unsigned
void volatile while bool true false NULL INFINITY NAN main size_t int8_t int16_t int32_t int64_t
uint8_t uint16_t uint32_t uint64_t half errno
"""
_STDLIB_FUNCTIONS = """
abort abs atexit atof atoi atol atoll bsearch calloc div exit free getenv labs ldiv llabs lldiv
malloc mblen mbstowcs mbtowc posix_memalign aligned_alloc qsort quick_exit rand realloc srand
strtod strtof strtol strtold strtoll strtoul strtoull system wcstombs wctomb random srandom
drand48 erand48 lrand48 nrand48 mrand48 jrand48 srand48 seed48 lcong48 mkstemp setenv unsetenv
putenv clearenv memcpy memset select
"""
_MATH_FUNCTIONS = """
cbrt copysign erfc fdim fma fmax fmin frexp hypot ilogb ldexp lgamma llrint llround log10 logb
lrint lround modf nan nextafter nexttoward remainder remquo rint scalbln scalbn tgamma gamma
drem finite significand j0 j1 jn y0 y1 yn isnan isinf isfinite signbit fpclassify
"""
_MATH_BASES = _PLAIN_MATH | {"fabs", "nearbyint", "round"} | set(_MATH_FUNCTIONS.split())
_RESERVED = (set(_C_WORDS.split()) | set(_STDLIB_FUNCTIONS.split())
             | {base + sfx for base in _MATH_BASES for sfx in ("", "f", "l")})


def c_identifier(name: str) -> str:
    """`name` made into a valid C identifier that cannot collide with generated names."""
    ident = re.sub(r"[^A-Za-z0-9_]", "_", name) or "v"
    if ident[0].isdigit():
        ident = "v" + ident
    if ident in _RESERVED or ident.startswith(("tf_", "__")):
        ident = "v_" + ident
    return ident


def kernel_symbol(name: str) -> str:
    """The C name of a kernel called `name` (reserved words get a `_kernel` suffix)."""
    ident = re.sub(r"[^A-Za-z0-9_]", "_", name) or "kernel"
    if ident[0].isdigit():
        ident = "k" + ident
    if ident in _RESERVED or ident.startswith(("tf_", "__")):
        ident += "_kernel"   # generated helpers never end in _kernel
    return ident


def comment(text: str) -> str:
    """`text` as a C comment (a `*/` inside cannot end it early)."""
    return "/* " + text.replace("*/", "* /") + " */"


def int_literal(value: int, dtype: str, type_name: Callable[[str], str]) -> tuple[str, int]:
    """(text, precedence) of an integer or bool constant of `dtype`."""
    scalar = dt.element_of(dtype)
    if scalar == "bool":
        return ("true" if value else "false"), ATOM
    if scalar == "int32":
        if value == -(2 ** 31):
            return "(-2147483647 - 1)", ATOM     # 2147483648 alone would not be an int
        return str(value), (ATOM if value >= 0 else UNARY)
    if scalar == "int64":
        return ("INT64_MIN", ATOM) if value == -(2 ** 63) else (f"INT64_C({value})", ATOM)
    if scalar == "uint32":
        return f"{value}u", ATOM
    if scalar == "uint64":
        return f"UINT64_C({value})", ATOM
    return f"({type_name(scalar)}){value}", UNARY


def float_literal(value: float, dtype: str, type_name: Callable[[str], str]) -> tuple[str, int]:
    """(text, precedence) of an exact literal of the value the IR means (`value` rounded once
    to `dtype`).

    The shortest decimal that round-trips at the type's precision is exact when the compiler
    parses it at that precision (float32 with an `f` suffix, float64 plain).  float16 is
    printed through its float32 value, which float32 represents exactly.
    """
    scalar = dt.element_of(dtype)
    with np.errstate(over="ignore"):
        value = float(np.dtype(scalar).type(value))   # e.g. 1e20 is inf in float16
    if math.isnan(value) or math.isinf(value):
        text = "NAN" if math.isnan(value) else "INFINITY"     # float constants in math.h
        text = text if scalar == "float32" else f"({type_name(scalar)}){text}"
        if value < 0:
            return "-" + text, UNARY
        return text, (ATOM if scalar == "float32" else UNARY)
    text = repr(value) if scalar == "float64" else str(np.float32(value)) + "f"
    if scalar == "float16":
        return f"({type_name(scalar)}){text}", UNARY
    return text, (UNARY if text.startswith("-") else ATOM)


def math_call(op: str, args: list[str], suffix: str, one: str) -> str | None:
    """C text of intrinsic `op` on printed arguments, with the precision `suffix` ("f" for
    float32) and the literal `one` of that type; None if `op` has no C spelling."""
    x = args[0]
    if op in _PLAIN_MATH:
        return f"{op}{suffix}({', '.join(args)})"
    if op in _RENAMED_MATH:
        return f"{_RENAMED_MATH[op]}{suffix}({x})"
    if op == "rsqrt":
        return f"({one} / sqrt{suffix}({x}))"
    if op == "sigmoid":
        return f"({one} / ({one} + exp{suffix}(-({x}))))"
    if op in ("isnan", "isinf"):
        return f"{op}({x})"
    return None
