"""Structural equality of IR values, and the structural numbering the simplifier keys terms by.

`structural_equal(a, b)` is what tests and passes use to compare a result with an expected IR:
variables are compared by identity (a `Var` *is* its meaning), everything else by value, field by
field.  `Interner` gives every expression a small integer such that structurally equal
expressions get the same integer, so that sums can collect like terms in a dict; its
`sort_key` orders terms deterministically (by variable names, not by memory addresses).
"""
from __future__ import annotations

import dataclasses
import itertools
import math
import weakref
import zlib
from typing import Any

from ..ir.expr import BinaryOp, Expr, FloatImm, IntImm, Var
from .recursion import deep_recursion

_PRIMITIVE = (int, str, bool, type(None), bytes)


def structural_equal(a: Any, b: Any, map_vars: bool = False) -> bool:
    """Whether `a` and `b` (expressions, statements, functions, tuples...) have the same structure.

    Vars are equal only when they are the same object, unless `map_vars` is set: then a Var of `a`
    may stand for one Var of `b` of the same dtype (consistently, one to one), which compares two
    programs that differ only in the names of the variables they define.
    """
    with deep_recursion():
        return _Equal(map_vars).eq(a, b)


class _Equal:
    # Compares two object graphs field by field.  Pairs already compared (or being compared, which
    # makes reference cycles terminate) are remembered; with map_vars, `fwd`/`bwd` keep the Var
    # correspondence a bijection.
    def __init__(self, map_vars: bool):
        self.map_vars = map_vars
        self.fwd: dict[int, Var] = {}
        self.bwd: dict[int, Var] = {}
        self.done: set[tuple[int, int]] = set()

    def eq(self, a: Any, b: Any) -> bool:
        if a is b and not (self.map_vars and _may_hold_vars(a)):
            return True
        if type(a) is not type(b):
            return False
        if isinstance(a, Var):
            return self._var(a, b)
        if isinstance(a, IntImm):
            return a.dtype == b.dtype and a.value == b.value
        if isinstance(a, FloatImm):
            return a.dtype == b.dtype and _same_float(a.value, b.value)
        if isinstance(a, float):
            return _same_float(a, b)
        if isinstance(a, _PRIMITIVE):
            return a == b
        # Plain loops rather than all(generator), which would recurse on the C stack.
        if isinstance(a, (tuple, list)):
            if len(a) != len(b):
                return False
            for x, y in zip(a, b):
                if not self.eq(x, y):
                    return False
            return True
        if isinstance(a, dict):
            if a.keys() != b.keys():
                return False
            for k in a:
                if not self.eq(a[k], b[k]):
                    return False
            return True
        pair = (id(a), id(b))
        if pair in self.done:
            return True
        if dataclasses.is_dataclass(a):
            self.done.add(pair)
            for f in dataclasses.fields(a):
                if not self.eq(getattr(a, f.name), getattr(b, f.name)):
                    self.done.discard(pair)
                    return False
            return True
        try:
            return bool(a == b)
        except TypeError:
            return False

    def _var(self, a: Var, b: Var) -> bool:
        if not self.map_vars:
            return a is b
        if a.dtype != b.dtype:
            return False
        fa, fb = self.fwd.get(id(a)), self.bwd.get(id(b))
        if fa is None and fb is None:
            self.fwd[id(a)], self.bwd[id(b)] = b, a
            return True
        return fa is b and fb is a


def _may_hold_vars(x: Any) -> bool:
    return not isinstance(x, (IntImm, FloatImm) + _PRIMITIVE + (float,))


def _same_float(x: float, y: float) -> bool:
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return x == y and math.copysign(1.0, x) == math.copysign(1.0, y)


# ------------------------------------------------------------------------------------------------
# Deterministic order of objects that have no natural order (Vars of the same name, buffers)

# id(obj) -> (weak reference to obj, ordinal).  Not a WeakKeyDictionary: its lookups compare
# keys with ==, and == on an Expr builds an EQ node.
_ordinals: dict[int, tuple[Any, int]] = {}
_counter = itertools.count()


def ordinal(obj: Any) -> int:
    """A number that grows with the order in which objects are first seen by this function."""
    key = id(obj)
    entry = _ordinals.get(key)
    if entry is not None and entry[0]() is obj:
        return entry[1]
    n = next(_counter)

    def forget(ref, key=key):
        if _ordinals.get(key, (None,))[0] is ref:
            del _ordinals[key]
    try:
        _ordinals[key] = (weakref.ref(obj, forget), n)
    except TypeError:  # not weak-referenceable: identity is all there is
        return key
    return n


class Interner:
    """Numbers expressions: structurally equal expressions get equal numbers.

    Algorithm: hash-consing.  The number of a node is looked up from its class, dtype, constant
    payload and the numbers of its children, so each node is hashed in constant time however deep
    it is.  Invariant: equal numbers imply `structural_equal` (the converse may fail for objects
    that are not expressions, such as buffers, which are numbered by identity).
    """

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[Any, int]] = {}
        self._table: dict[tuple, int] = {}
        self._sort: dict[int, tuple] = {}
        self._hash: dict[int, int] = {}
        self._keep: list[Any] = []

    def key(self, e: Expr) -> int:
        hit = self._by_id.get(id(e))
        if hit is not None:
            return hit[1]
        shape = self._shape(e)
        k = self._table.setdefault(shape, len(self._table))
        self._by_id[id(e)] = (e, k)
        return k

    def lookup(self, shape: tuple) -> int | None:
        """The number of an expression with this shape tuple, if one was numbered."""
        return self._table.get(shape)

    def binary_shape(self, cls: type, dtype: str, a: Expr, b: Expr) -> tuple:
        """The shape tuple `cls(a, b)` would have, without building it."""
        return (cls, dtype, self.key(a), self.key(b))

    def _shape(self, e: Expr) -> tuple:
        if isinstance(e, Var):
            return (Var, id(e))
        if isinstance(e, IntImm):
            return (IntImm, e.dtype, e.value)
        if isinstance(e, FloatImm):
            return (FloatImm, e.dtype, repr(e.value))
        if isinstance(e, BinaryOp):
            return (type(e), e.dtype, self.key(e.a), self.key(e.b))
        if dataclasses.is_dataclass(e):
            fields = dataclasses.fields(e)
            return (type(e),) + tuple([self._field(getattr(e, f.name)) for f in fields])
        self._keep.append(e)
        return ("id", id(e))

    def _field(self, v: Any) -> Any:
        if isinstance(v, Expr):
            return ("e", self.key(v))
        if isinstance(v, tuple):
            return tuple([self._field(x) for x in v])
        if isinstance(v, float):
            return repr(v)
        if isinstance(v, _PRIMITIVE):
            return v
        self._keep.append(v)
        return ("id", id(v))

    def sort_key(self, e: Expr) -> tuple:
        """A deterministic order key: class names, dtypes, variable names and values of the top
        few levels, then a deterministic hash of the whole structure.

        Keys stay shallow so that comparing the keys of very deep expressions does not recurse
        deeply in C (tuple comparison).  Equal keys of different expressions are possible but
        need an equal top and a hash collision; the order is still deterministic then.
        """
        k = self.key(e)
        hit = self._sort.get(k)
        if hit is None:
            hit = (self._shallow(e, _SORT_DEPTH), self.det_hash(e))
            self._sort[k] = hit
        return hit

    def _shallow(self, e: Expr, depth: int) -> tuple:
        if isinstance(e, Var):
            return ("Var", e.name, e.dtype, ordinal(e))
        if isinstance(e, IntImm):
            return ("IntImm", e.dtype, e.value)
        if isinstance(e, FloatImm):
            return ("FloatImm", e.dtype, repr(e.value))
        if depth == 0:
            return ("~", self.det_hash(e))
        if isinstance(e, BinaryOp):
            return (type(e).__name__, e.dtype, self._shallow(e.a, depth - 1),
                    self._shallow(e.b, depth - 1))
        if dataclasses.is_dataclass(e):
            return (type(e).__name__,) + tuple(
                [self._shallow_field(getattr(e, f.name), depth - 1) for f in dataclasses.fields(e)])
        return ("obj", type(e).__name__, ordinal(e))

    def _shallow_field(self, v: Any, depth: int) -> tuple:
        if isinstance(v, Expr):
            return ("e",) + self._shallow(v, depth)
        if isinstance(v, tuple):
            return ("t",) + tuple([self._shallow_field(x, depth) for x in v])
        if isinstance(v, _PRIMITIVE + (float,)):
            return ("p", type(v).__name__, repr(v))
        return ("o", type(v).__name__, str(getattr(v, "name", "")), ordinal(v))

    def det_hash(self, e: Any) -> int:
        """A structural hash that is the same in every process (no id(), no salted str hash)."""
        if isinstance(e, Expr):
            k = self.key(e)
            hit = self._hash.get(k)
            if hit is not None:
                return hit
        h = _mix(_str_hash(type(e).__name__), 0)
        if isinstance(e, Var):
            h = _mix(h, _str_hash(e.name + ":" + e.dtype))
        elif isinstance(e, (IntImm, FloatImm)):
            h = _mix(h, _str_hash(f"{e.dtype}:{e.value!r}"))
        elif isinstance(e, BinaryOp):
            h = _mix(_mix(_mix(h, _str_hash(e.dtype)), self.det_hash(e.a)), self.det_hash(e.b))
        elif isinstance(e, tuple):
            for x in e:
                h = _mix(h, self.det_hash(x))
        elif isinstance(e, Expr) and dataclasses.is_dataclass(e):
            for f in dataclasses.fields(e):
                h = _mix(h, self.det_hash(getattr(e, f.name)))
        elif isinstance(e, _PRIMITIVE + (float,)):
            h = _mix(h, _str_hash(repr(e)))
        else:
            h = _mix(h, _str_hash(str(getattr(e, "name", ""))))
        if isinstance(e, Expr):
            self._hash[self.key(e)] = h
        return h


_SORT_DEPTH = 4
_MASK = (1 << 64) - 1


def _mix(h: int, x: int) -> int:
    return ((h ^ x) * 0x100000001B3 + 0x9E3779B97F4A7C15) & _MASK


def _str_hash(text: str) -> int:
    return zlib.crc32(text.encode())
