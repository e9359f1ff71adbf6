"""Confirmation in the model: a task's best configs re-timed inside the kernels the model runs.

A task is the master op alone (task.py): its configs are timed without the fused epilogue
(bias, activation, residual add, a layout change) and without the groups' real neighbours.
Usually the fastest config alone is the fastest in the model too, but not always: on the DCGAN
generator two transposed-conv tasks whose tuned configs won 2-5% alone ran 4-11% slower than
their defaults once nchwc_to_nchw + add + relu were fused behind them.

`confirm_in_model(graph, records)` compiles the model with default schedules and, for every
tunable task, builds the task's fused groups (with their epilogues, as `compile` lowers them)
under its default and its `top` fastest recorded configs.  Each candidate replaces the task's
kernels in the running model, must give the model's outputs, and is timed there: the model
runs whole, `runs` times per round and `rounds` rounds in turn, and a candidate's time is the
time of one of the task's own kernels in those runs (their mean over the task's occurrences,
the unit of every record), so their inputs and weights come from where the model leaves them (timed alone in a loop, the weights stay in cache: on the DCGAN generator
the configs of one layer then differ by 1%, in the model by 10%).  The results are appended
to the record file as "model" records, which decide the task's config from then on (see
records.best_configs): the default wins unless a tuned config is faster where it runs.
"""
from __future__ import annotations

import math
import time
from typing import Callable

import numpy as np

from ..te.space import config_key
from .measure import ErrorKind
from .records import Record, RecordWriter, load_records
from .task import Task, task_of_group


def _candidates(task: Task, records: list[Record], top: int) -> list:
    """The default and the `top` configs with the fastest recorded times (any earlier stage)."""
    space = task.config_space
    best: dict = {}
    for r in records:
        if r.task.key == task.key and r.ok and r.stage != "model":
            key = config_key(r.config)
            if key not in best or r.cost < best[key][0]:
                best[key] = (r.cost, r.config)
    ranked = sorted(best.values(), key=lambda item: item[0])
    default = space.default_config()
    configs = [default]
    for _, config in ranked:
        if len(configs) > top:
            break
        try:
            c = space.from_json(config)
        except Exception:            # a record of an older space: nothing to confirm
            continue
        if c != default and c not in configs:
            configs.append(c)
    return configs


def confirm_in_model(graph, records: str, target="c", top: int = 3, rounds: int = 5, *,
                     runs: int = 10, seed: int = 0, forms: bool = True,
                     log: Callable[[str], None] | None | bool = True) -> dict[Task, object]:
    """Time each tunable task's default and `top` best recorded configs inside the running model
    (module docstring) with the current thread count; append "model" records to `records`.
    With `forms`, the kernels of the forms the model's 3x3 stride-1 convs could run as and do
    not by default (autotune/algorithms.py) that have records are timed too, each in the model
    with every such conv in that form, so that compile compares the forms by where they run.
    Returns {task: the config chosen (a ConfigEntity)} for the tasks it timed."""
    from ..graph.ir import Graph
    from ..graph.passes.alter_layout_winograd import choosing_tiles
    from ..ops.nn_conv_winograd import TILES
    from ..runtime.module import get_num_threads
    from ..target import Target
    from .algorithms import forced, form_name, is_form

    if not isinstance(graph, Graph):
        raise TypeError(f"confirm_in_model expects a tensorforge Graph, got {type(graph).__name__}")
    say = print if log is True else (log or (lambda line: None))
    tgt = Target.parse(target)
    threads = get_num_threads()
    previous = [r for r in load_records(records) if r.task.target == str(tgt) and r.measured_with(threads)]
    chosen: dict[Task, object] = {}
    seen: set = set()
    _confirm(graph, None, previous, records, tgt, threads, top, rounds, runs, seed, say, chosen, seen)
    # the forms' kernels with records, each timed in the model with every eligible conv in its form
    form_keys = {r.task.key for r in previous if r.ok and is_form(r.task)} if forms else set()
    if form_keys:
        for tile in (0, *TILES):
            with choosing_tiles(forced(tile)):
                _confirm(graph, form_name(tile), previous, records, tgt, threads, top, rounds, runs, seed, say,
                         chosen, seen, only=form_keys)
    return chosen


def _confirm(graph, form: str | None, previous: list[Record], records: str, tgt, threads: int, top: int,
             rounds: int, runs: int, seed: int, say: Callable, chosen: dict, seen: set,
             only: set | None = None) -> None:
    """confirm_in_model's work on `graph` compiled as the tile chooser in effect makes it: the
    tasks not in `seen` (each timed one added to it) and, with `only`, whose key is in `only`.  With a
    `form` (every eligible conv forced into one form), a task is timed even with only its
    default config: its time in the model is what the forms are compared by."""
    from ..build_module import build
    from ..driver import compile as compile_model
    from ..ir.dtype import random_array
    from ..lowering import lower_group

    model = compile_model(graph, target=tgt)             # every kernel at its default schedule
    ex = model.executor
    if not hasattr(ex, "run_with"):
        raise NotImplementedError(f"confirming configs inside the running model swaps kernels in the graph executor, "
                                  f"which {tgt.kind} models cannot do yet; the tuning records apply as they are")
    groups = model.info["groups"]
    by_task: dict[Task, list[int]] = {}
    for k, g in enumerate(groups):                       # step k runs group k
        task = task_of_group(g, tgt) if model.spec.steps[k]["kind"] == "kernel" else None
        if task is not None and task.key not in seen and (only is None or task.key in only):
            by_task.setdefault(task, []).append(k)
    rng = np.random.default_rng(seed)
    named = {name: random_array(shape, dtype.name, rng) for name, shape, dtype in ex.input_info}
    reference = ex.run(**named)
    with RecordWriter(records) as writer:
        for ti, (task, steps) in enumerate(by_task.items()):
            configs = _candidates(task, previous, top)
            if len(configs) < (1 if form else 2):
                continue
            seen.add(task.key)
            funcs, names = [], []
            for ci, c in enumerate(configs):
                names.append([f"m{ti}_c{ci}_k{k}" for k in steps])
                funcs += [lower_group(groups[k], tgt, name, c).func for k, name in zip(steps, names[-1])]
            module = build(funcs, target=tgt)
            variants = [{k: module.raw_function(name) for k, name in zip(steps, row)} for row in names]
            ok = []
            for swapped in variants:
                got = ex.run_with(named, swapped)
                ok.append(all(np.allclose(a, b, rtol=1e-3, atol=1e-3, equal_nan=True)
                              for a, b in zip(got, reference)))
            totals = [[] for _ in configs]
            for _ in range(rounds):
                for ci, swapped in enumerate(variants):
                    if not ok[ci]:
                        continue
                    timings = [0.0] * len(model.spec.steps)
                    for _ in range(runs):
                        ex.run_with(named, swapped, timings)
                    totals[ci].append(kernel_seconds(timings, steps, runs))
            now = time.time()
            for ci, c in enumerate(configs):
                if ok[ci]:
                    rec = Record(task, c.to_json(), tuple(totals[ci]), timestamp=now, stage="model",
                                 threads=threads)
                else:
                    rec = Record(task, c.to_json(), (), ErrorKind.WRONG, "differs from the default inside "
                                 "the model", timestamp=now, stage="model", threads=threads)
                writer.write(rec)
            times = [min(t) if ok[ci] else math.inf for ci, t in enumerate(totals)]
            best = min(range(len(configs)), key=lambda ci: times[ci])
            chosen[task] = configs[best]
            what = "the default" if best == 0 else f"config {configs[best].index}"
            where = f"in the model with its convs {form}" if form else "in the model"
            say(f"{task.name} x{len(steps)}: {where}, {what} "
                f"({times[best] * 1e3:.3f} ms per kernel; default {times[0] * 1e3:.3f} ms)")


def kernel_seconds(timings, steps, runs: int) -> float:
    """Seconds of one of a task's kernels from the executor's per-step `timings` summed over
    `runs` runs: the task's `steps` averaged, the unit of every record's time (summed, a task
    that occurs 16 times had its "model" time counted 16 times by `tune`'s closing total, which
    weights each task by its occurrences)."""
    return sum(timings[k] for k in steps) / runs / len(steps)
