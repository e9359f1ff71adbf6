"""Tune zoo models for `benchmarks/e2e.py --tuned`: one budget per model, records written to
benchmarks/records/MODEL.jsonl (a rerun resumes them), tuning wall time printed per model.

    python benchmarks/tune_models.py --budget resnet18=10m,mobilenet_v1=10m,dqn=3m --threads 1 [--confirm-model]
    python benchmarks/e2e.py --tuned --threads 1

Kernels are measured with `--threads` threads: tune for the thread count you compare at.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    from tensorforge.autotune import LocalRunner, extract_tasks, tune
    from tensorforge.autotune.tuner import parse_duration
    from tensorforge.frontend import from_onnx
    from tensorforge.testing import models

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--budget", default="resnet18=10m,mobilenet_v1=10m,bert_encoder=5m,dqn=3m,dcgan_generator=2m",
                   help="MODEL=DURATION,... (durations like 90s, 10m)")
    p.add_argument("--records", default=os.path.join(HERE, "records"), help="directory of the record files")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--tuner", default="xgb")
    p.add_argument("--target", default="c -mcpu=native")
    p.add_argument("--confirm", type=int, default=3, help="side-by-side re-measurement of the N best per task")
    p.add_argument("--confirm-model", action="store_true",
                   help="then time each task's default and best configs inside the running model "
                        "(tensorforge.autotune.confirm_in_model); those times pick the applied config")
    p.add_argument("--confirm-only", action="store_true",
                   help="no tuning: only re-measure the recorded best configs and defaults side by side")
    opts = p.parse_args()
    plan = []
    for item in opts.budget.split(","):
        name, _, budget = item.partition("=")
        if name not in models.NAMES:
            raise SystemExit(f"unknown zoo model {name!r}; known: {', '.join(models.NAMES)}")
        plan.append((name, parse_duration(budget)))
    os.makedirs(opts.records, exist_ok=True)
    summary = []
    for name, seconds in plan:
        proto, _ = models.get(name)
        graph = from_onnx(proto)
        tasks = extract_tasks(graph, target=opts.target, alternatives=True)   # as `tensorforge tune`
        path = os.path.join(opts.records, f"{name}.jsonl")
        print(f"== {name}: {len(tasks)} tasks, budget {seconds:.0f} s, records {path}", flush=True)
        t0 = time.perf_counter()
        with LocalRunner(num_threads=opts.threads, min_repeat_ms=5) as runner:
            if opts.confirm_only:
                from tensorforge.autotune import confirm
                confirm(tasks, path, top=opts.confirm, runner=runner)
            else:
                results = tune(tasks, records=path, tuner=opts.tuner, time_budget=seconds, runner=runner,
                               live=False, confirm=opts.confirm)
        if opts.confirm_model:
            from tensorforge.autotune import confirm_in_model
            from tensorforge.runtime.module import set_num_threads
            set_num_threads(opts.threads)        # the model runs as the kernels were measured
            confirm_in_model(graph, path, target=opts.target, top=max(1, opts.confirm))
        if opts.confirm_only:
            continue
        wall = time.perf_counter() - t0
        done = [(t, r) for t, r in results.items() if r.default_cost < float("inf") and r.cost < float("inf")]
        if len(done) < len(results):
            print(f"   {len(results) - len(done)} of {len(results)} tasks got no measured default within the budget",
                  flush=True)
        before = sum(t.occurrences * r.default_cost for t, r in done)
        after = sum(t.occurrences * r.cost for t, r in done)
        trials = sum(r.trials for r in results.values())
        summary.append((name, wall, trials, before, after))
        print(f"== {name}: {wall:.0f} s, {trials} configs measured; tuned kernels {before * 1e3:.3f} -> "
              f"{after * 1e3:.3f} ms per run", flush=True)
    print("\n| model | tuning wall time | configs measured | tunable kernels, default -> tuned |")
    print("|---|---|---|---|")
    for name, wall, trials, before, after in summary:
        print(f"| {name} | {wall / 60:.1f} min | {trials} | {before * 1e3:.3f} -> {after * 1e3:.3f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
