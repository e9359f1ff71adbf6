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


def _fields(cls: type) -> tuple[str, ...]:
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
            names = tuple(n for n in _fields(cls) if not (n == "dtype" and issubclass(cls, BinaryOp)))
        _CHILDREN[cls] = names
    return names


def _is_node(x: Any) -> bool:
    return isinstance(x, Node)


def _dispatch(visitor: Any, cls: type):
    """The visitor's `visit_<ClassName>` method for node class `cls`, or None (looked up once
    per visitor and class)."""
    table = visitor.__dict__.get("_visit_table")
    if table is None:
        table = visitor.__dict__["_visit_table"] = {}
    try:
        return table[cls]
    except KeyError:
        method = table[cls] = getattr(visitor, "visit_" + cls.__name__, None)
        return method


class Mutator:
    """Rebuilds expressions and statements bottom-up; override `visit_<ClassName>`."""

    def visit(self, node: Any) -> Any:
        method = _dispatch(self, type(node))
        if method is not None:
            return method(node)
        return self.generic_visit(node)

    def generic_visit(self, node: Any) -> Any:
        names = _child_fields(type(node))
        if not names:
            return node
        changes = {}
        for name in names:
            old = getattr(node, name)
            if _is_node(old):
                new = self.visit(old)
            elif isinstance(old, tuple) and old and any(_is_node(x) for x in old):
                new = tuple(self.visit(x) if _is_node(x) else x for x in old)
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
        method = _dispatch(self, type(node))
        if method is not None:
            method(node)
        else:
            self.generic_visit(node)

    def generic_visit(self, node: Any) -> None:
        for name in _child_fields(type(node)):
            value = getattr(node, name)
            if _is_node(value):
                self.visit(value)
            elif isinstance(value, tuple):
                for x in value:
                    if _is_node(x):
                        self.visit(x)


def post_order_visit(node: Any, fn: Callable[[Any], None]) -> None:
    """Call `fn` on every expression and statement under `node`, children first."""

    class _V(Visitor):
        def visit(self, n):
            super().visit(n)
            fn(n)

    _V().visit(node)


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
