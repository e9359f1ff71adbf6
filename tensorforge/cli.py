"""The `tensorforge` command line.

    tensorforge demo [--model resnet18]         compile, verify and time a zoo model vs ONNX Runtime
    tensorforge demo --gemm [--size N]          a hand-scheduled fp32 GEMM vs NumPy
    tensorforge compile MODEL.onnx -o OUT.tfm   compile an ONNX model into one file
    tensorforge run OUT.tfm --input name=x.npy  run a compiled model, save outputs as .npy
    tensorforge inspect MODEL.onnx              graph after passes, fused groups, memory plan, kernels
    tensorforge tune MODEL.onnx --time-budget 10m --records tune.jsonl [--pool ADDR] [--plot c.png]
                                                tune the model's kernels, append records
    tensorforge inspect --records tune.jsonl    summarize a record file
    tensorforge pool scheduler | worker         a Dask measurement pool (needs tensorforge[distributed])
"""
from __future__ import annotations

import argparse
import os
import sys
import time


def _demo(opts: argparse.Namespace) -> int:
    if opts.gemm:
        return _demo_gemm(opts)
    return _demo_model(opts)


def _median_ms(fn, repeat: int = 10) -> float:
    from tensorforge.testing.timing import median_seconds
    return median_seconds(fn, repeat) * 1e3


def _demo_model(opts: argparse.Namespace) -> int:
    import numpy as np

    import tensorforge
    from tensorforge.frontend import from_onnx
    from tensorforge.testing import models

    name = opts.model
    _progress(f"[1/4] building {name} from the model zoo (random weights, no download)")
    proto, feeds = models.get(name)
    graph = from_onnx(proto)
    _progress(f"[2/4] compiling {len(graph.nodes)} graph nodes for {opts.target!r} ...")
    t0 = time.perf_counter()
    model = tensorforge.compile(graph, target=opts.target)
    _progress(f"      {len(model.spec.steps)} fused kernels, compiled in {time.perf_counter() - t0:.1f} s; "
              f"{model.info['plan'].summary()}")
    inputs = [feeds[n] for n in model.input_names]
    outs = model(*inputs)
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
    if ort is not None:
        so = ort.SessionOptions()
        so.intra_op_num_threads = _threads()
        sess = ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
        ref, peer = sess.run(None, feeds), "ONNX Runtime"
    else:
        from tensorforge.graph.reference import run_reference
        ref, peer = run_reference(graph, *inputs), "the NumPy op references"
    err = max(float(np.max(np.abs(a - b))) for a, b in zip(outs, ref))
    ok = all(np.allclose(a, b, rtol=1e-3, atol=1e-4) for a, b in zip(outs, ref))
    _progress(f"[3/4] checked against {peer}: max abs difference {err:.1e} -> {'OK' if ok else 'MISMATCH'}")
    if not ok:
        return 1
    threads = _threads()
    print(f"[4/4] median latency, batch 1, {threads} thread(s):")
    t_tf = _median_ms(lambda: model(*inputs))
    print(f"      tensorforge   {t_tf:9.2f} ms")
    if ort is not None:
        t_ort = _median_ms(lambda: sess.run(None, feeds))
        print(f"      onnxruntime   {t_ort:9.2f} ms   (tensorforge / onnxruntime = {t_tf / t_ort:.2f})")
    return 0


def _demo_gemm(opts: argparse.Namespace) -> int:
    import numpy as np

    import tensorforge
    from tensorforge.testing.gemm import gemm_schedule

    n = opts.size
    print(f"[1/4] tensor expression + schedule: C = A @ B, {n}x{n}x{n} fp32 (packed B, 8x32 register tiles)")
    s, args = gemm_schedule(n, n, n)
    t0 = time.perf_counter()
    func = tensorforge.lower(s, args, name="gemm")
    t1 = time.perf_counter()
    print(f"[2/4] lowered to a loop program in {t1 - t0:.2f} s; compiling C ...", flush=True)
    mod = tensorforge.build(func, target=opts.target)
    t2 = time.perf_counter()
    print(f"      built in {t2 - t1:.2f} s (cached on disk for next time)")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), np.float32)
    mod(a, b, c)
    expected = a @ b
    err = float(np.max(np.abs(c - expected)))
    ok = np.allclose(c, expected, rtol=1e-3, atol=1e-3)
    print(f"[3/4] verified against numpy.matmul: max abs error {err:.2e} -> {'OK' if ok else 'MISMATCH'}")
    if not ok:
        return 1

    t_tf = _median_ms(lambda: mod(a, b, c), 7) / 1e3
    t_np = _median_ms(lambda: np.matmul(a, b, out=c), 7) / 1e3
    gflop = 2.0 * n ** 3 / 1e9
    threads = _threads()
    print(f"[4/4] median latency with {threads} thread(s) (numpy uses its own BLAS threads):")
    print(f"      tensorforge {t_tf * 1e3:8.2f} ms  {gflop / t_tf:7.1f} GFLOP/s")
    print(f"      numpy       {t_np * 1e3:8.2f} ms  {gflop / t_np:7.1f} GFLOP/s")
    print(f"      ratio tensorforge/numpy speed: {t_np / t_tf:.2f}")
    if opts.show_source:
        print(mod.source)
    return 0


def _threads() -> int:
    from tensorforge.runtime.module import get_num_threads
    return get_num_threads()


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _parse_shapes(items: list[str]) -> dict:
    shapes = {}
    for item in items or []:
        name, _, dims = item.partition("=")
        if not dims:
            raise SystemExit(f"--shape expects name=d0,d1,..., got {item!r}")
        shapes[name] = tuple(int(d) for d in dims.split(","))
    return shapes


def _compile(opts: argparse.Namespace) -> int:
    import tensorforge
    from tensorforge.frontend import from_onnx

    _progress(f"[1/3] importing {opts.model}")
    graph = _load_graph(opts.model, opts.shape)
    _progress(f"[2/3] compiling {len(graph.nodes)} nodes for target {opts.target!r}")
    t0 = time.perf_counter()
    if opts.threads is not None:
        from tensorforge.runtime.module import set_num_threads
        set_num_threads(opts.threads)
    model = tensorforge.compile(graph, target=opts.target, opt_level=opts.opt_level, records=opts.records)
    _progress(f"      {len(model.spec.steps)} kernels in {time.perf_counter() - t0:.1f} s; "
              f"{model.info['plan'].summary()}")
    if opts.records:
        _progress(f"      tuning records applied to {model.info['tuned_groups']} kernel(s)")
    out = opts.output or os.path.splitext(os.path.basename(opts.model))[0] + ".tfm"
    model.export(out)
    _progress(f"[3/3] wrote {out}")
    return 0


def _run(opts: argparse.Namespace) -> int:
    import numpy as np

    import tensorforge

    model = tensorforge.load(opts.model)
    named = {}
    for item in opts.input or []:
        name, _, path = item.partition("=")
        if not path:
            raise SystemExit(f"--input expects name=file.npy, got {item!r}")
        named[name] = np.load(path, allow_pickle=False)
    if not named:
        raise SystemExit(f"give the inputs with --input name=file.npy; the model takes {model.input_names}")
    outs = model.run(**named)
    os.makedirs(opts.output_dir, exist_ok=True)
    for name, arr in zip(model.output_names, outs):
        path = os.path.join(opts.output_dir, f"{name.replace('/', '_')}.npy")
        np.save(path, arr)
        print(f"{name}: {arr.dtype}{list(arr.shape)} -> {path}")
    return 0


def _inspect(opts: argparse.Namespace) -> int:
    import numpy as np

    if opts.records:
        _inspect_records(opts.records)
        if not opts.model:
            return 0
    elif not opts.model:
        raise SystemExit("tensorforge inspect: error: give a MODEL.onnx, --records FILE, or both")

    import tensorforge
    from tensorforge.frontend import from_onnx

    graph = _load_graph(opts.model, opts.shape)
    model = tensorforge.compile(graph, target=opts.target)
    info = model.info
    print(info["graph"])
    print(f"\n# {len(info['groups'])} fused groups")
    for k, g in enumerate(info["groups"]):
        print(f"  {k:3d} [{g.pattern}] {' + '.join(n.op for n in g.nodes)}")
    print("\n# " + info["plan"].summary())
    print("# compile time: " + ", ".join(f"{k} {v:.2f} s" for k, v in info["timings"].items()))
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(tuple(model.spec.values[n]["shape"])).astype(model.spec.values[n]["dtype"])
              for n in model.input_names]
    print("\n# per-kernel time (mean of 10 runs)")
    for label, secs in model.profile(*inputs, repeat=10):
        print(f"  {secs * 1e3:9.3f} ms  {label}")
    if opts.source:
        print(model.source)
    return 0


def _tune(opts: argparse.Namespace) -> int:
    from tensorforge.autotune import extract_tasks, tune
    from tensorforge.autotune.tuner import parse_duration
    from tensorforge.frontend import from_onnx

    budget = parse_duration(opts.time_budget) if opts.time_budget else None
    graph = _load_graph(opts.model, opts.shape)
    tasks = extract_tasks(graph, target=opts.target)
    _progress(f"{len(tasks)} tunable task(s):")
    for t in tasks:
        _progress(f"  {t}  ({t.config_space.size} configs)")
    from tensorforge.autotune import LocalRunner

    measure = {"num_threads": opts.threads, "min_repeat_ms": opts.min_repeat_ms}
    if opts.pool:
        from tensorforge.autotune.pool import DaskRunner
        runner = DaskRunner(opts.pool, device=opts.device, **measure)
    else:
        runner = LocalRunner(**measure)
    try:
        results = tune(tasks, trials=opts.trials, records=opts.records, tuner=opts.tuner, seed=opts.seed,
                       time_budget=budget, total_trials=opts.total_trials, runner=runner, confirm=opts.confirm)
    finally:
        runner.close()
    before = after = 0.0
    for task, res in results.items():
        print(f"{task.name} x{task.occurrences}: default {_time(res.default_cost)} -> best {_time(res.cost)} "
              f"({res.trials} configs measured, {res.errors} errors)")
        before += task.occurrences * res.default_cost
        after += task.occurrences * res.cost
    print(f"tuned kernels, weighted by occurrences: {_time(before)} -> {_time(after)} per run")
    if opts.confirm_model:
        from tensorforge.autotune import confirm_in_model
        from tensorforge.runtime.module import get_num_threads, set_num_threads
        _progress("confirming in the model: each kernel's default and best configs timed where the model runs them")
        before_threads = get_num_threads()
        if opts.threads:
            set_num_threads(opts.threads)
        try:
            confirm_in_model(graph, opts.records, target=opts.target, top=max(1, opts.confirm), log=_progress)
        finally:
            set_num_threads(before_threads)
    if opts.plot:
        from tensorforge.autotune.report import plot_curves
        keys = {t.key for t in tasks}
        from tensorforge.autotune.records import iter_records
        plot_curves([r for r in iter_records(opts.records) if r.task.key in keys], opts.plot,
                    title=f"tuning curves: {os.path.basename(opts.model)}")
        _progress(f"curves drawn in {opts.plot}")
    threads = f" --threads {opts.threads}" if opts.threads else ""
    _progress(f"records in {opts.records}; apply them with: tensorforge compile {opts.model} --records "
              f"{opts.records}{threads}")
    return 0


def _time(seconds: float) -> str:
    """A kernel time with a unit that shows its digits (us below 0.1 ms)."""
    if seconds != seconds or seconds == float("inf"):
        return "n/a (no correct run)"
    return f"{seconds * 1e6:.2f} us" if seconds < 1e-4 else f"{seconds * 1e3:.3f} ms"


def _inspect_records(path: str) -> int:
    from tensorforge.autotune.report import format_summary, summarize

    if not os.path.exists(path):
        raise SystemExit(f"tensorforge: error: no record file {path}")
    from tensorforge.autotune.records import load_records

    records = load_records(path)
    summaries = summarize(records)
    trials = sum(s.trials for s in summaries)
    threads = sorted({r.threads for r in records if r.threads is not None})
    measured = f"measured with {'/'.join(map(str, threads))} thread(s)" if threads else "thread count not recorded"
    print(f"# {path}: {len(records)} records of {len(summaries)} task(s): {trials} tuning trials, "
          f"{len(records) - trials} confirmation records; {measured}")
    print(format_summary(summaries))
    return 0


def _load_graph(model: str, shapes):
    """A model file, or the name of a zoo model (resnet18, mobilenet_v1, ...) when no such file exists."""
    from tensorforge.frontend import from_onnx
    from tensorforge.testing import models

    if not os.path.exists(model) and model in models.NAMES:
        proto, _ = models.get(model)
        return from_onnx(proto, shapes=_parse_shapes(shapes))
    return from_onnx(model, shapes=_parse_shapes(shapes))


def _tuner_names() -> tuple:
    from tensorforge.autotune.tuner import TUNERS
    return tuple(TUNERS)


def main(argv: list[str] | None = None) -> int:
    from tensorforge import __version__

    parser = argparse.ArgumentParser(prog="tensorforge", description="An optimizing compiler for deep learning.")
    parser.add_argument("--version", action="version", version=f"tensorforge {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="compile, verify and time a zoo model (no files needed)")
    demo.add_argument("--model", default="resnet18", help="zoo model (default resnet18)")
    demo.add_argument("--gemm", action="store_true", help="instead: a hand-scheduled fp32 GEMM against NumPy")
    demo.add_argument("--size", type=int, default=1024, help="GEMM size for --gemm (default 1024)")
    demo.add_argument("--target", default="c -mcpu=native", help='target string (default "c -mcpu=native")')
    demo.add_argument("--show-source", action="store_true", help="print the generated C")
    demo.set_defaults(fn=_demo)
    comp = sub.add_parser("compile", help="compile an ONNX model into one file")
    comp.add_argument("model")
    comp.add_argument("-o", "--output", help="output file (default: MODEL.tfm)")
    comp.add_argument("--target", default="c -mcpu=native")
    comp.add_argument("--opt-level", type=int, default=3)
    comp.add_argument("--shape", action="append", help="fix a symbolic input shape: name=d0,d1,...")
    comp.add_argument("--records", help="apply the best tuning record per kernel from this file")
    comp.add_argument("--threads", type=int, default=None,
                      help="the thread count the model will run with: records measured with it are applied "
                           "(default: $TENSORFORGE_NUM_THREADS, else the number of cores)")
    comp.set_defaults(fn=_compile)
    tun = sub.add_parser("tune", help="tune the model's kernels and append records (JSON lines)")
    tun.add_argument("model", help="an ONNX file, or a zoo model name (resnet18, mobilenet_v1, ...)")
    tun.add_argument("--records", required=True, help="record file (appended; a rerun resumes)")
    tun.add_argument("--trials", type=int, default=None,
                     help="most measured configs per task (default 64 without a budget, else no cap)")
    tun.add_argument("--time-budget", help="one wall-time budget for the whole model, e.g. 10m, 90s, 1h; "
                                           "rounds go where they shrink latency most")
    tun.add_argument("--total-trials", type=int, help="one budget of measured configs for the whole model")
    tun.add_argument("--tuner", default="xgb" if "xgb" in _tuner_names() else "ga", choices=_tuner_names(),
                     help="xgb: simulated annealing over a learned cost model (default); random, grid, ga")
    tun.add_argument("--pool", help="measure on a Dask pool at this address (see `tensorforge pool`)")
    tun.add_argument("--device", default="cpu", help="device kind the pool's workers must carry (default cpu)")
    tun.add_argument("--threads", type=int, default=None,
                     help="threads the kernels are measured with: tune for the thread count you deploy with "
                          "(default: TENSORFORGE_NUM_THREADS or all cores)")
    tun.add_argument("--min-repeat-ms", type=float, default=5.0,
                     help="each timing lasts at least this long (default 5 ms; steadier on a busy machine)")
    tun.add_argument("--confirm", type=int, default=3,
                     help="at the end, re-measure each kernel's default and its N fastest configs side by side; "
                          "those times pick the best (default 3; 0 skips)")
    tun.add_argument("--confirm-model", action="store_true",
                     help="then time each kernel's default and best configs inside the running model (where "
                          "inputs and weights are not hot in cache as in a loop of one kernel); those times "
                          "pick the config compile applies")
    tun.add_argument("--plot", help="draw best-so-far curves per task into this image (needs matplotlib)")
    tun.add_argument("--seed", type=int, default=0)
    tun.add_argument("--target", default="c -mcpu=native")
    tun.add_argument("--shape", action="append", help="fix a symbolic input shape: name=d0,d1,...")
    tun.set_defaults(fn=_tune)
    run = sub.add_parser("run", help="run a compiled model on .npy inputs")
    run.add_argument("model")
    run.add_argument("--input", action="append", help="name=file.npy (repeat per input)")
    run.add_argument("--output-dir", default=".", help="where to write the outputs (.npy)")
    run.set_defaults(fn=_run)
    insp = sub.add_parser("inspect", help="graph after passes, fused groups, memory plan, kernel timings")
    insp.add_argument("model", nargs="?")
    insp.add_argument("--records", help="summarize a tuning record file instead (or as well)")
    insp.add_argument("--target", default="c -mcpu=native")
    insp.add_argument("--shape", action="append", help="fix a symbolic input shape: name=d0,d1,...")
    insp.add_argument("--source", action="store_true", help="also print the generated C")
    insp.set_defaults(fn=_inspect)
    try:
        from tensorforge.autotune.pool import add_pool_commands
        add_pool_commands(sub)
    except ImportError:          # pragma: no cover - pool.py imports dask lazily; this is a guard
        pass
    opts = parser.parse_args(argv)
    return opts.fn(opts)


if __name__ == "__main__":
    sys.exit(main())
