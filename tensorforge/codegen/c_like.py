"""One printer for the C family of languages: loop program (PrimFunc) -> C-like source text.

C, CUDA and OpenCL differ in a table (`Dialect`: type names, qualifiers, math-function suffixes,
thread indices, barrier text) plus a few hooks a subclass overrides: loop kinds, allocations,
vector expressions and the function signature.  This module prints everything that is the same
in all of them: scalar expressions with C precedence, statements, literals, floor division,
intrinsic calls, and unique C names for IR variables.

Invariants the printer keeps:
* every binding site (loop, let, buffer) gets a fresh C identifier, so two IR variables that
  share a name, or one variable bound twice, never clash;
* integer results narrower than `int` are cast back to their type after each operation, so C's
  integer promotion never changes the wrap-around the IR means;
* `Select` prints as the lazy C ternary (guards against out-of-bounds loads rely on it).
"""
from __future__ import annotations

import contextlib
import math
import re
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from ..te import dtype as dt
from ..te import expr as E
from ..tir import nodes as N
from .analysis import is_nonneg


class CodegenError(ValueError):
    """The loop program cannot be printed for this target; the message says what and where."""


@dataclass(frozen=True)
class Dialect:
    """What differs between C-family languages, as data."""

    name: str
    scalar_types: dict                 # IR scalar dtype -> type name
    restrict: str = "restrict"
    kernel_prefix: str = ""            # printed before an entry function's return type
    pointer_qualifier: str = ""        # address space of parameter pointers (OpenCL: __global)
    math_suffix: dict = field(default_factory=lambda: {"float32": "f", "float64": ""})
    thread_index: dict = field(default_factory=dict)   # "threadIdx.x" -> expression text
    barrier: str = ""
    includes: tuple = ()


# Precedence of C operators (higher binds tighter); an atom never needs parentheses.
ATOM, UNARY, MUL, ADD, REL, EQ, BITAND, BITOR, LAND, LOR, COND = 16, 14, 13, 12, 10, 9, 8, 6, 5, 4, 3
_BINARY = {E.Add: ("+", ADD), E.Sub: ("-", ADD), E.Mul: ("*", MUL), E.Div: ("/", MUL),
           E.LT: ("<", REL), E.LE: ("<=", REL), E.GT: (">", REL), E.GE: (">=", REL),
           E.EQ: ("==", EQ), E.NE: ("!=", EQ), E.And: ("&&", LAND), E.Or: ("||", LOR)}

# Intrinsics whose C name is the IR name plus the precision suffix (expf, exp).
_PLAIN_MATH = {"exp", "exp2", "log", "log2", "log1p", "expm1", "sqrt", "tanh", "erf", "floor",
               "ceil", "trunc", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
               "asinh", "acosh", "atanh", "pow", "atan2", "fmod"}
_RENAMED_MATH = {"abs": "fabs", "round": "nearbyint"}   # nearbyint rounds half to even

_RESERVED = set("""
auto break case char const continue default do double else enum extern float for goto if inline
int long register restrict return short signed sizeof static struct switch typedef union unsigned
void volatile while bool true false NULL INFINITY NAN main free malloc memcpy posix_memalign
size_t int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t isnan isinf half
""".split()) | _PLAIN_MATH | {n + "f" for n in _PLAIN_MATH} | {"fabs", "fabsf", "nearbyint",
                                                               "nearbyintf"}


def c_identifier(name: str) -> str:
    """`name` made into a valid C identifier that cannot collide with generated names."""
    ident = re.sub(r"[^A-Za-z0-9_]", "_", name) or "v"
    if ident[0].isdigit():
        ident = "v" + ident
    if ident in _RESERVED or ident.startswith(("tf_", "__")):
        ident = "v_" + ident
    return ident


class CLikePrinter:
    """Prints PrimFuncs as C-family source.  Subclasses fill in the dialect hooks."""

    def __init__(self, dialect: Dialect):
        self.dialect = dialect
        self.helpers: dict[str, str] = {}   # helper name -> definition, in first-use order
        self._reset()

    # Per-function state ------------------------------------------------------------------------
    def _reset(self) -> None:
        self.lines: list[str] = []
        self.indent = 0
        self.names: dict = {}          # Var -> C identifier (innermost binding)
        self.used: set[str] = set()
        self.buffers: dict = {}        # data Var -> (C identifier, Buffer)
        self.buffers_by_name: dict = {}
        self.nonneg: set = set()       # Vars known to be >= 0
        self.func_name = ""

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.indent + line)

    @contextlib.contextmanager
    def block(self, header: str) -> Iterator[None]:
        self.emit(header + " {")
        self.indent += 1
        yield
        self.indent -= 1
        self.emit("}")

    def fresh(self, hint: str) -> str:
        base = c_identifier(hint)
        name, k = base, 0
        while name in self.used:
            k += 1
            name = f"{base}_{k}"
        self.used.add(name)
        return name

    @contextlib.contextmanager
    def bind(self, var: E.Var, nonneg: bool = False) -> Iterator[str]:
        """Give `var` a fresh C name for the duration of the block."""
        name = self.fresh(var.name)
        saved = self.names.get(var)
        self.names[var] = name
        if nonneg:
            self.nonneg.add(var)
        try:
            yield name
        finally:
            if saved is None:
                self.names.pop(var, None)
            else:
                self.names[var] = saved
            if nonneg:
                self.nonneg.discard(var)

    def bind_buffer(self, buf: N.Buffer) -> str:
        name = self.fresh(buf.data.name or buf.name)
        self.buffers[buf.data] = (name, buf)
        self.buffers_by_name.setdefault(buf.name, []).append(name)
        return name

    def buffer_ref(self, buf: N.Buffer) -> str:
        """The C pointer name of `buf` (looked up by its data variable, then by its name)."""
        entry = self.buffers.get(buf.data)
        if entry is not None:
            return entry[0]
        candidates = self.buffers_by_name.get(buf.name, [])
        if len(candidates) == 1:
            return candidates[0]
        raise CodegenError(f"{self.func_name}: buffer {buf.name!r} is neither a parameter nor "
                           "allocated by an enclosing Allocate")

    def single_index(self, buf: N.Buffer, indices: tuple, what: str) -> E.Expr:
        if len(indices) != 1:
            raise CodegenError(
                f"{self.func_name}: {what} of buffer {buf.name!r} has {len(indices)} indices; "
                "the C printer needs flattened buffers (one index) — run storage flattening first")
        return indices[0]

    # Types -------------------------------------------------------------------------------------
    def scalar_type(self, dtype: str) -> str:
        try:
            return self.dialect.scalar_types[dt.element_of(dtype)]
        except KeyError:
            raise CodegenError(f"{self.func_name}: dtype {dtype!r} has no {self.dialect.name} type")

    def value_type(self, dtype: str, e: E.Expr | None = None) -> str:
        """The C type of a value of `dtype` (vector types come from the vector hooks)."""
        if dt.lanes(dtype) > 1:
            return self.vector_type_of(e, dtype)
        return self.scalar_type(dtype)

    # Expressions -------------------------------------------------------------------------------
    def expr(self, e: E.Expr, min_prec: int = 0) -> str:
        text, prec = self.expr_prec(e)
        return f"({text})" if prec < min_prec else text

    def expr_prec(self, e: E.Expr) -> tuple[str, int]:
        """(text, precedence of its outermost operator)."""
        if dt.lanes(e.dtype) > 1:
            return self.vector_expr(e), ATOM
        method = getattr(self, "print_" + type(e).__name__, None)
        if method is not None:
            return method(e)
        if type(e) in _BINARY:
            return self.print_binary(e)
        raise CodegenError(f"{self.func_name}: cannot print {type(e).__name__} ({e}) in "
                           f"{self.dialect.name}")

    def print_Var(self, e: E.Var):
        name = self.names.get(e)
        if name is None:
            raise CodegenError(f"{self.func_name}: variable {e.name!r} is used but not bound "
                               "(a shape variable missing from PrimFunc.shape_vars?)")
        return name, ATOM

    def print_IntImm(self, e: E.IntImm):
        return self.int_literal(e.value, e.dtype)

    def print_FloatImm(self, e: E.FloatImm):
        return self.float_literal(e.value, e.dtype)

    def print_StringImm(self, e: E.StringImm):
        return '"' + e.value.replace("\\", "\\\\").replace('"', '\\"') + '"', ATOM

    def print_Cast(self, e: E.Cast):
        return f"({self.scalar_type(e.dtype)}){self.expr(e.value, UNARY)}", UNARY

    def print_binary(self, e: E.BinaryOp):
        op, prec = _BINARY[type(e)]
        text = f"{self.expr(e.a, prec)} {op} {self.expr(e.b, prec + 1)}"
        return self.wrap_narrow(text, prec, e.dtype)

    def wrap_narrow(self, text: str, prec: int, dtype: str):
        """Cast an arithmetic result narrower than int back to its type (C promotes to int)."""
        if dt.is_integer(dtype) and dt.bits(dtype) < 32:
            return f"({self.scalar_type(dtype)})({text})", UNARY
        return text, prec

    def print_FloorDiv(self, e: E.FloorDiv):
        return self._floor_op(e, "/", "floordiv")

    def print_FloorMod(self, e: E.FloorMod):
        return self._floor_op(e, "%", "floormod")

    def _floor_op(self, e: E.BinaryOp, c_op: str, kind: str):
        if dt.is_float(e.dtype):
            a, b = self.expr(e.a, 0), self.expr(e.b, 0)
            return self.call_helper(f"{kind}_{e.dtype}", self.float_floor_helper(kind, e.dtype), [a, b])
        if is_nonneg(e.a, self.nonneg) and is_nonneg(e.b, self.nonneg):
            # Floor and truncating division agree when both operands are >= 0.
            text = f"{self.expr(e.a, MUL)} {c_op} {self.expr(e.b, MUL + 1)}"
            return self.wrap_narrow(text, MUL, e.dtype)
        a, b = self.expr(e.a, 0), self.expr(e.b, 0)
        return self.call_helper(f"{kind}_{e.dtype}", self.int_floor_helper(kind, e.dtype), [a, b])

    def print_Min(self, e: E.Min):
        return self._minmax(e, "min", "<")

    def print_Max(self, e: E.Max):
        return self._minmax(e, "max", ">")

    def _minmax(self, e: E.BinaryOp, kind: str, op: str):
        t = self.scalar_type(e.dtype)
        name = f"tf_{kind}_{e.dtype}"
        self.helpers.setdefault(name, f"static inline {t} {name}({t} a, {t} b) "
                                      f"{{ return a {op} b ? a : b; }}")
        return f"{name}({self.expr(e.a)}, {self.expr(e.b)})", ATOM

    def print_Not(self, e: E.Not):
        return f"!{self.expr(e.a, UNARY)}", UNARY

    def print_Select(self, e: E.Select):
        c = self.expr(e.condition, LOR)
        return f"{c} ? {self.expr(e.true_value, COND)} : {self.expr(e.false_value, COND)}", COND

    def print_Let(self, e: E.Let):
        value = self.expr(e.value)
        with self.bind(e.var, is_nonneg(e.value, self.nonneg)) as name:
            self.bind_vector_var(e.var, e.value)
            body = self.expr(e.body)
        return f"({{ {self.value_type(e.value.dtype, e.value)} {name} = {value}; {body}; }})", ATOM

    def print_BufferLoad(self, e: N.BufferLoad):
        index = self.single_index(e.buffer, e.indices, "load")
        return f"{self.buffer_ref(e.buffer)}[{self.expr(index)}]", ATOM

    def print_Call(self, e: E.Call):
        if e.op not in E.INTRINSICS:
            raise CodegenError(f"{self.func_name}: unknown intrinsic {e.op!r}")
        arg_type = e.args[0].dtype
        if dt.is_float(arg_type) and dt.element_of(arg_type) in self.dialect.math_suffix:
            args = [self.expr(a) for a in e.args]
            return self.math_call(e.op, args, dt.element_of(arg_type)), ATOM
        # Integer (or bool) arguments: compute in double, convert the result back.
        args = [f"(double){self.expr(a, UNARY)}" for a in e.args]
        text = self.math_call(e.op, args, "float64")
        return f"({self.scalar_type(e.dtype)}){text}", UNARY

    def math_call(self, op: str, args: list[str], dtype: str) -> str:
        """C text of intrinsic `op` on already printed arguments of float type `dtype`."""
        sfx = self.dialect.math_suffix[dtype]
        one = self.float_literal(1.0, dtype)[0]
        x = args[0]
        if op in _PLAIN_MATH:
            return f"{op}{sfx}({', '.join(args)})"
        if op in _RENAMED_MATH:
            return f"{_RENAMED_MATH[op]}{sfx}({x})"
        if op == "rsqrt":
            return f"({one} / sqrt{sfx}({x}))"
        if op == "sigmoid":
            return f"({one} / ({one} + exp{sfx}(-({x}))))"
        if op in ("isnan", "isinf"):
            return f"{op}({x})"
        raise CodegenError(f"{self.func_name}: intrinsic {op!r} has no {self.dialect.name} form")

    def call_helper(self, key: str, definition_fn, args: list[str]):
        """Call helper `tf_<key>`, defining it (via `definition_fn(name)`) on first use."""
        name = "tf_" + key
        if name not in self.helpers:
            self.helpers[name] = definition_fn(name)
        return f"{name}({', '.join(args)})", ATOM

    def int_floor_helper(self, kind: str, dtype: str):
        """Floor division/modulo of integers (Python semantics; x / 0 gives 0 like NumPy)."""
        t = self.scalar_type(dtype)

        def define(name: str) -> str:
            if dt.is_uint(dtype):
                body = "a / b" if kind == "floordiv" else "a % b"
                return f"static inline {t} {name}({t} a, {t} b) {{ return b == 0 ? 0 : {body}; }}"
            # q, r from C's truncating division; step q down (r up by b) when r and b differ
            # in sign, which is exactly when truncation rounded toward zero instead of down.
            adjust = "q - fix" if kind == "floordiv" else "r + (fix ? b : 0)"
            return (f"static inline {t} {name}({t} a, {t} b) {{\n"
                    f"  if (b == 0) return 0;\n"
                    f"  {t} q = ({t})(a / b), r = ({t})(a % b);\n"
                    f"  int fix = (r != 0) & ((r < 0) != (b < 0));\n"
                    f"  return ({t})({adjust});\n}}")
        return define

    def float_floor_helper(self, kind: str, dtype: str):
        t = self.scalar_type(dtype)
        sfx = self.dialect.math_suffix.get(dtype, "")

        def define(name: str) -> str:
            result = f"floor{sfx}(a / b)" if kind == "floordiv" else f"a - floor{sfx}(a / b) * b"
            return f"static inline {t} {name}({t} a, {t} b) {{ return {result}; }}"
        return define

    # Literals ----------------------------------------------------------------------------------
    def int_literal(self, value: int, dtype: str) -> tuple[str, int]:
        scalar = dt.element_of(dtype)
        if scalar == "bool":
            return ("true" if value else "false"), ATOM
        if scalar == "int32":
            if value == -(2 ** 31):
                return "(-2147483647 - 1)", ATOM
            return str(value), (ATOM if value >= 0 else UNARY)
        if scalar == "int64":
            if value == -(2 ** 63):
                return "INT64_MIN", ATOM
            return f"INT64_C({value})", ATOM
        if scalar == "uint32":
            return f"{value}u", ATOM
        if scalar == "uint64":
            return f"UINT64_C({value})", ATOM
        return f"({self.scalar_type(scalar)}){value}", UNARY

    def float_literal(self, value: float, dtype: str) -> tuple[str, int]:
        """An exact literal of the value the IR means (`value` rounded once to `dtype`).

        The shortest decimal that round-trips at the type's precision is exact when the
        compiler parses it at that precision (float32 with an `f` suffix, float64 plain).
        float16 is printed through its float32 value, which float32 represents exactly.
        """
        scalar = dt.element_of(dtype)
        with np.errstate(over="ignore"):
            value = float(np.dtype(scalar).type(value))   # e.g. 1e20 is inf in float16
        if math.isnan(value) or math.isinf(value):
            text = "NAN" if math.isnan(value) else "INFINITY"
            text = text if scalar == "float32" else f"({self.scalar_type(scalar)}){text}"
            if value < 0:
                return "-" + text, UNARY
            return text, (ATOM if scalar == "float32" else UNARY)
        if scalar == "float64":
            text = repr(float(value))
        else:
            text = str(np.float32(value)) + "f"
        if scalar == "float16":
            return f"({self.scalar_type(scalar)}){text}", UNARY
        return text, (UNARY if text.startswith("-") else ATOM)

    # Statements --------------------------------------------------------------------------------
    def stmt(self, s: N.Stmt) -> None:
        method = getattr(self, "visit_" + type(s).__name__, None)
        if method is None:
            raise CodegenError(f"{self.func_name}: cannot print statement {type(s).__name__}")
        method(s)

    def visit_SeqStmt(self, s: N.SeqStmt) -> None:
        for x in s.seq:
            self.stmt(x)

    def visit_BufferStore(self, s: N.BufferStore) -> None:
        index = self.single_index(s.buffer, s.indices, "store")
        if dt.lanes(index.dtype) > 1 or dt.lanes(s.value.dtype) > 1:
            self.vector_store(s, index)
            return
        self.emit(f"{self.buffer_ref(s.buffer)}[{self.expr(index)}] = {self.expr(s.value, COND)};")

    def visit_IfThenElse(self, s: N.IfThenElse) -> None:
        with self.block(f"if ({self.expr(s.condition)})"):
            self.stmt(s.then_case)
        if s.else_case is not None:
            self.lines[-1] += " else {"
            self.indent += 1
            self.stmt(s.else_case)
            self.indent -= 1
            self.emit("}")

    def visit_LetStmt(self, s: N.LetStmt) -> None:
        if s.var.dtype == "handle":
            raise CodegenError(f"{self.func_name}: let-binding a pointer ({s.var.name}) is not supported")
        value = self.expr(s.value)
        ctype = self.value_type(s.value.dtype, s.value)
        with self.bind(s.var, is_nonneg(s.value, self.nonneg)) as name:
            self.bind_vector_var(s.var, s.value)
            self.emit(f"const {ctype} {name} = {value};")
            self.stmt(s.body)

    def visit_Evaluate(self, s: N.Evaluate) -> None:
        if isinstance(s.value, (E.IntImm, E.FloatImm, E.StringImm)):
            return
        self.emit(f"(void)({self.expr(s.value)});")

    def visit_AttrStmt(self, s: N.AttrStmt) -> None:
        line = self.attr_line(s.key, s.value)
        if line:
            self.emit(line)
        self.stmt(s.body)

    def attr_line(self, key: str, value) -> str:
        return f"/* attr {key} = {value} */".replace("*/*", "* /*")

    def visit_For(self, s: N.For) -> None:
        nonneg = is_nonneg(s.min, self.nonneg)
        begin = self.expr(s.min)
        end = self.expr(s.extent) if E.is_const_int(s.min, 0) else self.expr(s.min + s.extent, REL + 1)
        pragmas = self.loop_pragmas(s)
        with self.bind(s.loop_var, nonneg) as i:
            for p in pragmas:
                self.emit(p)
            with self.block(f"for ({self.scalar_type(s.loop_var.dtype)} {i} = {begin}; "
                            f"{i} < {end}; ++{i})"):
                self.loop_body(s)

    def loop_body(self, s: N.For) -> None:
        self.stmt(s.body)

    # Hooks for subclasses ----------------------------------------------------------------------
    def loop_pragmas(self, s: N.For) -> list[str]:
        if s.kind != N.SERIAL:
            raise CodegenError(f"{self.func_name}: loop {s.loop_var.name} of kind {s.kind} is not "
                               f"supported by {self.dialect.name}")
        return []

    def visit_Allocate(self, s: N.Allocate) -> None:
        raise CodegenError(f"{self.func_name}: {self.dialect.name} does not print allocations")

    def vector_expr(self, e: E.Expr) -> str:
        raise CodegenError(f"{self.func_name}: {self.dialect.name} has no vector types ({e})")

    def vector_type_of(self, e: E.Expr | None, dtype: str) -> str:
        raise CodegenError(f"{self.func_name}: {self.dialect.name} has no vector type {dtype}")

    def vector_store(self, s: N.BufferStore, index: E.Expr) -> None:
        raise CodegenError(f"{self.func_name}: {self.dialect.name} has no vector stores")

    def bind_vector_var(self, var: E.Var, value: E.Expr) -> None:
        """Record what a subclass needs to know about a vector-valued let variable."""
