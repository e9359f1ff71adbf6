"""Tensor expressions and schedules (the TE vocabulary TVM users know)."""
from .expr import (Expr, Var, IterVar, Range, Reduce, CommReducer, const, cast, convert)
