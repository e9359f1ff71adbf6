"""Intervals of integer expressions: the value every bound analysis in `arith` produces.

An `Interval` is the inclusive range [min, max]; both ends are expressions and may be symbolic
(`[0, n - 1]`).  An `ir.expr.Range` is the half-open [min, min + extent); `from_range` and
`to_range` convert between the two.  Unbounded intervals are not representable: analyses that
cannot bound an expression return None instead, and callers fall back to a whole dimension.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..ir.expr import Expr, Range, convert


@dataclass(frozen=True, eq=False)
class Interval:
    """The inclusive range [min, max] of an integer expression."""

    min: Expr
    max: Expr

    def __post_init__(self) -> None:
        object.__setattr__(self, "min", convert(self.min))
        object.__setattr__(self, "max", convert(self.max))

    @staticmethod
    def point(e: Any) -> "Interval":
        """The interval holding exactly the value of `e`."""
        e = convert(e)
        return Interval(e, e)

    @staticmethod
    def from_range(r: Range) -> "Interval":
        """[r.min, r.min + r.extent - 1], simplified."""
        from .analyzer import simplify
        return Interval(simplify(r.min), simplify(r.min + r.extent - 1))

    def to_range(self) -> Range:
        """The half-open Range [min, max + 1), simplified."""
        from .analyzer import simplify
        return Range(self.min, simplify(self.max - self.min + 1))

    @property
    def is_point(self) -> bool:
        """Whether min and max are structurally the same expression."""
        from .structural import structural_equal
        return structural_equal(self.min, self.max)

    def __repr__(self) -> str:
        return f"Interval[{self.min}, {self.max}]"
