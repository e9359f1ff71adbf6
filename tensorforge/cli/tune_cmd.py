"""`tensorforge tune`: tune a model's kernels, append the records, and sum up what they give.

Progress (the task list, a line or a live table per round, notes) goes to stderr; the closing
summary goes to stdout.  The summary is read back from the record file with
autotune/report.py, the same way `tensorforge inspect --records` reads it, so the two report
the same default time, best time and speedup for the same records.
"""
from __future__ import annotations

import argparse
import math
import os
from typing import Sequence

from . import options
from .common import format_time, load_graph, progress

COLD_REPEAT = 5         # timings per candidate with --cold-cache, each one run after a flush


def tune_model(opts: argparse.Namespace) -> int:
    from ..autotune import LocalRunner, extract_tasks, tune
    from ..autotune.task import other_forms
    from ..autotune.tuner import runner_threads

    if opts.plot:
        _check_plotting()
    graph = load_graph(opts.model, options.shapes(opts.shape))
    own = extract_tasks(graph, target=opts.target)
    tasks = own + other_forms(graph, target=opts.target, known=own) if opts.algorithms else own
    if not tasks:
        progress(f"{opts.model} has no tunable kernels: nothing to tune")
        return 0
    progress(f"{len(tasks)} tunable task(s):")
    for t in tasks:
        progress(f"  {t.name} x{t.occurrences}  ({t.config_space.size} configs)")
    measure = {"num_threads": opts.threads, "min_repeat_ms": opts.min_repeat_ms}
    if opts.cold_cache:
        # each timing one run after a flush (back-to-back runs after the first find the data hot)
        measure.update(flush_cache=True, number=1, repeat=COLD_REPEAT, min_repeat_ms=0.0)
    if opts.pool:
        from ..autotune.pool import DaskRunner
        runner = DaskRunner(opts.pool, device=opts.device, **measure)
    else:
        runner = LocalRunner(**measure)
    threads = runner_threads(runner)
    try:
        tune(tasks, trials=opts.trials, records=opts.records, tuner=opts.tuner, seed=opts.seed,
             time_budget=opts.time_budget, total_trials=opts.total_trials, runner=runner, confirm=opts.confirm)
    finally:
        runner.close()
    if opts.confirm_model:
        _confirm_in_model(opts, graph)
    changes = _form_changes(graph, opts, threads) if len(own) < len(tasks) else []
    print(format_tune_summary(tasks, opts.records, threads, {t.key for t in own}, changes))
    if opts.plot:
        _plot(opts, tasks)
    flag = f" --threads {opts.threads}" if opts.threads else ""
    progress(f"records in {opts.records}; apply them with: tensorforge compile {opts.model} --records "
             f"{opts.records}{flag}")
    return 0


def _form_changes(graph, opts: argparse.Namespace, threads: int | None) -> list:
    """The convs the records make run as another form than the default's (FormChange each)."""
    from ..autotune.algorithms import RecordChoice
    from ..graph.passes.alter_layout_winograd import choosing_tiles
    from ..graph.pipeline import optimize
    from ..runtime.module import get_num_threads
    from ..target import Target

    target = Target.parse(opts.target)
    choice = RecordChoice(opts.records, target, threads or get_num_threads())
    with choosing_tiles(choice):
        optimize(graph, target)
    return choice.changes


def format_tune_summary(tasks, records: str, threads: int | None, own: set | None = None,
                        changes: Sequence = ()) -> str:
    """One line per task (default -> best time, speedup, configs measured) and the total over
    the model's kernels weighted by occurrences, from the records of `tasks` measured with
    `threads` threads.  Tasks whose key is not in `own` (all are, by default) are forms the
    model's convs could run as: listed, not counted, except where a FormChange of `changes`
    runs a conv as one (its time replaces the default form's best)."""
    from ..autotune.records import iter_records
    from ..autotune.report import format_speedup, speedup, summarize

    keys = {t.key for t in tasks}
    summaries = {s.task.key: s for s in summarize(
        r for r in iter_records(records) if r.task.key in keys and r.measured_with(threads))}
    lines, before, after, left_out = [], 0.0, 0.0, 0
    for task in tasks:
        s = summaries.get(task.key)
        mine = own is None or task.key in own
        head = f"{task.name} x{task.occurrences}{'' if mine else ' (another form)'}:"
        if s is None or s.trials == 0:
            lines.append(f"{head} not measured")
            left_out += 1
            continue
        counts = f"{s.trials} configs measured, {sum(s.errors.values())} errors"
        default, best = s.default_cost, s.best_cost
        if not math.isfinite(best):
            lines.append(f"{head} no correct run ({counts})")
            left_out += 1
            continue
        shown_default = format_time(default) if math.isfinite(default) else "no correct run"
        lines.append(f"{head} default {shown_default} -> best {format_time(best)} "
                     f"({format_speedup(s.speedup)}; {counts})")
        if not mine:
            continue
        if math.isfinite(default):
            before += task.occurrences * default
            after += task.occurrences * best
        else:
            left_out += 1
    for change in changes:           # one conv: the chosen form's best instead of the default form's
        lines.append(f"a conv runs as {change.describe()}")
        after += change.seconds[change.chosen] - change.seconds[change.default]
    total = f"tuned kernels, weighted by occurrences: {format_time(before)} -> {format_time(after)} per run"
    if after > 0:
        total += f" ({format_speedup(speedup(before, after))})"
    if left_out:
        total += f"; {left_out} task(s) without a measured default and best left out"
    return "\n".join(lines + [total])


def _confirm_in_model(opts: argparse.Namespace, graph) -> None:
    from ..autotune import confirm_in_model
    from ..runtime.module import get_num_threads, set_num_threads

    progress("confirming in the model: each kernel's default and best configs timed where the model runs them")
    before_threads = get_num_threads()
    if opts.threads:
        set_num_threads(opts.threads)
    try:
        confirm_in_model(graph, opts.records, target=opts.target, top=max(1, opts.confirm), forms=opts.algorithms,
                         log=progress)
    except NotImplementedError as err:        # a device model: the records stay as tuned
        progress(f"skipped: {err}")
    finally:
        set_num_threads(before_threads)


def _check_plotting() -> None:
    """Fail before tuning, not after it, when --plot cannot draw."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        from ..errors import MissingDependencyError
        raise MissingDependencyError('--plot needs matplotlib: pip install "tensorforge[plot]"')


def _plot(opts: argparse.Namespace, tasks) -> None:
    from ..autotune.records import iter_records
    from ..autotune.report import plot_curves

    keys = {t.key for t in tasks}
    plot_curves([r for r in iter_records(opts.records) if r.task.key in keys], opts.plot,
                title=f"tuning curves: {os.path.basename(opts.model)}")
    progress(f"curves drawn in {opts.plot}")
