"""Batch buckets: a model with a symbolic batch runs any batch size on a few compiled ones.

A staged model (staged.py) compiles each stretch of the graph once per concrete shape.  With a
symbolic batch that is one compile per batch size seen (seconds each for a CNN).  When a
stretch computes every batch row independently (graph/batch_split.py says so from its ops), a
batch of n rows can instead run as consecutive chunks whose sizes are *buckets*: by default
powers of two up to 64, the largest that fits first (7 = 4 + 2 + 1, 100 = 64 + 32 + 4).  Each
bucket is an ordinary specialization, compiled on first use, so once the buckets a workload
needs exist no batch size compiles anything, and a batch that is itself a bucket runs as one
piece, exactly as before.  No call compiles more than one model: a first call with batch 5 and
no buckets compiles 5 itself, not 4 and 1.

Which chunks a batch runs as is measured, not guessed: chunks cost no extra compute, padding the
rows left over up to the next bucket (3 as 4) costs fewer passes over the weights, which wins
for a model whose batch-1 time is mostly streaming its weights (a DQN's fully connected layer);
and a batch size that keeps coming (HOT_CALLS calls) also tries its own specialization, which
is compiled then: a new batch size waits for no compile once its buckets exist, and a frequent
one runs as fast as a model compiled for it.  Each candidate runs TRIALS times, then the fastest
by its median is kept (BatchSplit.plan).

A stretch is split only when (1) its inputs whose leading axis has n rows carry that axis to
every output through ops that keep rows apart, (2) nothing it returns is a constant, and (3)
each size it runs at (every chunk size, and every n) converts to the same graph with only the
split axes changed: no size-dependent constants, no graph that changes with the size.  The
judgement is made once per stretch and shape pattern; (3) once per size.  Everything else runs
as before, one specialization per shape; `model.info["batch_split"]` says why a stretch was
not split.
"""
from __future__ import annotations

import statistics
import time
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


# a plan: the chunks a batch runs as, each (bucket, the batch rows it carries): fewer rows than
# its bucket are padded with copies of the last row, whose outputs are dropped
Plan = tuple[tuple[int, int], ...]

# a padded plan is tried when the padded bucket has at most this many times the rows it carries
PAD_LIMIT = 1.5
# a batch size that ran this many times in chunks also tries its own specialization
HOT_CALLS = 8
# the fastest plan runs, but every REVISIT-th call the one with the fewest runs among those
# within REVISIT_WITHIN of the fastest
REVISIT = 64
REVISIT_WITHIN = 1.25
RECENT = 9                    # runs a plan's time is the median of
# runs of each candidate before the choice: the median of three leaves out the first run of a
# model compiled for the plan, which pays one-time costs (its arena's and buffers' page faults)
TRIALS = 3
WARM_SAMPLES = 2              # warm runs per bucket


def candidate_plans(rows: int, buckets: Sequence[int]) -> list[Plan]:
    """The plans for a batch of `rows`: the exact chunks (`batch_chunks`), and, when the rows
    left below the largest bucket are not a bucket, the same with those rows padded up to the
    next bucket (3 as 4, 7 as 8, 100 as 64 + 64 with the second carrying 36 rows).  Chunks cost
    less compute, padding fewer passes over the weights: which wins is measured (BatchSplit)."""
    exact = tuple((b, b) for b in batch_chunks(rows, buckets))
    plans = [exact]
    top = max(buckets)
    whole, rest = divmod(rows, top) if rows > top else (0, rows)
    up = min((b for b in buckets if b >= rest), default=None)
    if rest and up is not None and up != rest and up <= PAD_LIMIT * rest:
        plans.append(((top, top),) * whole + ((up, rest),))
    return plans


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
    # per batch size, per plan run: (runs, median seconds of its compiled models in its last
    # RECENT runs); medians, since chunks that alternate models can have lucky fast runs
    timings: dict[int, dict[Plan, tuple[int, float]]] = field(default_factory=dict)
    # per bucket: seconds of its compiled model run again right after itself (warm: its weights
    # in cache, as a batch of that size alone runs), WARM_SAMPLES of them
    warm: dict[int, list] = field(default_factory=dict)
    _recent: dict[tuple, list] = field(default_factory=dict)

    def plan(self, rows: int, plans: Sequence[Plan], missing: Callable[[Plan], int] = lambda p: 0) -> Plan:
        """The plan to run `rows` with.  Each candidate runs TRIALS times first (in order; one that by
        its buckets' warm times cannot win is skipped), then the fastest, but every REVISIT-th
        call the least-run one of those close to it, so that no plan is judged by cold runs.  A
        batch size that ran HOT_CALLS times also tries its own specialization, `((rows, rows),)`,
        compiled then: chunks that alternate models can evict each other's weights from the
        caches for several runs (the exported DQN at batch 3: 2 + 1 in 1.1 ms, 4[3] in 0.9 ms,
        its own specialization 0.63 ms), which no time of the buckets predicts.

        No call compiles more than one model: a candidate with two or more buckets not compiled
        yet (`missing(plan)` counts them) is not tried, and when no candidate is left, the batch
        size runs as its own specialization (a first call with batch 5 compiles 5, not 4 and 1;
        with batch 3, bucket 4 for 4[3])."""
        tried = self.timings.setdefault(rows, {})
        calls = sum(runs for runs, _ in tried.values())
        own = ((rows, rows),)
        if calls >= HOT_CALLS or own in tried:
            plans = [*plans, own]
        for p in plans:
            if tried.get(p, (0, 0.0))[0] < TRIALS and \
                    (p is plans[0] or p == own or p in tried or self._might_win(p, tried)) and missing(p) <= 1:
                return p
        plans = [p for p in plans if p in tried]
        if not plans:
            return own
        fastest = min(plans, key=lambda p: tried[p][1])
        if calls % REVISIT == 0:        # the least-run plan that might yet be the fastest
            close = [p for p in plans if tried[p][1] <= REVISIT_WITHIN * tried[fastest][1]]
            return min(close, key=lambda p: tried[p][0])
        return fastest

    def choose(self, rows: int, buckets: Sequence[int], convert: Callable[[int], Graph | None],
               compiled: Callable[[int], bool]) -> Plan | None:
        """The plan to run `rows` with (`plan`) among the candidates whose every size converts to
        this graph (`fits`, with `convert`), None when none does; `compiled(size)` says whether
        the model of a bucket exists."""
        plans = [p for p in candidate_plans(rows, buckets)
                 if all(self.fits(size, convert) for size in {rows, *(b for b, _ in p)})]
        if not plans:
            return None
        return self.plan(rows, plans, lambda p: sum(not compiled(b) for b in {b for b, _ in p}))

    def best(self, rows: int) -> Plan | None:
        """The fastest plan run so far for `rows`."""
        tried = self.timings.get(rows)
        return min(tried, key=lambda p: tried[p][1]) if tried else None

    def timed(self, rows: int, size: int, model: Callable, *args: Any) -> tuple[Any, float]:
        """(`model(*args)`, its seconds): one chunk of bucket `size` on its compiled model.  The
        first WARM_SAMPLES times a bucket runs, it runs once more right after, for its warm
        time."""
        began = time.perf_counter()
        outs = model(*args)
        seconds = time.perf_counter() - began
        if size != rows and len(self.warm.get(size, ())) < WARM_SAMPLES:
            began = time.perf_counter()
            model(*args)
            self.warm.setdefault(size, []).append(time.perf_counter() - began)
        return outs, seconds

    def _per_row(self) -> float:
        return min((min(t) / b for b, t in self.warm.items() if t), default=0.0)

    def _might_win(self, plan: Plan, tried: dict) -> bool:
        """Whether an untried plan could beat the best plan tried: its chunks at their buckets'
        warm times, a bucket not run yet at the best warm time per row (padding 3 rows to 4
        cannot win where a row alone costs what a row of a pair does; it compiles bucket 4)."""
        per_row = self._per_row()
        best = min((t for _, t in tried.values()), default=0.0)
        guess = sum(min(self.warm[size]) if self.warm.get(size) else size * per_row for size, _ in plan)
        return per_row <= 0 or guess < best

    def record(self, rows: int, plan: Plan, chunk_seconds: Sequence[float]) -> None:
        """One run of `plan` for `rows`: its chunks' compiled models took `chunk_seconds`."""
        tried = self.timings.setdefault(rows, {})
        runs = tried.get(plan, (0, 0.0))[0]
        tried[plan] = (runs + 1, self._median(("plan", rows, plan), sum(chunk_seconds)))

    def _median(self, key: tuple, seconds: float) -> float:
        recent = self._recent.setdefault(key, [])
        recent.append(seconds)
        del recent[:-RECENT]
        return statistics.median(recent)

    def fits(self, size: int, convert: Callable[[int], Graph | None]) -> bool:
        """Whether `convert(size)` (the model converted at `size` rows; None when it cannot be)
        is this graph with the split axes `size` long; converted once per size."""
        known = self.sizes.get(size)
        if known is None:
            other = convert(size) if size != self.rows else self.graph
            known = self.sizes[size] = other is not None and \
                same_but_split(self.graph, other, self.axes, self.rows, size) is None
        return known


def describe(plan: Plan | None) -> str:
    """A plan as text: "4+2+1", "4[3]" for a chunk of 4 carrying 3 rows."""
    if not plan:
        return "whole"
    return "+".join(str(size) if used == size else f"{size}[{used}]" for size, used in plan)


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

def padded(a: Any, size: int) -> Any:
    """`a` (a NumPy array or torch tensor) with its last row repeated up to `size` rows."""
    extra = size - a.shape[0]
    if extra <= 0:
        return a
    if isinstance(a, np.ndarray):
        return np.concatenate([a, np.repeat(a[-1:], extra, axis=0)])
    import torch
    return torch.cat([a, a[-1:].expand(extra, *a.shape[1:])])


def cut(env: ChainMap, names: Sequence[str], lo: int, hi: int, size: int | None = None) -> ChainMap:
    """`env` with the values `names` cut to rows [lo, hi) (views: axis 0 of a C-ordered array),
    padded to `size` rows."""
    return env.new_child({n: padded(env[n][lo:hi], size or hi - lo) for n in names})


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
