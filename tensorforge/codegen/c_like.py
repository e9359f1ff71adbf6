"""One printer for the C family of languages: loop program (PrimFunc) -> C-like source text.

C, CUDA and OpenCL differ in a table (`Dialect`: type names, qualifiers, math-function suffixes,
thread indices, barrier text) plus a few hooks a subclass overrides: loop kinds, allocations,
vector expressions and the function signature.  This module prints everything that is the same
in all of them: scalar expressions with C precedence, statements, floor division, intrinsic
calls, and unique C names for IR variables (tokens are spelled by c_text.py).

Invariants the printer keeps:
* every binding site (loop, let, buffer) gets a fresh C identifier, so two IR variables that
  share a name, or one variable bound twice, never clash;
* integer results narrower than `int` are cast back to their type after each operation, so C's
  integer promotion never changes the wrap-around the IR means;
* `Select` prints as the lazy C ternary (guards against out-of-bounds loads rely on it);
* int32 loop variables are declared in the dialect's wider `index_type` (C: int64_t) when it has
  one; arithmetic on them runs at that width except where it meets loaded data or is not
  affine in a loop the compiler vectorizes, where they are read as `(int32_t)i` (see
  "Integer width" below).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Iterator

from ..ir import dtype as dt
from ..ir import expr as E
from ..tir import nodes as N
from .analysis import is_nonneg, plain_division_ok, stored_params, widenable
from .c_text import (
    ADD,
    ATOM,
    COND,
    EQ,
    LAND,
    LOR,
    MUL,
    REL,
    UNARY,
    c_identifier,
    comment,
    float_literal,
    int_literal,
    math_call,
)
from .legalize import legalize


def _power_of_two(e: E.Expr) -> int | None:
    """k when `e` is the integer constant 2**k (k >= 1)."""
    if isinstance(e, E.IntImm) and e.value > 1 and e.value & (e.value - 1) == 0:
        return int(e.value).bit_length() - 1
    return None


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
    prefetch: str = ""                 # a read prefetch of one address, "{address}" in it ("" skips them)
    includes: tuple = ()
    index_type: str = ""               # wider type for int32 loop variables ("" keeps int32)


_BINARY = {E.Add: ("+", ADD), E.Sub: ("-", ADD), E.Mul: ("*", MUL), E.Div: ("/", MUL),
           E.LT: ("<", REL), E.LE: ("<=", REL), E.GT: (">", REL), E.GE: (">=", REL),
           E.EQ: ("==", EQ), E.NE: ("!=", EQ), E.And: ("&&", LAND), E.Or: ("||", LOR)}


def _mark(known: set, var: E.Var, on: bool) -> None:
    if on:
        known.add(var)
    else:
        known.discard(var)


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
        self.wide: set = set()         # int32 Vars declared in dialect.index_type
        self.wide_mode = None          # the subtree being printed runs wide: True/False/undecided
        self.loops: list = []          # enclosing For statements, outermost first
        self.func_name = ""

    def begin_function(self, func: N.PrimFunc, symbol: str) -> tuple[N.PrimFunc, list[str]]:
        """Start printing `func`: reset the per-function state, legalize it, bind its
        parameters.  Returns the legalized function and the parameter declarations: one
        pointer per buffer (`const` when never written), then one integer per shape variable."""
        self._reset()
        self.func_name = func.name
        func = legalize(func)
        self.used.add(symbol)
        params = []
        for buf, written in zip(func.params, stored_params(func)):
            if not isinstance(buf, N.Buffer):
                raise CodegenError(f"{func.name}: parameter {buf!r} is not a Buffer")
            name = self.bind_buffer(buf)
            qualifiers = (self.dialect.pointer_qualifier + " ").lstrip() + ("" if written else "const ")
            params.append(f"{qualifiers}{self.scalar_type(buf.dtype)}* {self.dialect.restrict} {name}")
        for var in func.shape_vars:
            if not dt.is_integer(var.dtype):
                raise CodegenError(f"{func.name}: shape variable {var.name} has dtype {var.dtype}")
            self.names[var] = self.fresh(var.name)
            self.nonneg.add(var)
            params.append(f"{self.scalar_type(var.dtype)} {self.names[var]}")
        return func, params

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
    def bind(self, var: E.Var, nonneg: bool = False, wide: bool = False) -> Iterator[str]:
        """Give `var` a fresh C name for the duration of the block (`wide`: it is declared in
        the dialect's index type)."""
        name = self.fresh(var.name)
        saved, was_nonneg, was_wide = self.names.get(var), var in self.nonneg, var in self.wide
        self.names[var] = name
        _mark(self.nonneg, var, nonneg)
        _mark(self.wide, var, wide)
        try:
            yield name
        finally:
            if saved is None:
                self.names.pop(var, None)
            else:
                self.names[var] = saved
            _mark(self.nonneg, var, was_nonneg)
            _mark(self.wide, var, was_wide)

    def bind_buffer(self, buf: N.Buffer) -> str:
        name = self.fresh(buf.data.name or buf.name)
        self.buffers[buf.data] = (name, buf)
        self.buffers_by_name.setdefault(buf.name, []).append(name)
        return name

    def unbind_buffer(self, buf: N.Buffer, name: str) -> None:
        self.buffers.pop(buf.data, None)
        self.buffers_by_name[buf.name].remove(name)

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
            raise CodegenError(f"{self.func_name}: dtype {dtype!r} has no {self.dialect.name} type") from None

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
            with self.integer_width(None):    # its scalar parts decide for themselves
                return self.vector_expr(e), ATOM
        if self.wide_mode is None and self.wide and (dt.is_integer(e.dtype) or dt.is_bool(e.dtype)) \
                and not isinstance(e, (N.BufferLoad, E.IntImm)):
            with self.integer_width(widenable(e, self.lane_vars(), loads_ok=False)):
                return self._dispatch(e)
        return self._dispatch(e)

    def _dispatch(self, e: E.Expr) -> tuple[str, int]:
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
        if self.wide_mode is False and e in self.wide:
            return f"({self.scalar_type(e.dtype)}){name}", UNARY
        return name, ATOM

    # Integer width -----------------------------------------------------------------------------
    # On a 64-bit machine, int32 loop variables make the C compiler sign-extend every index
    # before it forms an address; worse, it then cannot prove that `base + lane` is contiguous
    # across a vector (a guarded load `c ? A[x + i] : 0` in a vectorized loop becomes a masked
    # gather, not a masked contiguous load), and it fails to fold conditions on the variables
    # of loops it unrolls.  So int32 loop variables are declared 64-bit and the integer
    # arithmetic on them is printed at that width, which gives the same values as long as it
    # does not overflow int32: the assumption `arith/` makes about index arithmetic already
    # (the IR's int32 indices address fewer than 2**31 elements).  Two kinds of integer expression read the
    # variables as `(int32_t)i` instead, which is the IR's int32 arithmetic exactly:
    # * a value that mixes them with loaded data (that data may be anything);
    # * one that is not affine in a loop the compiler vectorizes (the innermost, and any
    #   `vectorized` loop around it): a division, modulo, min/max, select or loaded value of
    #   the lane variable is computed lane by lane, and 32-bit lanes are twice as many per
    #   vector (a gather with 32-bit indices, vgatherdps, loads 16 floats; with 64-bit, 8).
    # The choice is made once for each maximal integer (or boolean) subtree and for each
    # buffer index, where loaded data may take part (`A[B[i] + j]`).
    def index_expr(self, e: E.Expr, min_prec: int = 0) -> str:
        """The C text of the scalar index or loop bound `e` (address arithmetic)."""
        wide = not self.wide or widenable(e, self.lane_vars(), loads_ok=True)
        with self.integer_width(wide):
            return self.expr(e, min_prec)

    @contextlib.contextmanager
    def integer_width(self, wide: bool | None) -> Iterator[None]:
        """Print the wide variables in the block at their declared width (True), as int32
        (False), or let each integer subtree decide (None)."""
        saved, self.wide_mode = self.wide_mode, wide
        try:
            yield
        finally:
            self.wide_mode = saved

    def lane_vars(self) -> tuple:
        """The loop variables the C compiler may vectorize over at this point: the innermost
        loop's and those of enclosing vectorized loops."""
        inner = tuple(s.loop_var for s in self.loops[-1:])
        return inner + tuple(s.loop_var for s in self.loops[:-1] if s.kind == N.VECTORIZED)

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
        if plain_division_ok(e.a, e.b, self.nonneg):
            # Floor and truncating division agree when both operands are >= 0.
            shift = _power_of_two(e.b)
            if shift is not None and dt.is_int(e.dtype) and dt.bits(e.dtype) in (32, 64):
                # ... and on a value >= 0 they are a shift or a mask, which the C compiler only
                # uses for a signed value it can prove >= 0 itself (it rarely can: an index
                # cast from the loop variable): written on the unsigned type, they are one
                # instruction instead of about five
                bits = dt.bits(e.dtype)
                t = self.scalar_type(e.dtype)
                if self.wide_mode and self.dialect.index_type and bits == 32:
                    t, bits = self.dialect.index_type, 64      # printed at the index width
                u = self.scalar_type(f"uint{bits}")
                a = f"({u}){self.expr(e.a, UNARY)}"
                text = f"{a} >> {shift}" if c_op == "/" else f"{a} & {(1 << shift) - 1}u"
                return f"({t})({text})", UNARY
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
            body = self.expr(e.body)
        return self.let_text(e, name, value, body), ATOM

    def let_text(self, e: E.Let, name: str, value: str, body: str) -> str:
        """A value bound inside an expression: a GNU statement expression (GCC, clang); a
        dialect without them overrides this (CUDA: NVRTC)."""
        return f"({{ {self.value_type(e.value.dtype, e.value)} {name} = {value}; {body}; }})"

    def print_BufferLoad(self, e: N.BufferLoad):
        index = self.single_index(e.buffer, e.indices, "load")
        return f"{self.buffer_ref(e.buffer)}[{self.index_expr(index)}]", ATOM

    def print_AddressOf(self, e: N.AddressOf):
        index = self.single_index(e.load.buffer, e.load.indices, "load")
        return f"{self.buffer_ref(e.load.buffer)} + {self.index_expr(index, ADD + 1)}", ADD

    def print_CallExtern(self, e: N.CallExtern):
        args = [self.print_AddressOf(a)[0] if isinstance(a, N.AddressOf) else self.expr(a) for a in e.args]
        return f"{e.name}({', '.join(args)})", ATOM

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
        text = math_call(op, args, self.dialect.math_suffix[dtype], self.float_literal(1.0, dtype)[0])
        if text is None:
            raise CodegenError(f"{self.func_name}: intrinsic {op!r} has no {self.dialect.name} form")
        return text

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
            # C's division truncates; step the quotient down (the remainder up by b) when the
            # remainder is nonzero and its sign differs from b's: exactly when truncation
            # rounded toward zero instead of down.
            result = f"({t})(a / b) - fix" if kind == "floordiv" else "r + (fix ? b : 0)"
            return (f"static inline {t} {name}({t} a, {t} b) {{\n"
                    f"  if (b == 0) return 0;\n"
                    f"  {t} r = ({t})(a % b);\n"
                    f"  int fix = (r != 0) & ((r < 0) != (b < 0));\n"
                    f"  return ({t})({result});\n}}")
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
        return int_literal(value, dtype, self.scalar_type)

    def float_literal(self, value: float, dtype: str) -> tuple[str, int]:
        return float_literal(value, dtype, self.scalar_type)

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
        self.emit(f"{self.buffer_ref(s.buffer)}[{self.index_expr(index)}] = {self.expr(s.value, COND)};")

    def visit_IfThenElse(self, s: N.IfThenElse) -> None:
        if dt.lanes(s.condition.dtype) > 1:
            raise CodegenError(f"{self.func_name}: if-statement on a vector condition "
                               f"({s.condition}); only Select takes a vector condition")
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
            self.emit(f"const {ctype} {name} = {value};")
            self.stmt(s.body)

    def visit_Evaluate(self, s: N.Evaluate) -> None:
        if isinstance(s.value, (E.IntImm, E.FloatImm, E.StringImm)):
            return
        self.emit(f"(void)({self.expr(s.value)});")

    def visit_Prefetch(self, s: N.Prefetch) -> None:
        """A cache hint, where the dialect has one; without it nothing is printed."""
        if self.dialect.prefetch:
            self.emit(self.dialect.prefetch.format(address=self.print_AddressOf(N.AddressOf(s.load))[0]) + ";")

    def visit_Tensorized(self, s: N.Tensorized) -> None:
        """A tensor intrinsic: its helper functions go into the source once, its code here."""
        for name, text in s.helpers:
            self.helpers.setdefault(name, text)
        self.emit(comment(f"tensorized: {s.intrin}.{s.phase}"))
        self.stmt(s.impl)

    def visit_AttrStmt(self, s: N.AttrStmt) -> None:
        line = self.attr_line(s.key, s.value)
        if line:
            self.emit(line)
        self.stmt(s.body)

    def attr_line(self, key: str, value) -> str:
        return comment(f"attr {key} = {value}")

    def visit_For(self, s: N.For) -> None:
        nonneg = is_nonneg(s.min, self.nonneg)
        begin = self.index_expr(s.min)
        end = self.index_expr(s.extent) if E.is_const_int(s.min, 0) else self.index_expr(
            s.min + s.extent, REL + 1)
        pragmas = self.loop_pragmas(s)
        wide = bool(self.dialect.index_type) and s.loop_var.dtype == "int32"
        ctype = self.dialect.index_type if wide else self.scalar_type(s.loop_var.dtype)
        with self.bind(s.loop_var, nonneg, wide) as i:
            for p in pragmas:
                self.emit(p)
            self.loops.append(s)
            try:
                with self.block(f"for ({ctype} {i} = {begin}; {i} < {end}; ++{i})"):
                    self.loop_body(s)
            finally:
                self.loops.pop()

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
