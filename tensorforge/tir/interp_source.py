"""PrimFunc -> the text of one Python function over NumPy arrays (what `tir/interp.py` runs).

`translate(func)` returns the source, the constants and run-time helpers it refers to, and the
order of the shape-variable arguments.  Values are represented so that results match C:
- integer scalars are Python ints kept inside their dtype's range: Add/Sub/Mul/casts wrap like C
  two's complement unless interval arithmetic proves the result fits (then the text stays plain);
- float scalars are NumPy scalars of their exact dtype (np.float32, np.float16, ...), so every
  operation rounds in that dtype; float constants are pre-built NumPy scalars;
- vectors ("float32x16") are 1-D NumPy arrays of their element dtype (NumPy wraps integer lanes);
- buffer indices are checked (0 <= i < size) unless the interval analysis proves them in range,
  so a negative index raises instead of silently wrapping around as NumPy indexing would;
- only the chosen arm of a scalar Select and the needed operand of && / || are evaluated, so
  guards protect out-of-bounds loads as in C;
- expressions nested deeper than the Python parser allows are split into temporaries, where
  that does not change what is evaluated.
"""
from __future__ import annotations

import keyword
import math
import re
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..ir import dtype as dt
from ..ir import expr as E
from ..ir.functor import post_order_visit
from . import nodes as N

Interval = tuple  # (lo, hi) of Python ints, for integer and bool values; None for floats


@dataclass
class Translation:
    source: str            # defines `kernel(*param_arrays, *shape_vars)`
    namespace: dict        # the globals it needs: NumPy, run-time helpers, constants
    shape_vars: tuple      # the Vars passed after the arrays, in order


def translate(func: N.PrimFunc) -> Translation:
    tr = _Translator(func)
    source = tr.translate()
    namespace = runtime_namespace(func)
    namespace.update(tr.constants)
    return Translation(source, namespace, tuple(tr.shape_vars))


def shape_text(buf: N.Buffer) -> str:
    return "(" + ", ".join(str(s) for s in buf.shape) + ("," if buf.ndim == 1 else "") + ")"


# --------------------------------------------------------------------------------------------
# Run-time support used by the generated code


def runtime_namespace(func: N.PrimFunc) -> dict:
    # The closures keep names and texts only: a kernel must not keep its PrimFunc (the cache key)
    # alive.
    func_name = func.name
    params = [(b.name, [str(s) for s in b.shape]) for b in func.params]

    def oob(buffer: str, where: str, index: Any, size: Any) -> None:
        raise IndexError(f"{func_name}: index {index} is out of bounds for {where} of buffer "
                         f"'{buffer}' (size {size})")

    def check_vec(index: np.ndarray, size: int, buffer: str, where: str) -> np.ndarray:
        if index.size and (index.min() < 0 or index.max() >= size):
            bad = index[(index < 0) | (index >= size)]
            oob(buffer, where, f"{bad.tolist()} (of the vector index {index.tolist()})", size)
        return index

    def shape_mismatch(param: int, dim: int, expected: Any, given: Any) -> None:
        name, shape = params[param]
        raise ValueError(f"argument {param} ('{name}') of {func_name}: dimension {dim} should "
                         f"be {shape[dim]} = {expected}, got {given}")

    names = {"_" + elem: dt.to_numpy(elem).type for elem in _extension_types(func)}
    return names | {
        "np": np, "_oob": oob, "_check_vec": check_vec, "_shape_mismatch": shape_mismatch,
        "_alloc": _alloc, "_tdiv": _tdiv, "_ramp": _ramp, "_erf": _erf, "_ffloormod": _ffloormod,
        "_fmin": _fmin, "_fmax": _fmax, "_vmin": _vmin, "_vmax": _vmax,
    }


def _alloc(shape: tuple, dtype: str) -> np.ndarray:
    """A fresh buffer filled with a garbage pattern (NaN for floats) so reads of uninitialized
    memory show up in results instead of passing by luck with zeros."""
    arr = np.empty(shape, dtype)
    if arr.dtype.kind == "f":
        arr.fill(np.nan)
    elif arr.dtype.kind == "b":
        arr.fill(True)
    else:
        arr.view(np.uint8).fill(0xA5)
    return arr


def _tdiv(a, b):
    """C integer division (truncates toward zero), for Python ints and integer arrays."""
    q = a // b
    return q + (((a - q * b) != 0) & ((a < 0) != (b < 0)))


def _fmin(a, b):
    return a if a < b else b


def _fmax(a, b):
    return a if a > b else b


def _vmin(a, b):
    return np.where(a < b, a, b)


def _vmax(a, b):
    return np.where(a > b, a, b)


def _ffloormod(a, b):
    return a - np.floor(a / b) * b


def _ramp(base: int, stride: int, lanes: int, dtype: np.dtype | type) -> np.ndarray:
    return (base + stride * np.arange(lanes, dtype=np.int64)).astype(dtype)


try:  # NumPy has no erf; SciPy's is vectorized and accurate.
    from scipy.special import erf as _scipy_erf

    def _erf(x):
        return _scipy_erf(x)
except ImportError:  # pragma: no cover - depends on the environment
    _erf_vec = np.vectorize(math.erf, otypes=[np.float64])

    def _erf(x):
        return _erf_vec(x)


# --------------------------------------------------------------------------------------------
# Integer ranges


def _dtype_range(dtype: str) -> Interval:
    if dt.is_bool(dtype):
        return (0, 1)
    lo, hi = dt.value_range(dtype)
    return (int(lo), int(hi))


def _fits(iv: Interval | None, dtype: str) -> bool:
    lo, hi = _dtype_range(dtype)
    return iv is not None and lo <= iv[0] and iv[1] <= hi


def _corners(fn: Callable, a: Interval, b: Interval) -> Interval:
    vals = [fn(x, y) for x in a for y in b]
    return (min(vals), max(vals))


def _union(a: Interval | None, b: Interval | None) -> Interval | None:
    if a is None or b is None:
        return None
    return (min(a[0], b[0]), max(a[1], b[1]))


def _c_div(x: int, y: int) -> int:
    q = abs(x) // abs(y)
    return q if (x < 0) == (y < 0) else -q


def _raw_interval(cls: type, a: Interval, b: Interval) -> Interval | None:
    """The exact range of `a op b` before wrapping, or None when unknown (division by an
    interval that holds zero)."""
    if cls is E.Add:
        return (a[0] + b[0], a[1] + b[1])
    if cls is E.Sub:
        return (a[0] - b[1], a[1] - b[0])
    if cls is E.Mul:
        return _corners(lambda x, y: x * y, a, b)
    if cls is E.Min:
        return (min(a[0], b[0]), min(a[1], b[1]))
    if cls is E.Max:
        return (max(a[0], b[0]), max(a[1], b[1]))
    if b[0] <= 0 <= b[1]:
        return None
    if cls is E.FloorDiv:
        return _corners(lambda x, y: x // y, a, b)
    if cls is E.Div:
        return _corners(_c_div, a, b)
    if cls is E.FloorMod:
        return (0, b[1] - 1) if b[0] > 0 else (b[0] + 1, 0)
    return None


# --------------------------------------------------------------------------------------------
# Translation: IR -> Python text


# Python operator precedence, low to high; a fragment is parenthesized when it is used where a
# tighter-binding operand is needed.  Keeping parentheses minimal keeps deep expressions within
# the parser's nesting limit.
P_WALRUS, P_COND, P_OR, P_AND, P_NOT, P_CMP, P_BOR, P_BAND, P_ADD, P_MUL, P_UNARY, P_ATOM = range(12)
_MAX_DEPTH = 48  # deeper expressions are split into temporaries where evaluation order allows


@dataclass
class _Frag:
    """A Python expression: text, precedence, nesting depth, integer range (None for floats)."""

    text: str
    prec: int = P_ATOM
    depth: int = 0
    iv: Interval | None = None

    def at(self, prec: int) -> str:
        return self.text if self.prec >= prec else f"({self.text})"


_INT_BINOPS = {E.Add: ("+", P_ADD), E.Sub: ("-", P_ADD), E.Mul: ("*", P_MUL),
               E.FloorDiv: ("//", P_MUL), E.FloorMod: ("%", P_MUL)}
_CMP = {E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">="}
_UFUNC = {
    "exp": "np.exp", "exp2": "np.exp2", "log": "np.log", "log2": "np.log2", "log1p": "np.log1p",
    "expm1": "np.expm1", "sqrt": "np.sqrt", "tanh": "np.tanh", "abs": "np.abs",
    "floor": "np.floor", "ceil": "np.ceil", "round": "np.rint", "trunc": "np.trunc",
    "sin": "np.sin", "cos": "np.cos", "tan": "np.tan", "asin": "np.arcsin", "acos": "np.arccos",
    "atan": "np.arctan", "sinh": "np.sinh", "cosh": "np.cosh", "asinh": "np.arcsinh",
    "acosh": "np.arccosh", "atanh": "np.arctanh", "isnan": "np.isnan", "isinf": "np.isinf",
    "pow": "np.power", "atan2": "np.arctan2", "fmod": "np.fmod", "erf": "_erf",
}
_RESERVED = set(keyword.kwlist) | {"np", "range", "min", "max", "int", "abs", "kernel", "print"}


def _describe(value: Any) -> str:
    """A constant for the header comment of the generated source."""
    if np.ndim(value) == 0:
        return f"{value.dtype}({value.item()!r})"
    lanes = value.tolist()
    step = lanes[1] - lanes[0]
    if all(b - a == step for a, b in zip(lanes, lanes[1:])):
        text = f"broadcast({lanes[0]!r})" if step == 0 else f"ramp({lanes[0]!r}, {step!r})"
    else:
        text = repr(lanes)
    return f"{value.dtype}x{len(lanes)} {text}"


def _extension_types(func: N.PrimFunc) -> set:
    """The ml_dtypes types (bfloat16, float8, int4, ...) that `func` uses; their NumPy types come
    from ml_dtypes, imported only when some are used."""
    found: set = set()

    def visit(node) -> None:
        elem = dt.element_of(getattr(node, "dtype", "") or "")
        if elem in dt.SCALAR_TYPES and dt.is_extension(elem):
            found.add(elem)

    post_order_visit(func.body, visit)
    return found | {dt.element_of(b.dtype) for b in func.params if dt.is_extension(b.dtype)}


def _np(dtype: str) -> str:
    elem = dt.element_of(dtype)
    return "_" + elem if dt.is_extension(elem) else "np." + elem     # ml_dtypes' types, not NumPy's


def _lanes(e: E.Expr) -> int:
    return dt.lanes(e.dtype)


class _Translator:
    """One walk over the statements, emitting indented lines.  Each expression becomes a `_Frag`
    that carries, besides its text, the integer interval of its values: that interval decides
    whether an integer result needs wrapping and whether an index needs a bounds check.  Scopes
    (loop variables, lets, allocations) are tracked so that names are unique per object and a
    use out of scope is reported here rather than as a NameError at run time."""

    def __init__(self, func: N.PrimFunc):
        self.func = func
        self.lines: list[str] = []
        self.indent = 1
        self.taken: set[str] = set(_RESERVED)
        self.var_names: dict = {}       # Var -> identifier
        self.var_iv: dict = {}          # Var -> Interval of its values (integers only)
        self.bound: set = set()         # Vars in scope
        self.live: set = set(func.params)  # Buffers in scope
        self.buf_names: dict = {}       # Buffer -> identifier
        self.buf_used: dict = {}        # Buffer -> set of derived names used ("f", "n", "d0", ...)
        self.constants: dict = {}       # identifier -> NumPy scalar
        self.const_names: dict = {}     # (dtype, repr(value)) -> identifier
        self.temps = 0
        self.lazy = 0                   # > 0 inside code that may not run (Select arms, && rhs)
        self.pending: list[str] = []    # statements hoisted out of the current statement
        self.shape_vars: list = []

    # ---- names ---------------------------------------------------------------------------------
    def _fresh(self, hint: str, suffixes: tuple = ("",)) -> str:
        base = re.sub(r"\W", "_", hint) or "v"
        if base[0].isdigit() or base[0] == "_":
            base = "v" + base
        name, k = base, 0
        while any(name + s in self.taken for s in suffixes):
            k += 1
            name = f"{base}_{k}"
        self.taken.update(name + s for s in suffixes)
        return name

    def var_name(self, v: E.Var) -> str:
        name = self.var_names.get(v)
        if name is None:
            name = self.var_names[v] = self._fresh(v.name)
        return name

    def buf_name(self, b: N.Buffer, part: str = "") -> str:
        base = self.buf_names.get(b)
        if base is None:
            parts = ("", "_f", "_n") + tuple(f"_d{i}" for i in range(b.ndim))
            base = self.buf_names[b] = self._fresh(b.name, parts)
            self.buf_used[b] = set()
        if part:
            self.buf_used[b].add(part)
            return f"{base}_{part}"
        return base

    def temp(self, hint: str = "t") -> str:
        self.temps += 1
        return f"_{hint}{self.temps}"

    def constant(self, dtype: str, value: Any) -> str:
        """A pre-built NumPy constant: a scalar of `dtype`, or for a vector dtype a read-only
        array (`value` is then a tuple of lanes)."""
        key = (dtype, repr(value))
        name = self.const_names.get(key)
        if name is None:
            name = self.const_names[key] = f"_k{len(self.const_names)}"
            if dt.lanes(dtype) > 1:
                arr = np.array(value, dt.to_numpy(dtype))
                arr.flags.writeable = False
                self.constants[name] = arr
            else:
                self.constants[name] = dt.to_numpy(dtype).type(value)
        return name

    # ---- whole function ------------------------------------------------------------------------
    def translate(self) -> str:
        f = self.func
        for b in f.params:
            self.buf_name(b)
        self.shape_vars = list(f.shape_vars)
        for b in f.params:
            for s in b.shape:
                if isinstance(s, E.Var) and s not in self.shape_vars:
                    self.shape_vars.append(s)
        for v in self.shape_vars:
            self.var_iv[v] = (0, _dtype_range(v.dtype)[1])
            self.bound.add(v)
        for v in self.shape_vars:
            if not any(s is v for b in f.params for s in b.shape):
                raise ValueError(f"{f.name}: shape variable '{v.name}' is not a dimension of any "
                                 "parameter, so it cannot be bound from the arrays")
        self.stmt(f.body)
        body = self.lines
        self.lines = []
        for i, b in enumerate(f.params):
            for d, s in enumerate(b.shape):
                if not isinstance(s, (E.IntImm, E.Var)):
                    self.check_dim(i, d, b, s)
            self.buffer_views(b)
        prologue = self.lines
        args = [self.buf_name(b) for b in f.params] + [self.var_name(v) for v in self.shape_vars]
        head = [f"# {f.name}, translated by tensorforge.tir.interp"]
        head += [f"# {k} = {_describe(v)}" for k, v in self.constants.items()]
        lines = head + [f"def kernel({', '.join(args)}):"] + prologue + body
        if not prologue and not body:
            lines.append("    pass")
        return "\n".join(lines) + "\n"

    def check_dim(self, i: int, d: int, b: N.Buffer, s: E.Expr) -> None:
        """A computed dimension (e.g. `n * 2`) is checked once the variables are bound."""
        want = self.expr(s).text
        self.flush(f"if {self.buf_name(b)}.shape[{d}] != {want}:")
        self.emit(f"    _shape_mismatch({i}, {d}, {want}, {self.buf_name(b)}.shape[{d}])")

    def buffer_views(self, b: N.Buffer) -> None:
        name, used = self.buf_name(b), self.buf_used[b]
        if "f" in used:
            self.emit(f"{name}_f = {name}.reshape(-1)")
        if "n" in used:
            self.emit(f"{name}_n = {name}.size")
        for d in range(b.ndim):
            if f"d{d}" in used:
                self.emit(f"{name}_d{d} = {name}.shape[{d}]")

    # ---- statements ----------------------------------------------------------------------------
    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def flush(self, line: str) -> None:
        """Emit `line` after the temporaries its expressions hoisted."""
        for p in self.pending:
            self.emit(p)
        self.pending = []
        self.emit(line)

    def block(self, s: N.Stmt) -> None:
        self.indent += 1
        start = len(self.lines)
        self.stmt(s)
        if len(self.lines) == start:
            self.emit("pass")
        self.indent -= 1

    def stmt(self, s: N.Stmt) -> None:
        method = getattr(self, "stmt_" + type(s).__name__, None)
        if method is None:
            raise NotImplementedError(f"{self.func.name}: the interpreter cannot run "
                                      f"{type(s).__name__} statements")
        method(s)

    def stmt_SeqStmt(self, s: N.SeqStmt) -> None:
        for x in s.seq:
            self.stmt(x)

    def stmt_For(self, s: N.For) -> None:
        if s.kind == N.THREAD_BINDING:
            raise NotImplementedError(
                f"{self.func.name}: loop '{s.loop_var.name}' is bound to "
                f"{s.thread_tag or 'a thread'}; "
                "the reference interpreter runs CPU loop programs only (GPU thread bindings "
                "need the threads to run concurrently)")
        lo, ext = self.expr(s.min), self.expr(s.extent)
        lo_iv, ext_iv = lo.iv or _dtype_range(s.min.dtype), ext.iv or _dtype_range(s.extent.dtype)
        var = s.loop_var
        name = self.var_name(var)
        if E.is_const_int(s.min, 0):
            rng = f"range({ext.text})"
        elif isinstance(s.min, (E.IntImm, E.Var)):
            rng = f"range({lo.text}, {lo.at(P_ADD)} + {ext.at(P_ADD + 1)})"
        else:
            start = self.temp("lo")
            self.flush(f"{start} = {lo.text}")
            rng = f"range({start}, {start} + {ext.at(P_ADD + 1)})"
        self.flush(f"for {name} in {rng}:")
        saved = self.var_iv.get(var), var in self.bound
        self.var_iv[var] = (lo_iv[0], max(lo_iv[0], lo_iv[1] + ext_iv[1] - 1))
        self.bound.add(var)
        self.block(s.body)
        self.restore(var, saved)

    def restore(self, var: E.Var, saved: tuple) -> None:
        iv, was_bound = saved
        if iv is None:
            self.var_iv.pop(var, None)
        else:
            self.var_iv[var] = iv
        if not was_bound:
            self.bound.discard(var)

    def stmt_LetStmt(self, s: N.LetStmt) -> None:
        value = self.expr(s.value)
        self.flush(f"{self.var_name(s.var)} = {value.text}")
        saved = self.var_iv.get(s.var), s.var in self.bound
        if not dt.is_float(s.var.dtype):
            self.var_iv[s.var] = value.iv or _dtype_range(s.var.dtype)
        self.bound.add(s.var)
        self.stmt(s.body)
        self.restore(s.var, saved)

    def stmt_IfThenElse(self, s: N.IfThenElse) -> None:
        self.flush(f"if {self.expr(s.condition).text}:")
        self.block(s.then_case)
        if s.else_case is not None:
            self.emit("else:")
            self.block(s.else_case)

    def stmt_Evaluate(self, s: N.Evaluate) -> None:
        if isinstance(s.value, (E.IntImm, E.FloatImm, E.StringImm)):
            return
        self.flush(self.expr(s.value).text)

    def stmt_Prefetch(self, s: N.Prefetch) -> None:
        """A cache hint: nothing to compute."""

    def stmt_Tensorized(self, s: N.Tensorized) -> None:
        self.stmt(s.reference)      # the intrinsic's own compute, over the same regions

    def stmt_AttrStmt(self, s: N.AttrStmt) -> None:
        self.stmt(s.body)

    def stmt_Allocate(self, s: N.Allocate) -> None:
        b = s.buffer
        if dt.lanes(b.dtype) != 1:
            raise NotImplementedError(f"{self.func.name}: buffer '{b.name}' has the vector dtype "
                                      f"{b.dtype}")
        shape = [self.expr(x).text for x in b.shape]
        name = self.buf_name(b)
        dims = ", ".join(shape) + ("," if len(shape) == 1 else "")
        self.flush(f"{name} = _alloc(({dims}), {dt.element_of(b.dtype)!r})")
        at = len(self.lines)
        was_live = b in self.live
        self.live.add(b)
        self.stmt(s.body)
        if not was_live:
            self.live.discard(b)
        body = self.lines[at:]
        del self.lines[at:]
        self.buffer_views(b)
        self.lines.extend(body)

    def stmt_BufferStore(self, s: N.BufferStore) -> None:
        value = self.expr(s.value)
        target, _ = self.access(s.buffer, s.indices, store=True)
        self.flush(f"{target} = {value.text}")

    # ---- buffer access -------------------------------------------------------------------------
    def access(self, b: N.Buffer, indices: tuple, store: bool) -> tuple[str, int]:
        """The text of `b[indices]` and its nesting depth: a flat view for one index, the array
        itself for one index per dimension; each index is bounds-checked unless provably in
        range.  A scalar integer load uses `.item` so that it yields a Python int."""
        if b not in self.live:
            raise ValueError(f"{self.func.name}: buffer '{b.name}' is neither a parameter nor "
                             "allocated around this access")
        frags = [self.expr(i) for i in indices]
        depth = max((f.depth for f in frags), default=0) + 2
        if len(indices) == 1 and b.ndim != 1:
            size: int | None = 1
            for s in b.shape:
                size = size * s.value if isinstance(s, E.IntImm) and size is not None else None
            target = self.buf_name(b, "f")
            index = self.checked(frags[0], indices[0], size, b, "n", "the flattened buffer")
        elif len(indices) == b.ndim:
            subs = []
            for d, (frag, idx) in enumerate(zip(frags, indices)):
                extent = b.shape[d].value if isinstance(b.shape[d], E.IntImm) else None
                subs.append(self.checked(frag, idx, extent, b, f"d{d}", f"dimension {d}"))
            target = self.buf_name(b)
            index = ", ".join(subs)
        else:
            raise ValueError(f"{self.func.name}: buffer '{b.name}' of shape {shape_text(b)} is "
                             f"accessed with {len(indices)} indices")
        if not store and not dt.is_float(b.dtype) and all(_lanes(i) == 1 for i in indices):
            return f"{target}.item({index})", depth
        return f"{target}[{index or '()'}]", depth

    def checked(self, frag: _Frag, idx: E.Expr, extent: int | None, b: N.Buffer, part: str,
                where: str) -> str:
        iv = frag.iv
        if iv is not None and iv[0] >= 0 and extent is not None and iv[1] < extent:
            return frag.text
        size = str(extent) if extent is not None else self.buf_name(b, part)
        if _lanes(idx) > 1:
            return f"_check_vec({frag.text}, {size}, {b.name!r}, {where!r})"
        t = self.temp()
        return (f"{t} if 0 <= ({t} := {frag.text}) < {size} "
                f"else _oob({b.name!r}, {where!r}, {t}, {size})")

    # ---- expressions ---------------------------------------------------------------------------
    def expr(self, e: E.Expr) -> _Frag:
        method = getattr(self, "expr_" + type(e).__name__, None)
        if method is not None:
            frag = method(e)
        elif isinstance(e, E.CmpOp):
            frag = self.expr_compare(e)
        elif isinstance(e, E.BinaryOp):
            frag = self.expr_binary(e)
        else:
            raise NotImplementedError(f"{self.func.name}: the interpreter cannot evaluate "
                                      f"{type(e).__name__} ({e}); lower it first")
        if frag.depth > _MAX_DEPTH and not self.lazy:
            t = self.temp("h")
            self.pending.append(f"{t} = {frag.text}")
            frag = _Frag(t, P_ATOM, 0, frag.iv)
        return frag

    def int_result(self, text: str, prec: int, depth: int, raw: Interval | None, dtype: str) -> _Frag:
        """Wrap a scalar integer result into `dtype` like C unless `raw` proves it fits."""
        if _fits(raw, dtype):
            return _Frag(text, prec, depth, raw)
        lo, hi = _dtype_range(dtype)
        mask = hi - lo
        inner = _Frag(text, prec)
        if lo == 0:
            return _Frag(f"{inner.at(P_BAND + 1)} & {mask}", P_BAND, depth + 1, (lo, hi))
        return _Frag(f"({inner.at(P_ADD)} + {-lo} & {mask}) - {-lo}", P_ADD, depth + 1, (lo, hi))

    def expr_Var(self, e: E.Var) -> _Frag:
        if e not in self.bound:
            raise ValueError(f"{self.func.name}: variable '{e.name}' is used outside its scope "
                             "(not a loop variable, let binding or shape variable)")
        return _Frag(self.var_name(e), iv=self.var_iv.get(e))

    def expr_IntImm(self, e: E.IntImm) -> _Frag:
        if dt.is_bool(e.dtype):
            return _Frag("True" if e.value else "False", iv=(int(bool(e.value)),) * 2)
        lo, hi = _dtype_range(e.dtype)
        v = (e.value - lo) % (hi - lo + 1) + lo  # a literal out of range wraps like C
        return _Frag(str(v), P_ATOM if v >= 0 else P_UNARY, 0, (v, v))

    def expr_FloatImm(self, e: E.FloatImm) -> _Frag:
        return _Frag(self.constant(e.dtype, e.value))

    def expr_StringImm(self, e: E.StringImm) -> _Frag:
        return _Frag(repr(e.value))

    def expr_Cast(self, e: E.Cast) -> _Frag:
        src = self.expr(e.value)
        to, frm = e.dtype, e.value.dtype
        if dt.lanes(to) > 1:
            text = (f"{src.at(P_ATOM)}.astype({_np(to)})" if dt.lanes(frm) > 1
                    else f"np.full({dt.lanes(to)}, {src.text}, {_np(to)})")
            return _Frag(text, P_ATOM, src.depth + 1, self.cast_iv(src.iv, frm, to))
        if dt.element_of(to) == dt.element_of(frm):
            return src
        if dt.is_bool(to):
            return _Frag(f"{src.at(P_CMP + 1)} != 0", P_CMP, src.depth, (0, 1))
        if dt.is_float(to):
            return _Frag(f"{_np(to)}({src.text})", P_ATOM, src.depth + 1)
        if dt.is_bool(frm):
            return _Frag(f"int({src.text})", P_ATOM, src.depth + 1, (0, 1))
        if dt.is_float(frm):  # int() truncates toward zero, as C does
            return self.int_result(f"int({src.text})", P_ATOM, src.depth + 1, None, to)
        return self.int_result(src.text, src.prec, src.depth, src.iv, to)

    def cast_iv(self, iv: Interval | None, frm: str, to: str) -> Interval | None:
        if dt.is_float(to):
            return None
        if dt.is_bool(to):
            return (0, 1)
        return iv if _fits(iv, to) and not dt.is_float(frm) else _dtype_range(to)

    def expr_binary(self, e: E.BinaryOp) -> _Frag:
        a, b = self.expr(e.a), self.expr(e.b)
        cls, dtype = type(e), e.dtype
        vector = dt.lanes(dtype) > 1
        depth = max(a.depth, b.depth) + 1
        if dt.is_float(dtype):
            if cls in (E.Min, E.Max):  # C's `a < b ? a : b`, which NaN operands make b
                fn = ("_v" if vector else "_f") + cls.__name__.lower()
                return _Frag(f"{fn}({a.text}, {b.text})", P_ATOM, depth)
            if cls is E.FloorDiv:
                return _Frag(f"np.floor({a.at(P_MUL)} / {b.at(P_MUL + 1)})", P_ATOM, depth + 1)
            if cls is E.FloorMod:
                return _Frag(f"_ffloormod({a.text}, {b.text})", P_ATOM, depth)
            op, prec = {E.Add: ("+", P_ADD), E.Sub: ("-", P_ADD), E.Mul: ("*", P_MUL),
                        E.Div: ("/", P_MUL)}[cls]
            return _Frag(f"{a.at(prec)} {op} {b.at(prec + 1)}", prec, depth)
        a_iv = a.iv or _dtype_range(e.a.dtype)
        b_iv = b.iv or _dtype_range(e.b.dtype)
        raw = _raw_interval(cls, a_iv, b_iv)
        if cls in (E.Min, E.Max):
            fn = ("np.minimum" if cls is E.Min else "np.maximum") if vector else cls.__name__.lower()
            text, prec = f"{fn}({a.text}, {b.text})", P_ATOM
        elif cls is E.Div:
            text, prec = f"_tdiv({a.text}, {b.text})", P_ATOM
        else:
            op, prec = _INT_BINOPS[cls]
            text = f"{a.at(prec)} {op} {b.at(prec + 1)}"
        if vector:  # NumPy arrays of the element dtype wrap by themselves
            return _Frag(text, prec, depth, raw if _fits(raw, dtype) else _dtype_range(dtype))
        return self.int_result(text, prec, depth, raw, dtype)

    def expr_compare(self, e: E.CmpOp) -> _Frag:
        vector = _lanes(e) > 1
        if isinstance(e, (E.And, E.Or)):
            a = self.expr(e.a)
            if vector:
                b = self.expr(e.b)
                fn = "np.logical_and" if isinstance(e, E.And) else "np.logical_or"
                return _Frag(f"{fn}({a.text}, {b.text})", P_ATOM, max(a.depth, b.depth) + 1, (0, 1))
            self.lazy += 1  # C's && and || do not evaluate the right operand when not needed
            b = self.expr(e.b)
            self.lazy -= 1
            op, prec = ("and", P_AND) if isinstance(e, E.And) else ("or", P_OR)
            depth = max(a.depth, b.depth) + 1
            return _Frag(f"{a.at(prec)} {op} {b.at(prec + 1)}", prec, depth, (0, 1))
        a, b = self.expr(e.a), self.expr(e.b)
        return _Frag(f"{a.at(P_CMP + 1)} {_CMP[type(e)]} {b.at(P_CMP + 1)}", P_CMP,
                     max(a.depth, b.depth) + 1, (0, 1))

    def expr_Not(self, e: E.Not) -> _Frag:
        a = self.expr(e.a)
        if _lanes(e) > 1:
            return _Frag(f"np.logical_not({a.text})", P_ATOM, a.depth + 1, (0, 1))
        return _Frag(f"not {a.at(P_NOT)}", P_NOT, a.depth + 1, (0, 1))

    def expr_Select(self, e: E.Select) -> _Frag:
        c = self.expr(e.condition)
        if _lanes(e.condition) > 1:  # all lanes of both arms are computed, as SIMD code does
            t, f = self.expr(e.true_value), self.expr(e.false_value)
            return _Frag(f"np.where({c.text}, {t.text}, {f.text})", P_ATOM,
                         max(c.depth, t.depth, f.depth) + 1, _union(t.iv, f.iv))
        self.lazy += 1
        t, f = self.expr(e.true_value), self.expr(e.false_value)
        self.lazy -= 1
        return _Frag(f"{t.at(P_COND + 1)} if {c.at(P_COND + 1)} else {f.at(P_COND)}", P_COND,
                     max(c.depth, t.depth, f.depth) + 1, _union(t.iv, f.iv))

    def expr_Let(self, e: E.Let) -> _Frag:
        value = self.expr(e.value)
        saved = self.var_iv.get(e.var), e.var in self.bound
        self.var_iv[e.var] = value.iv
        self.bound.add(e.var)
        self.lazy += 1  # the body may not be hoisted above the binding
        body = self.expr(e.body)
        self.lazy -= 1
        self.restore(e.var, saved)
        return _Frag(f"(({self.var_name(e.var)} := {value.text}), {body.text})[1]", P_ATOM,
                     max(value.depth, body.depth) + 2, body.iv)

    def expr_Ramp(self, e: E.Ramp) -> _Frag:
        base, stride = self.expr(e.base), self.expr(e.stride)
        biv = base.iv or _dtype_range(e.base.dtype)
        siv = stride.iv or _dtype_range(e.stride.dtype)
        last = [x + s * (e.lanes - 1) for x in biv for s in siv]
        raw = (min(biv[0], *last), max(biv[1], *last))
        iv = raw if _fits(raw, e.dtype) else _dtype_range(e.dtype)
        if isinstance(e.base, E.IntImm) and isinstance(e.stride, E.IntImm):
            lanes = _ramp(biv[0], siv[0], e.lanes, dt.to_numpy(e.dtype))  # constants: biv, siv are their values
            return _Frag(self.constant(e.dtype, tuple(lanes.tolist())), iv=iv)
        return _Frag(f"_ramp({base.text}, {stride.text}, {e.lanes}, {_np(e.dtype)})", P_ATOM,
                     max(base.depth, stride.depth) + 1, iv)

    def expr_Broadcast(self, e: E.Broadcast) -> _Frag:
        if isinstance(e.value, E.FloatImm):
            return _Frag(self.constant(e.dtype, (e.value.value,) * e.lanes))
        v = self.expr(e.value)
        if isinstance(e.value, E.IntImm) and v.iv is not None:  # an integer constant always has its range
            return _Frag(self.constant(e.dtype, (v.iv[0],) * e.lanes), iv=v.iv)
        return _Frag(f"np.full({e.lanes}, {v.text}, {_np(e.dtype)})", P_ATOM, v.depth + 1, v.iv)

    def expr_BufferLoad(self, e: N.BufferLoad) -> _Frag:
        text, depth = self.access(e.buffer, e.indices, store=False)
        return _Frag(text, P_ATOM, depth, None if dt.is_float(e.dtype) else _dtype_range(e.dtype))

    def expr_Call(self, e: E.Call) -> _Frag:
        if e.op not in _UFUNC and e.op not in ("rsqrt", "sigmoid"):
            raise NotImplementedError(f"{self.func.name}: the interpreter has no implementation "
                                      f"of the intrinsic '{e.op}'")
        args = [self.expr(a) for a in e.args]
        depth = max(a.depth for a in args) + 1
        arg_dtype = e.args[0].dtype
        same = dt.element_of(arg_dtype) == dt.element_of(e.dtype)
        if dt.is_integer(arg_dtype) and same:
            if e.op in ("floor", "ceil", "round", "trunc"):
                return args[0]
            if e.op == "abs":
                if _lanes(e) > 1:
                    return _Frag(f"np.abs({args[0].text})", P_ATOM, depth, _dtype_range(e.dtype))
                iv = args[0].iv or _dtype_range(arg_dtype)
                raw = (0 if iv[0] <= 0 <= iv[1] else min(abs(iv[0]), abs(iv[1])),
                       max(abs(iv[0]), abs(iv[1])))
                return self.int_result(f"abs({args[0].text})", P_ATOM, depth, raw, e.dtype)
        texts = [a.text for a in args]
        if e.op == "rsqrt":
            one = self.constant(dt.element_of(e.dtype), 1.0)
            text = f"{one} / np.sqrt({texts[0]})"
        elif e.op == "sigmoid":
            one = self.constant(dt.element_of(e.dtype), 1.0)
            text = f"{one} / ({one} + np.exp(-{args[0].at(P_UNARY)}))"
        else:
            text = f"{_UFUNC[e.op]}({', '.join(texts)})"
        if dt.is_bool(e.dtype):
            return _Frag(text, P_ATOM, depth, (0, 1))
        # A ufunc keeps its argument's float dtype; anything else is converted to the result's.
        if e.op == "erf" or not same or not dt.is_float(e.dtype):
            if _lanes(e) > 1:
                return _Frag(f"np.asarray({text}).astype({_np(e.dtype)})", P_ATOM, depth + 2)
            return _Frag(f"{_np(e.dtype)}({text})", P_ATOM, depth + 1,
                         None if dt.is_float(e.dtype) else _dtype_range(e.dtype))
        return _Frag(text, P_MUL if e.op in ("rsqrt", "sigmoid") else P_ATOM, depth)
