"""Scalar expressions: the index and value language shared by tensor expressions (te) and the loop
program (tir).

Nodes are immutable.  Python operators build nodes (`a + 1`, `i // 4`, `x < y`); `==` builds an
`EQ` node whose truth value is object identity, so expressions still work as dict keys.
Division follows Python: `/` is true division (integers are converted to float32 first), `//` and
`%` are floor division and floor modulo.  Vector forms (`Ramp`, `Broadcast`, dtypes such as
"float32x16") appear only after the vectorize pass.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Sequence

from . import dtype as dt


class Node:
    """Base class of every IR node (expressions here, statements in `tir`): what the visitors of
    `ir.functor` walk into."""

    __slots__ = ()


class Expr(Node):
    """Base class of scalar (or vector) expressions; `dtype` is a dtype string."""

    __slots__ = ()
    dtype: str

    # Python operators build IR ----------------------------------------------------------------
    def __add__(self, other): return _binary(Add, self, other)
    def __radd__(self, other): return _binary(Add, other, self)
    def __sub__(self, other): return _binary(Sub, self, other)
    def __rsub__(self, other): return _binary(Sub, other, self)
    def __mul__(self, other): return _binary(Mul, self, other)
    def __rmul__(self, other): return _binary(Mul, other, self)
    def __truediv__(self, other): return truediv(self, other)
    def __rtruediv__(self, other): return truediv(other, self)
    def __floordiv__(self, other): return _binary(FloorDiv, self, other)
    def __rfloordiv__(self, other): return _binary(FloorDiv, other, self)
    def __mod__(self, other): return _binary(FloorMod, self, other)
    def __rmod__(self, other): return _binary(FloorMod, other, self)
    def __neg__(self): return _binary(Sub, const(0, self.dtype), self)
    def __lt__(self, other): return _binary(LT, self, other)
    def __le__(self, other): return _binary(LE, self, other)
    def __gt__(self, other): return _binary(GT, self, other)
    def __ge__(self, other): return _binary(GE, self, other)
    def __eq__(self, other): return _binary(EQ, self, other)
    def __ne__(self, other): return _binary(NE, self, other)
    def __and__(self, other): return logical_and(self, other)
    def __or__(self, other): return logical_or(self, other)
    def __invert__(self): return logical_not(self)
    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise TypeError(
            f"cannot use the symbolic expression {self} as a Python bool; "
            "use te.all/te.any/te.if_then_else to build conditions"
        )

    def astype(self, dtype: str) -> "Expr":
        return cast(self, dtype)

    def __repr__(self) -> str:
        from .printer import expr_str
        return expr_str(self)


@dataclass(frozen=True, eq=False, repr=False)
class Var(Expr):
    """A variable: a loop index, a symbolic shape, a let-bound value.  Compared by identity."""

    name: str
    dtype: str = "int32"


@dataclass(frozen=True, eq=False, repr=False)
class IntImm(Expr):
    dtype: str
    value: int


@dataclass(frozen=True, eq=False, repr=False)
class FloatImm(Expr):
    dtype: str
    value: float


@dataclass(frozen=True, eq=False, repr=False)
class StringImm(Expr):
    value: str
    dtype: str = "handle"


@dataclass(frozen=True, eq=False, repr=False)
class Cast(Expr):
    dtype: str
    value: Expr


@dataclass(frozen=True, eq=False, repr=False)
class BinaryOp(Expr):
    symbol: ClassVar[str]   # the operator's text; each concrete class sets it
    a: Expr
    b: Expr
    dtype: str = field(default="", compare=False)

    def __post_init__(self):
        if not self.dtype:
            object.__setattr__(self, "dtype", self.result_dtype(self.a.dtype, self.b.dtype))

    @staticmethod
    def result_dtype(a: str, b: str) -> str:
        return dt.promote(a, b)


class Add(BinaryOp): symbol = "+"
class Sub(BinaryOp): symbol = "-"
class Mul(BinaryOp): symbol = "*"
class Div(BinaryOp): symbol = "/"          # true division of floats; C division of integers after lowering
class FloorDiv(BinaryOp): symbol = "//"
class FloorMod(BinaryOp): symbol = "%"
class Min(BinaryOp): symbol = "min"
class Max(BinaryOp): symbol = "max"


class CmpOp(BinaryOp):
    @staticmethod
    def result_dtype(a: str, b: str) -> str:
        return dt.with_lanes("bool", max(dt.lanes(a), dt.lanes(b)))


class EQ(CmpOp):
    symbol = "=="

    def __bool__(self) -> bool:  # lets `a == b` work for identity tests and dict lookups
        return self.a is self.b


class NE(CmpOp):
    symbol = "!="

    def __bool__(self) -> bool:
        return self.a is not self.b


class LT(CmpOp): symbol = "<"
class LE(CmpOp): symbol = "<="
class GT(CmpOp): symbol = ">"
class GE(CmpOp): symbol = ">="
class And(CmpOp): symbol = "&&"
class Or(CmpOp): symbol = "||"


@dataclass(frozen=True, eq=False, repr=False)
class Not(Expr):
    a: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.a.dtype


@dataclass(frozen=True, eq=False, repr=False)
class Select(Expr):
    """`true_value if condition else false_value`; only the chosen branch is evaluated."""

    condition: Expr
    true_value: Expr
    false_value: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.true_value.dtype


@dataclass(frozen=True, eq=False, repr=False)
class Call(Expr):
    """A pure intrinsic: exp, log, sqrt, ... (see `INTRINSICS`)."""

    dtype: str
    op: str
    args: tuple


@dataclass(frozen=True, eq=False, repr=False)
class Let(Expr):
    var: Var
    value: Expr
    body: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.body.dtype


@dataclass(frozen=True, eq=False, repr=False)
class Ramp(Expr):
    """The vector (base, base + stride, ..., base + (lanes - 1) * stride)."""

    base: Expr
    stride: Expr
    lanes: int

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return dt.with_lanes(self.base.dtype, self.lanes)


@dataclass(frozen=True, eq=False, repr=False)
class Broadcast(Expr):
    value: Expr
    lanes: int

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return dt.with_lanes(self.value.dtype, self.lanes)


@dataclass(frozen=True, eq=False, repr=False)
class TensorLoad(Expr):
    """`tensor[indices]` inside a tensor expression (before lowering turns it into a BufferLoad)."""

    tensor: Any
    indices: tuple

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.tensor.dtype


# --------------------------------------------------------------------------------------------
# Ranges and iteration variables


@dataclass(frozen=True, eq=False)
class Range:
    """The half-open interval [min, min + extent)."""

    min: Expr
    extent: Expr

    def __repr__(self) -> str:
        return f"range(min={self.min}, ext={self.extent})"


DATA, REDUCE, THREAD = "data", "reduce", "thread"


@dataclass(frozen=True, eq=False)
class IterVar:
    """An iteration variable: a Var with its domain and kind (data, reduce or thread axis)."""

    dom: Range | None
    var: Var
    kind: str = DATA
    thread_tag: str = ""

    @property
    def name(self) -> str:
        return self.var.name

    def __repr__(self) -> str:
        return f"IterVar({self.var.name}, {self.dom}, {self.kind})"

    # Arithmetic on an IterVar means arithmetic on its variable, as in TVM.
    def __getattr__(self, item):
        if item.startswith("__"):
            raise AttributeError(item)
        return getattr(self.var, item)

    def _v(self): return self.var
    def __add__(self, o): return self.var + o
    def __radd__(self, o): return o + self.var
    def __sub__(self, o): return self.var - o
    def __rsub__(self, o): return o - self.var
    def __mul__(self, o): return self.var * o
    def __rmul__(self, o): return o * self.var
    def __floordiv__(self, o): return self.var // o
    def __mod__(self, o): return self.var % o
    def __lt__(self, o): return self.var < o
    def __le__(self, o): return self.var <= o
    def __gt__(self, o): return self.var > o
    def __ge__(self, o): return self.var >= o
    def __neg__(self): return -self.var
    __hash__ = object.__hash__


# --------------------------------------------------------------------------------------------
# Reductions


@dataclass(frozen=True, eq=False)
class CommReducer:
    """A commutative, associative reducer over tuples: combine(lhs, rhs) and identity elements."""

    lhs: tuple
    rhs: tuple
    result: tuple
    identity: tuple
    name: str = "reducer"

    def combine(self, lhs: Sequence[Expr], rhs: Sequence[Expr]) -> list[Expr]:
        from .functor import substitute
        mapping = dict(zip(self.lhs, lhs))
        mapping.update(zip(self.rhs, rhs))
        return [substitute(r, mapping) for r in self.result]


@dataclass(frozen=True, eq=False, repr=False)
class Reduce(Expr):
    """Result `value_index` of reducing `source` over `axis` with `combiner` where `condition`."""

    combiner: CommReducer
    source: tuple
    axis: tuple
    condition: Expr
    value_index: int = 0

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.source[self.value_index].dtype


# --------------------------------------------------------------------------------------------
# Constructors and conversions


def const(value: Any, dtype: str | None = None) -> Expr:
    """A constant; the dtype defaults to int32/float32/bool from the Python type."""
    if dtype is None:
        if isinstance(value, bool):
            dtype = "bool"
        elif isinstance(value, int):
            dtype = "int32" if -(2 ** 31) <= value < 2 ** 31 else "int64"
        elif isinstance(value, float):
            dtype = "float32"
        else:
            dtype = dt.check(getattr(value, "dtype", type(value)).name if hasattr(value, "dtype") else "")
    dtype = dt.check(dtype)
    if dt.is_float(dtype):
        return FloatImm(dtype, float(value))
    if dt.is_bool(dtype):
        return IntImm(dtype, int(bool(value)))
    return IntImm(dtype, int(value))


def convert(value: Any) -> Expr:
    """Turn a Python number, bool, IterVar or Expr into an Expr."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, IterVar):
        return value.var
    if isinstance(value, (bool, int, float)):
        return const(value)
    if hasattr(value, "dtype") and hasattr(value, "item"):  # NumPy scalar
        return const(value.item(), value.dtype.name)
    raise TypeError(f"cannot convert {value!r} of type {type(value).__name__} to an expression")


def _operands(a: Any, b: Any) -> tuple[Expr, Expr]:
    """Convert both operands; a Python constant takes the dtype of the expression beside it."""
    if isinstance(a, IterVar):
        a = a.var
    if isinstance(b, IterVar):
        b = b.var
    if isinstance(a, Expr) and not isinstance(b, Expr):
        b = _const_like(b, a.dtype)
    elif isinstance(b, Expr) and not isinstance(a, Expr):
        a = _const_like(a, b.dtype)
    else:
        a, b = convert(a), convert(b)
    if a.dtype != b.dtype:
        target = dt.promote(a.dtype, b.dtype)
        a, b = cast(a, target), cast(b, target)
    return a, b


def _const_like(value: Any, dtype: str) -> Expr:
    if isinstance(value, int) and not isinstance(value, bool) and dt.element_of(dtype) == "int32" \
            and not -(2 ** 31) <= value < 2 ** 31:
        # an index offset past int32 (i + 2**31) is an int64 constant: the sum is computed in
        # int64 instead of wrapping the constant to a negative int32
        return const(value, "int64") if dt.lanes(dtype) == 1 else Broadcast(const(value, "int64"), dt.lanes(dtype))
    if isinstance(value, (int, bool)) and not dt.is_bool(dtype):
        return const(value, dt.element_of(dtype)) if dt.lanes(dtype) == 1 else Broadcast(
            const(value, dt.element_of(dtype)), dt.lanes(dtype))
    if isinstance(value, float) and dt.is_float(dtype):
        return const(value, dt.element_of(dtype))
    return convert(value)


def _binary(cls: type[BinaryOp], a: Any, b: Any) -> Expr:
    a, b = _operands(a, b)
    if cls in (FloorDiv, FloorMod) and isinstance(b, IntImm) and b.value == 0:
        raise ZeroDivisionError(f"{cls.__name__} by constant zero in {a} {cls.symbol} 0")
    return cls(a, b)


def truediv(a: Any, b: Any) -> Expr:
    a, b = _operands(a, b)
    if not dt.is_float(a.dtype):
        a, b = cast(a, "float32"), cast(b, "float32")
    return Div(a, b)


def cast(value: Any, dtype: str) -> Expr:
    value = convert(value)
    dtype = dt.check(dtype) if "x" not in dtype else dtype
    if value.dtype == dtype:
        return value
    if isinstance(value, IntImm) and not dt.is_float(dtype):
        return const(value.value, dtype)
    if isinstance(value, (IntImm, FloatImm)) and dt.is_float(dtype):
        return const(float(value.value), dtype)
    return Cast(dtype, value)


def _as_bool(x: Any) -> Expr:
    x = convert(x)
    return x if dt.is_bool(x.dtype) else NE(x, const(0, x.dtype))


def logical_and(a: Any, b: Any) -> Expr:
    return And(_as_bool(a), _as_bool(b))


def logical_or(a: Any, b: Any) -> Expr:
    return Or(_as_bool(a), _as_bool(b))


def logical_not(a: Any) -> Expr:
    return Not(_as_bool(a))


def min_value(dtype: str) -> Expr:
    if dt.is_float(dtype):
        return const(-math.inf, dtype)
    if dt.is_bool(dtype):
        return const(False, dtype)
    import numpy as np
    return const(int(np.iinfo(dt.to_numpy(dtype)).min), dtype)


def max_value(dtype: str) -> Expr:
    if dt.is_float(dtype):
        return const(math.inf, dtype)
    if dt.is_bool(dtype):
        return const(True, dtype)
    import numpy as np
    return const(int(np.iinfo(dt.to_numpy(dtype)).max), dtype)


# Intrinsics: name -> (number of args, NumPy reference); the code generators map the names.
INTRINSICS: dict[str, int] = {
    "exp": 1, "exp2": 1, "log": 1, "log2": 1, "log1p": 1, "expm1": 1, "sqrt": 1, "rsqrt": 1,
    "tanh": 1, "sigmoid": 1, "erf": 1, "abs": 1, "floor": 1, "ceil": 1, "round": 1, "trunc": 1,
    "sin": 1, "cos": 1, "tan": 1, "asin": 1, "acos": 1, "atan": 1, "sinh": 1, "cosh": 1,
    "asinh": 1, "acosh": 1, "atanh": 1, "isnan": 1, "isinf": 1, "pow": 2, "atan2": 2, "fmod": 2,
}
_BOOL_RESULT = {"isnan", "isinf"}


def call_intrin(op: str, *args: Any) -> Expr:
    if op not in INTRINSICS:
        raise ValueError(f"unknown intrinsic {op!r}")
    if len(args) != INTRINSICS[op]:
        raise TypeError(f"{op} takes {INTRINSICS[op]} argument(s), got {len(args)}")
    exprs = [convert(a) for a in args]
    if len(exprs) == 2:
        exprs = list(_operands(exprs[0], exprs[1]))
    if op == "abs" and not dt.is_float(exprs[0].dtype):
        x = exprs[0]
        return Select(x < 0, -x, x) if not dt.is_uint(x.dtype) else x
    if op in ("floor", "ceil", "round", "trunc") and not dt.is_float(exprs[0].dtype):
        return exprs[0]
    if not dt.is_float(exprs[0].dtype) and op not in _BOOL_RESULT:
        exprs = [cast(e, "float32") for e in exprs]
    result = dt.with_lanes("bool", dt.lanes(exprs[0].dtype)) if op in _BOOL_RESULT else exprs[0].dtype
    return Call(result, op, tuple(exprs))


def is_const_int(e: Any, value: int | None = None) -> bool:
    return isinstance(e, IntImm) and (value is None or e.value == value)
