"""Visitors and mutators over expressions and statements.

`Mutator` rebuilds a node only when one of its children changed, so an untouched tree keeps its
identity (cheap to compare, and `Var` identity is meaning).  Subclasses override
`visit_<ClassName>(node)`; everything else is handled generically from the dataclass fields.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from ..te.expr import BinaryOp, Expr, Var
from .nodes import Stmt

_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(cls))
        _FIELDS[cls] = names
    return names


def _is_node(x: Any) -> bool:
    return isinstance(x, (Expr, Stmt))


class Mutator:
    """Rebuilds expressions and statements bottom-up; override `visit_<ClassName>`."""

    def visit(self, node: Any) -> Any:
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is not None:
            return method(node)
        return self.generic_visit(node)

    def generic_visit(self, node: Any) -> Any:
        if not dataclasses.is_dataclass(node):
            return node
        changes = {}
        for name in _fields(type(node)):
            if name == "dtype" and isinstance(node, BinaryOp):
                continue
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
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is not None:
            method(node)
        else:
            self.generic_visit(node)

    def generic_visit(self, node: Any) -> None:
        if not dataclasses.is_dataclass(node):
            return
        for name in _fields(type(node)):
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
