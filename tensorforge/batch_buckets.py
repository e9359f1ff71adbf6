"""Batch buckets: a model with a symbolic batch runs any batch size on a few compiled ones.

A staged model (staged.py) compiles each stretch of the graph once per concrete shape.  With a
symbolic batch that is one compile per batch size seen (seconds each for a CNN).  When a
stretch computes every batch row independently (graph/batch_split.py says so from its ops), a
batch of n rows can instead run as consecutive chunks whose sizes are *buckets*: by default
powers of two up to 64, the largest that fits first (7 = 4 + 2 + 1, 100 = 64 + 32 + 4).  Each
bucket is an ordinary specialization, compiled on first use, so once the buckets a workload
needs exist no batch size compiles anything, and a batch that is itself a bucket runs as one
piece, exactly as before.

A stretch is split only when (1) its inputs whose leading axis has n rows carry that axis to
every output through ops that keep rows apart, (2) nothing it returns is a constant, and (3)
each size it runs at (every chunk size, and every n) converts to the same graph with only the
split axes changed: no size-dependent constants, no graph that changes with the size.  The
judgement is made once per stretch and shape pattern; (3) once per size.  Everything else runs
as before, one specialization per shape; `model.info["batch_split"]` says why a stretch was
not split.
"""
from __future__ import annotations

from collections import ChainMap
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from .graph.batch_split import NotSeparable, same_but_split, split_axes
from .graph.ir import Graph, GraphError, Value

DEFAULT_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64)


def checked_buckets(buckets: Sequence[int] | None) -> tuple[int, ...]:
    """`buckets` as a sorted tuple; () turns splitting off.  Any other set must hold 1, so that
    every batch size is a sum of buckets."""
    if buckets is None:
        return ()
    out = []
    for b in buckets:
        if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or b < 1:
            raise ValueError(f"batch_buckets must be positive integers, got {b!r}")
        out.append(int(b))
    out = sorted(set(out))
    if out and out[0] != 1:
        raise ValueError(f"batch_buckets must include 1 so that every batch size is a sum of buckets, got {out}")
    return tuple(out)


def batch_chunks(rows: int, buckets: Sequence[int]) -> list[int]:
    """The chunk sizes a batch of `rows` runs as: the largest bucket that fits, repeatedly."""
    chunks, left = [], rows
    for b in sorted(buckets, reverse=True):
        while left >= b:
            chunks.append(b)
            left -= b
    return chunks


def leading_symbol(program: Any) -> str | None:
    """The symbol that is dimension 0 of the program's tensor inputs: the one symbol found
    there (some inputs may have a static or no leading dimension), else None."""
    found = {s.dims[0] for s in program.inputs if s.kind == "tensor" and s.dims and isinstance(s.dims[0], str)}
    return found.pop() if len(found) == 1 else None


@dataclass
class BatchSplit:
    """A graph that runs in chunks: `graph`, converted with `rows` batch rows, reads its inputs
    `inputs` (positions) cut along axis 0 and returns every output split along axis 0; `axes`
    are its values' split axes.  `sizes` records, per row count tried, whether the model
    converts to the same graph at that size.  For a stretch of a staged model, `stretch` holds
    what the stretch's plan said (end, reads, bound, outputs, aliases)."""
    graph: Graph
    inputs: tuple[int, ...]
    axes: dict[Value, int]
    rows: int
    stretch: Any = None
    sizes: dict[int, bool] = field(default_factory=dict)

    def fits(self, size: int, convert: Callable[[int], Graph | None]) -> bool:
        """Whether `convert(size)` (the model converted at `size` rows; None when it cannot be)
        is this graph with the split axes `size` long; converted once per size."""
        known = self.sizes.get(size)
        if known is None:
            other = convert(size) if size != self.rows else self.graph
            known = self.sizes[size] = other is not None and \
                same_but_split(self.graph, other, self.axes, self.rows, size) is None
        return known


def judge_graph(graph: Graph, inputs: Sequence[int], rows: int) -> BatchSplit | str:
    """The split of `graph` (converted with `rows` batch rows) along axis 0 of its inputs at
    positions `inputs`, or the reason it cannot be split."""
    if not inputs:
        return "no input has the batch as its leading dimension"
    try:
        axes = split_axes(graph, {graph.inputs[k]: 0 for k in inputs})
    except NotSeparable as err:
        return str(err)
    for v in graph.outputs:
        if axes.get(v) != 0:
            return f"output {v.name} does not keep the batch as its leading dimension"
    return BatchSplit(graph, tuple(inputs), axes, rows)


def batch_inputs(shapes: Sequence[tuple], rows: int) -> tuple[int, ...]:
    """The positions of the inputs whose leading dimension has `rows` rows."""
    return tuple(k for k, shape in enumerate(shapes) if len(shape) >= 1 and shape[0] == rows)


# -- stretches of a staged model -------------------------------------------------------------------

def cut(env: ChainMap, names: Sequence[str], lo: int, hi: int) -> ChainMap:
    """`env` with the values `names` cut to rows [lo, hi) (views: axis 0 of a C-ordered array)."""
    return env.new_child({n: env[n][lo:hi] for n in names})


def split_names(split: BatchSplit) -> tuple[str, ...]:
    """The env names of a stretch's split inputs."""
    return tuple(split.stretch.inputs[k] for k in split.inputs)


def judge_stretch(segment: Any, env: ChainMap, rows: int) -> BatchSplit | str:
    """The split of a staged model's stretch (`segment`, planned from `env`, where the batch
    has `rows` rows), or the reason it cannot be split."""
    if segment.graph is None or segment.consts:
        return "it computes constants from the shapes"
    found = judge_graph(segment.graph, batch_inputs([np.shape(env[n]) for n in segment.inputs], rows), rows)
    if isinstance(found, BatchSplit):
        found.stretch = segment
    return found


def stretch_converter(split: BatchSplit, program: Any, start: int, env: ChainMap) -> Callable[[int], Graph | None]:
    """convert(size): the graph of the stretch at `start` planned with its split inputs `size`
    rows long (cut from `env`), None when that plan is not the same stretch."""
    plan = split.stretch
    names = split_names(split)

    def convert(size: int) -> Graph | None:
        sub = env if size == np.shape(env[names[0]])[0] else cut(env, names, 0, size)
        try:
            other = program.plan(start, sub, set(plan.bound))
        except (GraphError, ValueError, NotImplementedError):     # the model itself refuses the size
            return None
        if other is None or other.consts or other.end != plan.end or other.inputs != plan.inputs \
                or other.bound != plan.bound or other.outputs != plan.outputs:
            return None
        return other.graph

    return convert
