"""The paper's Figure 12 on this CPU: best-so-far GFLOP/s against measured trials for the
model-based tuner (simulated annealing over the learned cost model), random search and the
genetic algorithm, on ResNet-18's conv layers C2, C6, C9 and its dense layer.

    python benchmarks/tuning_curves.py                      # all layers, 3 seeds, 200 trials
    python benchmarks/tuning_curves.py --layers C9,dense --seeds 1 --trials 100 --out OUT
    python benchmarks/tuning_curves.py --templates direct   # every conv as a direct conv2d_nchwc
    python benchmarks/tuning_curves.py --layers C6 --tuners random --seeds 1 --trials 4 \
        --random-trials 6 --out OUT                         # a smoke run (a minute or less)

Layers.  Any conv layer of the paper's Table 2 that ResNet-18 has (C1, C2, C4-C12, as named in
benchmarks/ops.py) and `dense`.  A layer's task is the one ResNet-18 compiles to: with
`--templates model` (the default) that is the template the compiled model runs, Winograd
(conv2d_winograd_nchwc) for the 3x3 stride-1 layers C2, C6, C9, C12 and the direct blocked conv
for the others; `--templates direct` stops the graph optimizer before the Winograd rewrite, so
every conv is tuned as a direct conv2d_nchwc (its files get a `-direct` suffix).  GFLOP/s always
count the direct convolution's multiply-adds (as benchmarks/ops.py does), so the two templates
compare on one scale and a Winograd layer can show an effective rate above the FMA peak.

Method.  Each config of a layer is measured once (1 thread, median of repeats) and the result
is kept in the layer's measurement file `OUT/LAYER.measured.jsonl`; every tuner run reads
measured configs from there instead of timing them again.  So all tuners are compared on the
same costs (noise cannot favour one of them) and a 200-trial run costs nothing once its
configs are known.  The reference is random search with `--random-trials` (1000) trials, seed
0: the target is 95% of the best throughput it finds.  Every search starts from scratch, as in
the paper: the template's heuristic default is not measured first (it is shown for
comparison).  Each tuner run writes its trials, in order, to `OUT/LAYER.TUNER.SEED.jsonl`; a killed run resumes from those files.

Prints a table (per layer and tuner: median over seeds of the trials needed to reach the
target, and of the best GFLOP/s after `--trials`) and draws OUT/tuning_curves.png.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

from ops import LAYERS  # noqa: E402  (benchmarks/ is on sys.path when this file runs as a script)

TEMPLATES = ("model", "direct")


def layer_of_task(task) -> tuple | None:
    """(kind, hw, ic, oc, k, s) of a task in the terms of benchmarks/ops.py's Layer (the paper's
    Table 2), read from the task's logical shapes whatever its layout or template; None for a
    task that is not a conv2d or the dense layer.  Blocked data (N, C/c, H, W, c) counts C
    channels; a direct conv's weight is (OC/b, IC, KH, KW, b); a Winograd conv's transformed
    weight is (alpha, alpha, OC/b, IC, b) and the op is always 3x3 stride 1."""
    data = task.inputs[0][0]
    attrs = dict(task.attrs)
    if task.template == "matmul_packed.cpu" and len(data) == 2 and data[0] == 1:
        return ("dense", 1, data[1], attrs.get("units"), 1, 1)
    if task.template not in ("conv2d_nchwc.cpu", "conv2d_winograd_nchwc.cpu") or len(data) not in (4, 5):
        return None
    channels = data[1] * (data[4] if len(data) == 5 else 1)
    if data[2] != data[3]:
        return None
    weight = task.inputs[1][0]
    if task.template == "conv2d_winograd_nchwc.cpu":
        return ("conv", data[2], channels, weight[2] * weight[4], 3, 1)
    strides = tuple(attrs.get("strides", (1, 1)))                # a direct conv2d_nchwc
    if strides[0] != strides[1] or weight[2] != weight[3]:
        return None
    return ("conv", data[2], channels, weight[0] * weight[4], weight[2], strides[0])


def layer_tasks(names, templates: str = "model"):
    """The tuning task of each named layer (benchmarks/ops.py's C1-C12 and dense) as ResNet-18
    compiles it: with templates="model" the templates the compiled model runs (Winograd for the
    3x3 stride-1 convs), with templates="direct" the graph optimizer stops before the Winograd
    rewrite (opt_level 2) so that every conv is a direct conv2d_nchwc."""
    from tensorforge.autotune import extract_tasks
    from tensorforge.frontend import from_onnx
    from tensorforge.testing import models

    proto, _ = models.get("resnet18")
    tasks = extract_tasks(from_onnx(proto), target="c", opt_level=3 if templates == "model" else 2)
    found = {layer_of_task(t): t for t in reversed(tasks)}
    out = {}
    for name in names:
        layer = LAYERS[name]
        key = (layer.kind, layer.hw, layer.ic, layer.oc, layer.k, layer.s)
        if key not in found:
            raise SystemExit(f"no task of ResNet-18 matches layer {name} ({layer.shape()}) with the "
                             f"{templates!r} templates; ResNet-18 has no such layer")
        out[name] = found[key]
    return out


class MemoBuilder:
    """Builds only the configs that the measurement file does not hold yet."""

    def __init__(self, inner, known: dict):
        self.inner, self.known = inner, known
        self.n_parallel = getattr(inner, "n_parallel", 2)

    def build(self, inputs):
        from tensorforge.autotune.measure import BuildResult

        todo = [i for i in inputs if i.config.key not in self.known]
        built = dict(zip((i.config.key for i in todo), self.inner.build(todo))) if todo else {}
        return [built.get(i.config.key) or BuildResult(i, symbol="<measured before>") for i in inputs]


class MemoRunner:
    """Answers from the measurement file; times the rest and appends them to it."""

    def __init__(self, inner, known: dict, writer):
        self.inner, self.known, self.writer = inner, known, writer
        self.measured_now = 0

    def run(self, builds):
        from tensorforge.autotune.records import Record

        todo = [b for b in builds if b.input.config.key not in self.known]
        for b, m in zip(todo, self.inner.run(todo) if todo else []):
            self.known[b.input.config.key] = m
            self.writer.write(Record(b.input.task, b.input.config.to_json(), m.costs, m.error, m.message,
                                     m.build_s, m.run_s, m.timestamp))
            self.measured_now += 1
        return [self.known[b.input.config.key] for b in builds]


def load_known(path, task) -> dict:
    from tensorforge.autotune.measure import MeasureResult
    from tensorforge.autotune.records import load_records
    from tensorforge.te.space import ConfigError

    known = {}
    for r in load_records(path) if os.path.exists(path) else []:
        if r.task.key != task.key:
            continue
        try:
            key = task.config_space.from_json(r.config).key
        except ConfigError:
            continue
        known[key] = MeasureResult(r.costs, r.error, r.message, r.build_s, r.run_s, r.timestamp)
    return known


def curve(path, task, flops: float) -> list[float]:
    """Best-so-far GFLOP/s (`flops` per run) after each trial of a run's record file."""
    from tensorforge.autotune.records import load_records

    best, out = math.inf, []
    for r in load_records(path):
        if r.task.key == task.key:
            best = min(best, r.cost)
            out.append(flops / best / 1e9 if math.isfinite(best) else 0.0)
    return out


def trials_to(c: list[float], target: float) -> int | None:
    return next((k + 1 for k, g in enumerate(c) if g >= target), None)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", default="C2,C6,C9,dense")
    p.add_argument("--tuners", default="xgb,random,ga")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--random-trials", type=int, default=1000, help="trials of the reference random search")
    p.add_argument("--out", default="benchmarks/results/tuning_curves")
    p.add_argument("--threads", type=int, default=1, help="threads of the measured kernels (default 1)")
    p.add_argument("--build-jobs", type=int, default=2)
    p.add_argument("--templates", choices=TEMPLATES, default="model",
                   help="model: the templates ResNet-18 compiles to (Winograd for 3x3 stride 1); "
                        "direct: direct conv2d_nchwc for every conv, for comparison")
    opts = p.parse_args()

    from tensorforge.autotune import LocalBuilder, LocalRunner, MeasureInput, tune
    from tensorforge.autotune.records import RecordWriter

    names = [n.strip() for n in opts.layers.split(",") if n.strip()]
    known_layers = [n for n, layer in LAYERS.items() if layer.kind in ("conv", "dense")]
    unknown = [n for n in names if n not in known_layers]
    if unknown:
        raise SystemExit(f"unknown layer(s) {unknown}; known: {', '.join(known_layers)}")
    tuners = [t.strip() for t in opts.tuners.split(",") if t.strip()]
    os.makedirs(opts.out, exist_ok=True)
    tasks = layer_tasks(names, opts.templates)
    rows, curves, defaults = [], {}, {}
    with LocalBuilder(n_parallel=opts.build_jobs) as lb, \
            LocalRunner(number=2, repeat=5, min_repeat_ms=5, num_threads=opts.threads, timeout=20) as lr:
        for name, task in tasks.items():
            stem = name if opts.templates == "model" else f"{name}-direct"
            mfile = os.path.join(opts.out, f"{stem}.measured.jsonl")
            known = load_known(mfile, task)
            size = task.config_space.size
            flops = LAYERS[name].flops
            with RecordWriter(mfile) as writer:
                builder, runner = MemoBuilder(lb, known), MemoRunner(lr, known, writer)
                print(f"== {name}: {task.name}, {size} configs, {len(known)} measured before", flush=True)
                t0 = time.perf_counter()
                ref_path = os.path.join(opts.out, f"{stem}.reference-random.jsonl")
                tune(task, trials=min(opts.random_trials, size), records=ref_path, tuner="random", seed=0,
                     builder=builder, runner=runner, log=False, measure_default=False)
                ref = max(curve(ref_path, task, flops))
                target = 0.95 * ref
                default = runner.run(builder.build([MeasureInput(task, task.config_space.default_config())]))[0]
                default_gflops = flops / default.cost / 1e9 if default.ok else 0.0
                defaults[name] = default_gflops
                print(f"   reference: random search, {min(opts.random_trials, size)} trials: best {ref:.1f} GFLOP/s "
                      f"(target {target:.1f}); the template's default: {default_gflops:.1f} GFLOP/s; "
                      f"{runner.measured_now} configs timed in {time.perf_counter() - t0:.0f} s", flush=True)
                for tuner in tuners:
                    reach, final, walls = [], [], []
                    for seed in range(opts.seeds):
                        path = os.path.join(opts.out, f"{stem}.{tuner}.{seed}.jsonl")
                        t1 = time.perf_counter()
                        tune(task, trials=min(opts.trials, size), records=path, tuner=tuner, seed=seed,
                             builder=builder, runner=runner, log=False, measure_default=False)
                        walls.append(time.perf_counter() - t1)
                        c = curve(path, task, flops)[:opts.trials]
                        curves[(name, tuner, seed)] = c
                        reach.append(trials_to(c, target))
                        final.append(c[-1] if c else 0.0)
                    got = [r for r in reach if r is not None]
                    rows.append((name, tuner, reach, statistics.median(final), ref, statistics.median(walls)))
                    print(f"   {tuner:7s} trials to 95%: {reach}  best after {opts.trials}: "
                          f"{statistics.median(final):.1f} GFLOP/s ({statistics.median(final) / ref:.1%} of reference)"
                          f"{'' if len(got) == len(reach) else '  (some seeds never reached the target)'}", flush=True)
    print()
    print(f"| layer | tuner | trials to 95% of best-of-{opts.random_trials}-random (per seed) | "
          f"best after {opts.trials} (median) | of reference | default | tuner wall s (median) |")
    print("|---|---|---|---|---|---|---|")
    for name, tuner, reach, final, ref, wall in rows:
        text = ", ".join("-" if r is None else str(r) for r in reach)
        print(f"| {name} | {tuner} | {text} | {final:.1f} GFLOP/s | {final / ref:.1%} | "
              f"{defaults.get(name, 0):.1f} | {wall:.0f} |")
    png = os.path.join(opts.out, "tuning_curves.png")
    try:
        draw(curves, tasks, rows, names, tuners, opts.seeds, png, defaults)
        print(f"\ncurves: {png}")
    except ImportError as err:
        print(f"\n(no picture: {err})")
    return 0


def draw(curves, tasks, rows, names, tuners, seeds, png, defaults) -> None:
    from tensorforge.autotune.report import _pyplot

    plt = _pyplot()
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.6), squeeze=False)
    refs = {name: ref for name, _, _, _, ref, _ in rows}
    for ax, name in zip(axes[0], names):
        for tuner in tuners:
            cs = [curves[(name, tuner, s)] for s in range(seeds) if (name, tuner, s) in curves]
            n = min((len(c) for c in cs), default=0)
            if n == 0:
                continue
            mean = [statistics.mean(c[k] for c in cs) for k in range(n)]
            lo = [min(c[k] for c in cs) for k in range(n)]
            hi = [max(c[k] for c in cs) for k in range(n)]
            xs = range(1, n + 1)
            ax.plot(xs, mean, label=tuner)
            ax.fill_between(xs, lo, hi, alpha=0.15)
        ax.axhline(0.95 * refs[name], color="gray", ls="--", lw=0.8, label="95% of reference")
        if defaults.get(name):
            ax.axhline(defaults[name], color="black", ls=":", lw=0.8, label="template default")
        ax.set_title(f"{name}", fontsize=9)
        ax.set_xlabel("measured trials")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("best GFLOP/s so far")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
