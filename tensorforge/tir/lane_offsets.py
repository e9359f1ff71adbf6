"""Vector indices whose lanes sit at constant distances from lane 0, read as a few contiguous runs.

A vectorized loop over the output of a depth-to-space (a pixel shuffle, the output of a
transposed convolution whose kernel equals its stride) reads, for 8 consecutive outputs,
`x[base + (v % 2) * S + v // 2]`: lanes 0, 2, 4, 6 read 4 consecutive elements at `base` and
lanes 1, 3, 5, 7 read 4 consecutive elements at `base + S`.  That index is no `Ramp`, so it was
left to the C compiler as a scalar `omp simd` loop, which gathers element by element.  Read as
two 4-element vector loads and one shuffle it costs a few instructions per 8 lanes.

A Ramp of a small constant stride (the column phases of a stride-2 pool's padded input) is
read the same way by `strided_runs`: runs of the vector's length that cover lane 0's element to
the last lane's, the last run ending exactly there (nothing past the last lane is read), and one
shuffle that keeps every stride-th element.

`constant_offsets(index)` finds lane 0's scalar index and every lane's constant distance from
it (None when a distance depends on a variable); `runs(offsets)` splits the distinct distances
into contiguous runs of one power-of-two length and says which element of which run each lane
takes (None when they do not split so).  The vectorize pass accepts such an index
(tir/passes/vectorize_loops.py), and the C printer reads it as run loads and a shuffle
(codegen/c_vector.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..arith.analyzer import Analyzer
from ..ir import dtype as dt
from ..ir import expr as E

MIN_RUN = 2          # a run of one element is a scalar load: the index is then a plain gather


def lane(e: E.Expr, k: int) -> E.Expr:
    """The scalar expression of lane `k` of vector expression `e` (a scalar stays itself).
    Only the forms an index takes: Ramp, Broadcast, casts and integer arithmetic."""
    lanes = dt.lanes(e.dtype)
    if lanes == 1:
        return e
    if isinstance(e, E.Ramp):
        return e.base + e.stride * k if k else e.base
    if isinstance(e, E.Broadcast):
        return e.value
    if isinstance(e, E.Cast):
        return E.Cast(dt.element_of(e.dtype), lane(e.value, k))
    if isinstance(e, E.BinaryOp) and not isinstance(e, E.CmpOp):
        return type(e)(lane(e.a, k), lane(e.b, k))
    raise ValueError(f"no lane form for {type(e).__name__}")


def constant_offsets(index: E.Expr) -> tuple[E.Expr, tuple[int, ...]] | None:
    """(lane 0's index, each lane's constant distance from it) for a vector integer index, or
    None when some distance is not a constant."""
    lanes = dt.lanes(index.dtype)
    if lanes < 2 or not dt.is_integer(index.dtype):
        return None
    try:
        exprs = [lane(index, k) for k in range(lanes)]
    except ValueError:
        return None
    analyzer = Analyzer()
    base = analyzer.simplify(exprs[0])
    offsets = []
    for e in exprs:
        d = analyzer.simplify(e - exprs[0])
        if not isinstance(d, E.IntImm):
            return None
        offsets.append(int(d.value))
    return base, tuple(offsets)


@dataclass(frozen=True)
class Runs:
    """Contiguous runs of `length` elements starting at `starts` (distances from lane 0's
    index); lane k takes element `picks[k]` of the runs laid end to end."""
    length: int
    starts: tuple[int, ...]
    picks: tuple[int, ...]


def runs(offsets: tuple[int, ...]) -> Runs | None:
    """`offsets` as runs of one power-of-two length of at least MIN_RUN elements, or None."""
    distinct = sorted(set(offsets))
    starts, lengths = [distinct[0]], [1]
    for d in distinct[1:]:
        if d == starts[-1] + lengths[-1]:
            lengths[-1] += 1
        else:
            starts.append(d)
            lengths.append(1)
    length = lengths[0]
    if any(n != length for n in lengths) or length < MIN_RUN or length & (length - 1):
        return None
    where = {s + j: r * length + j for r, s in enumerate(starts) for j in range(length)}
    return Runs(length, tuple(starts), tuple(where[d] for d in offsets))


def shuffled_runs(index: E.Expr) -> tuple[E.Expr, Runs] | None:
    """(lane 0's index, its runs) when a vector index reads constant-offset contiguous runs
    that are not simply one Ramp of stride 1 (those print as one vector load)."""
    found = constant_offsets(index)
    if found is None:
        return None
    base, offsets = found
    if offsets == tuple(range(len(offsets))):
        return None
    r = runs(offsets)
    return None if r is None else (base, r)


MAX_RUN_STRIDE = 4    # wider strides read more than 4x the elements they keep


def strided_runs(index: E.Expr) -> tuple[E.Expr, Runs] | None:
    """(lane 0's index, its runs) for a Ramp of constant stride 2..MAX_RUN_STRIDE over a
    power-of-two number of lanes: runs of `lanes` elements from lane 0's element on, the last
    one moved back to end at the last lane's element, so no element outside the span the lanes
    read is touched."""
    if not isinstance(index, E.Ramp) or not isinstance(index.stride, E.IntImm):
        return None
    stride, lanes = int(index.stride.value), dt.lanes(index.dtype)
    if not 2 <= stride <= MAX_RUN_STRIDE or lanes < 2 or lanes & (lanes - 1):
        return None
    span = (lanes - 1) * stride + 1
    count = -(-span // lanes)
    starts = tuple(min(r * lanes, span - lanes) for r in range(count))

    def pick(d: int) -> int:
        r = min(d // lanes, count - 1)
        return r * lanes + d - starts[r]

    return index.base, Runs(lanes, starts, tuple(pick(k * stride) for k in range(lanes)))
