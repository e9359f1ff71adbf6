"""Visitors and mutators over expressions and statements.

`Mutator` rebuilds a node only when one of its children changed, so an untouched tree keeps its
identity (cheap to compare, and `Var` identity is meaning).  Subclasses override
`visit_<ClassName>(node)`; everything else is handled generically from the dataclass fields.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from .expr import BinaryOp, FloatImm, IntImm, Node, StringImm, Var

_FIELDS: dict[type, tuple[str, ...]] = {}
_CHILDREN: dict[type, tuple[str, ...]] = {}
_LEAVES = (IntImm, FloatImm, StringImm, Var)      # no field of these ever holds a node


def field_names(cls: type) -> tuple[str, ...]:
    """The field names of dataclass `cls`, in order (looked up once per class)."""
    names = _FIELDS.get(cls)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(cls))
        _FIELDS[cls] = names
    return names


def _child_fields(cls: type) -> tuple[str, ...]:
    """The fields of `cls` that may hold nodes: none for leaves and non-dataclasses, and not a
    BinaryOp's dtype (computed from its operands)."""
    names = _CHILDREN.get(cls)
    if names is None:
        if issubclass(cls, _LEAVES) or not dataclasses.is_dataclass(cls):
            names = ()
        else:
            names = tuple(n for n in field_names(cls) if not (n == "dtype" and issubclass(cls, BinaryOp)))
        _CHILDREN[cls] = names
    return names


_TABLES: dict[type, dict[type, Any]] = {}


def dispatch(visitor: Any, cls: type):
    """The visitor class's `visit_<ClassName>` function for node class `cls` (to be called with
    the visitor), or None; looked up once per visitor class and node class, since visitors are
    made per call and walk many nodes."""
    vcls = type(visitor)
    table = _TABLES.get(vcls)
    if table is None:
        table = _TABLES[vcls] = {}
    try:
        return table[cls]
    except KeyError:
        method = table[cls] = getattr(vcls, "visit_" + cls.__name__, None)
        return method


class Mutator:
    """Rebuilds expressions and statements bottom-up; override `visit_<ClassName>`."""

    def visit(self, node: Any) -> Any:
        method = dispatch(self, type(node))
        if method is not None:
            return method(self, node)
        return self.generic_visit(node)

    def generic_visit(self, node: Any) -> Any:
        cls = type(node)
        names = _CHILDREN.get(cls)
        if names is None:
            names = _child_fields(cls)
        if not names:
            return node
        changes = {}
        visit = self.visit
        for name in names:
            old = getattr(node, name)
            if isinstance(old, Node):
                new = visit(old)
            elif type(old) is tuple and old and any(isinstance(x, Node) for x in old):
                new = tuple(visit(x) if isinstance(x, Node) else x for x in old)
                if all(a is b for a, b in zip(new, old)):
                    new = old
            else:
                continue
            if new is not old:
                changes[name] = new
        if not changes:
            return node
        if isinstance(node, BinaryOp):
            return type(node)(changes.get("a", node.a), changes.get("b", node.b))
        return dataclasses.replace(node, **changes)


class Visitor:
    """Walks expressions and statements; override `visit_<ClassName>` and call `generic_visit`."""

    def visit(self, node: Any) -> None:
        method = dispatch(self, type(node))
        if method is not None:
            method(self, node)
        else:
            self.generic_visit(node)

    def generic_visit(self, node: Any) -> None:
        cls = type(node)
        names = _CHILDREN.get(cls)
        if names is None:
            names = _child_fields(cls)
        visit = self.visit
        for name in names:
            value = getattr(node, name)
            if isinstance(value, Node):
                visit(value)
            elif type(value) is tuple:
                for x in value:
                    if isinstance(x, Node):
                        visit(x)


class _PostOrder(Visitor):
    def __init__(self, fn: Callable[[Any], None]):
        self.fn = fn

    def visit(self, node: Any) -> None:
        Visitor.visit(self, node)
        self.fn(node)


def post_order_visit(node: Any, fn: Callable[[Any], None]) -> None:
    """Call `fn` on every expression and statement under `node`, children first."""
    _PostOrder(fn).visit(node)


class _Substituter(Mutator):
    def __init__(self, mapping: dict):
        self.mapping = mapping

    def visit_Var(self, node: Var):
        return self.mapping.get(node, node)


def substitute(node: Any, mapping: dict) -> Any:
    """Replace variables by expressions (keys are Var objects)."""
    if not mapping:
        return node
    return _Substituter(mapping).visit(node)


def free_vars(node: Any) -> set:
    """The Vars that occur under `node`."""
    found: set = set()

    def fn(n):
        if isinstance(n, Var):
            found.add(n)

    post_order_visit(node, fn)
    return found


def uses_var(node: Any, var_or_pred) -> bool:
    """Whether `node` mentions the Var (or any Var for which the predicate is true)."""
    pred = var_or_pred if callable(var_or_pred) and not isinstance(var_or_pred, Var) else (
        lambda v: v is var_or_pred)
    return any(pred(v) for v in free_vars(node))
