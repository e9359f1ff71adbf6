"""Integer arithmetic analysis of index expressions: simplification, constant bounds, proofs and
symbolic interval arithmetic (the `arith` arrow between loop generation and the loop-IR passes).

    from tensorforge import arith
    an = arith.Analyzer()
    an.bind(i, Range(0, 16))
    an.simplify((i * 8 + j) * 2 - 2 * j)   # i*16
"""
from .analyzer import Analyzer, simplify
from .interval import Interval
from .structural import structural_equal

__all__ = ["Analyzer", "Interval", "simplify", "structural_equal"]
