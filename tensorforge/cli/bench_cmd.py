"""`tensorforge bench MODEL`: the model compiled (default schedules, or the best of tuning
records), its outputs checked against ONNX Runtime's, then both timed side by side at each
thread count asked for.

The calls are interleaved in blocks, a block of each per round over three rounds, so that a
machine that gets busier slows both alike; the table gives each one's median and the ratio
tensorforge / ONNX Runtime (below 1: tensorforge is faster).  Without onnxruntime the outputs are checked against the graph's NumPy op
references and tensorforge is timed alone.

Inputs come from --input files (as `run` reads them), else from the zoo model's own example,
else they are random: standard normal floats, zeros for integer and bool inputs (valid indices
for a gather, a valid length for a sequence).  A model with symbolic input dimensions takes them
from --shape, or from the shapes of the --input arrays.  A model that is not one static graph
(an If on a run-time condition, shapes computed at run time) runs as the Python API runs it,
compiled stretch by stretch at call time, when its inputs are given.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

from ..errors import InputError
from . import options
from .common import load_graph, progress
from .model_cmds import check_inputs, read_inputs
from .peer import compare, ort_session

WARMUP_CALLS = 3
ROUNDS = 3           # blocks of calls per function, the order rotated
QUIET_S = 0.1        # untimed calls before each block


def bench(opts: argparse.Namespace) -> int:
    import tensorforge
    from tensorforge.runtime.module import get_num_threads, set_num_threads

    thread_counts = opts.threads or [get_num_threads()]
    source, example, names = _source(opts.model)
    given = read_inputs(opts.input, names) if opts.input else None
    shapes = options.shapes(opts.shape)
    for name, array in (given or {}).items():
        shapes.setdefault(name, tuple(array.shape))
    progress(f"[1/4] importing {opts.model}")
    graph, static = _import(opts.model, shapes, given is not None)
    progress(f"[2/4] compiling {len(graph.nodes)} nodes for target {opts.target!r}"
             + ("" if static else f" (not one static graph: {graph.reason}; its stretches compile at call time)"))
    t0 = time.perf_counter()
    model = tensorforge.compile(graph, target=opts.target, opt_level=opts.opt_level, records=opts.records)
    if static:
        progress(f"      {len(model.spec.steps)} kernels in {time.perf_counter() - t0:.1f} s"
                 + (f"; tuning records applied to {model.info['tuned_groups']} kernel(s)" if opts.records else ""))
    named = given if given is not None else example if example is not None else _random_inputs(model)
    if static:
        check_inputs(model, named)
    inputs = [named[n] for n in model.input_names]

    sessions = {t: ort_session(source, t) for t in thread_counts}
    peer = sessions[thread_counts[0]]
    feeds = {n: named[n] for n in names}
    outs = model(*inputs)
    if peer is not None:
        ref, against = peer.run(None, feeds), "ONNX Runtime"
    elif not static:
        raise InputError(f"{opts.model} compiles at call time; checking its outputs needs onnxruntime "
                         "(pip install onnxruntime)")
    else:
        from tensorforge.graph.reference import run_reference
        ref, against = run_reference(graph, *inputs), "the NumPy op references (onnxruntime is not installed)"
    err, ok = compare(outs, ref)
    progress(f"[3/4] outputs checked against {against}: max abs difference {err:.1e} -> "
             f"{'OK' if ok else 'MISMATCH'}")
    if not ok:
        progress("      not timed: the outputs differ from the peer's beyond rtol 1e-3, atol 1e-4")
        return 1

    progress(f"[4/4] timing: {opts.repeat} calls of each per thread count, in interleaved blocks")
    print(f"model {os.path.basename(opts.model)}, target {opts.target!r}, inputs "
          + ", ".join(f"{n} {a.dtype.name}{list(a.shape)}" for n, a in zip(model.input_names, inputs)))
    print(f"{'threads':>7}  {'tensorforge ms':>14}  {'onnxruntime ms':>14}  {'tf/ort':>6}")
    for t in thread_counts:
        set_num_threads(t)
        session = sessions[t]
        calls = [lambda: model(*inputs)] + ([lambda s=session: s.run(None, feeds)] if session is not None else [])
        times = _interleaved(calls, opts.repeat)
        peer_ms, ratio = (_ms(times[1]), f"{times[0] / times[1]:.2f}") if session is not None else ("-", "-")
        print(f"{t:>7}  {_ms(times[0]):>14}  {peer_ms:>14}  {ratio:>6}")
    return 0


def _import(model: str, shapes: dict, inputs_given: bool) -> tuple:
    """(the model's graph, True) where it is one static graph; (the program that compile runs
    stretch by stretch, False) for one that is not (control flow on run-time values, shapes
    computed at run time) when its inputs are given, as the Python API compiles it."""
    from ..frontend.onnx import InputShapeError

    try:
        return load_graph(model, shapes), True
    except InputShapeError as err:
        if not inputs_given or not os.path.exists(model):
            raise InputShapeError(f"{err}; `bench` runs it so when its inputs are given with --input") from None
    from ..frontend import from_onnx
    return from_onnx(model, shapes=shapes), False


def _ms(seconds: float) -> str:
    """Milliseconds to four significant digits (a small model's call takes a few microseconds)."""
    return f"{seconds * 1e3:.4g}"


def _source(model: str) -> tuple:
    """(what ONNX Runtime loads: the file's path or the zoo model's bytes, the zoo model's
    example inputs by name or None, the model's input names in order)."""
    from tensorforge.frontend.onnx import runtime_input_names
    from tensorforge.testing import models

    if not os.path.exists(model) and model in models.NAMES:
        proto, feeds = models.get(model)
        return proto.SerializeToString(), dict(feeds), runtime_input_names(proto.graph)
    if not os.path.exists(model):
        return model, None, []          # load_graph says what is wrong with the name
    import onnx
    try:
        proto = onnx.load(model, load_external_data=False)
    except Exception as err:            # noqa: BLE001 - any unreadable file is the user's input
        raise InputError(f"cannot read {model} as an ONNX model: {err}") from None
    return model, None, runtime_input_names(proto.graph)


def _random_inputs(model) -> dict:
    from .precision_report import random_inputs
    return dict(zip(model.input_names, random_inputs(model, 0)))


def _interleaved(calls: list, repeat: int) -> list[float]:
    """Median seconds per call of each function: ROUNDS rounds, in each a block of calls of one
    function after the other (the order rotated from round to round, as a model that runs right
    after another finds its weights evicted by it), each block timed after QUIET_S seconds of
    untimed calls (a peer's thread pool spins for a while after its runs: timed right after
    them, two threads of tensorforge's ran on one core); the median of the blocks' medians."""
    from tensorforge.testing.timing import median_seconds

    each = max(1, -(-repeat // ROUNDS))
    samples: list[list[float]] = [[] for _ in calls]
    for r in range(ROUNDS):
        for k in [(r + j) % len(calls) for j in range(len(calls))]:
            samples[k].append(median_seconds(calls[k], each, warmup=WARMUP_CALLS if r == 0 else 1,
                                             warmup_s=QUIET_S))
    return [statistics.median(v) for v in samples]
