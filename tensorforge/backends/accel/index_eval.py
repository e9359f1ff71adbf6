"""Evaluate integer index expressions of a loop program over whole loop grids with NumPy.

The accelerator's code generator never runs a coprocessor statement element by element: it binds
each loop variable of the statement's nest to an `arange` shaped to broadcast along its own
axis, and evaluates the statement's indices and conditions once.  The result is an array over
the whole iteration grid, from which the DMA patterns, micro-ops and loop factors are read.
Only what index arithmetic uses is supported; anything else is a clear error.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from ...ir import expr as E

_BINARY = {
    E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply, E.FloorDiv: np.floor_divide,
    E.FloorMod: np.mod, E.Min: np.minimum, E.Max: np.maximum, E.LT: np.less, E.LE: np.less_equal,
    E.GT: np.greater, E.GE: np.greater_equal, E.EQ: np.equal, E.NE: np.not_equal,
    E.And: np.logical_and, E.Or: np.logical_or,
}


def evaluate(expr: E.Expr, env: Mapping[E.Var, object]):
    """The value of integer/boolean `expr` with variables bound by `env` (ints or int arrays)."""
    if isinstance(expr, E.IntImm):
        return int(expr.value)
    if isinstance(expr, E.Var):
        try:
            return env[expr]
        except KeyError:
            raise ValueError(f"index expression uses variable {expr.name!r}, which no enclosing "
                             "loop binds") from None
    if isinstance(expr, E.BinaryOp) and type(expr) in _BINARY:
        return _BINARY[type(expr)](evaluate(expr.a, env), evaluate(expr.b, env))
    if isinstance(expr, E.Not):
        return np.logical_not(evaluate(expr.a, env))
    if isinstance(expr, E.Select):
        return np.where(evaluate(expr.condition, env), evaluate(expr.true_value, env),
                        evaluate(expr.false_value, env))
    if isinstance(expr, E.Cast) and expr.dtype.startswith(("int", "uint", "bool")):
        return evaluate(expr.value, env)
    raise ValueError(f"the accelerator cannot evaluate index expression {expr!r} "
                     f"({type(expr).__name__})")


def grid(extents: list[int]) -> list[np.ndarray]:
    """One broadcastable `arange` per loop, axis k for loop k."""
    n = len(extents)
    return [np.arange(e, dtype=np.int64).reshape([e if k == a else 1 for a in range(n)])
            for k, e in enumerate(extents)]


def full(value, extents: list[int]) -> np.ndarray:
    """`value` (a scalar or a broadcastable array) expanded to the whole grid, as int64."""
    return np.broadcast_to(np.asarray(value, dtype=np.int64), tuple(extents))
