"""The `tensorforge` command line.

    tensorforge demo [--model resnet18]         compile, verify and time a zoo model vs ONNX Runtime
    tensorforge demo --gemm [--size N]          a hand-scheduled fp32 GEMM vs NumPy
    tensorforge compile MODEL.onnx -o OUT.tfm   compile an ONNX model into one file
    tensorforge bench MODEL.onnx [--threads 1,2]  check the outputs against ONNX Runtime, time both
                        [--input x=x.npy]       side by side (random inputs unless given)
    tensorforge run OUT.tfm --input x=x.npy     run a compiled model (or --input inputs.npz),
                        [--output-dir DIR]      save its outputs as .npy files in DIR
    tensorforge inspect MODEL.onnx | OUT.tfm    graph after passes, fused groups, memory plan, kernels
    tensorforge tune MODEL.onnx --time-budget 10m --records tune.jsonl [--pool ADDR] [--plot c.png]
                                                tune the model's kernels, append records
    tensorforge inspect --records tune.jsonl    summarize a record file
    tensorforge pool scheduler | worker         a Dask measurement pool (needs tensorforge[distributed])
    tensorforge calibrate [--show]              measure this CPU's GEMM micro-kernel once (cached)
    tensorforge cache [info | prune --max-size 2G [--older-than 30d] | clear]
                                                what the kernel cache holds; prune or clear it

A failure is one line on stderr, `tensorforge: error: ...`, with exit code 2 for a usage error
and 1 otherwise (cli/failures.py); TENSORFORGE_DEBUG=1 adds the traceback.  Warnings are one
line each, `tensorforge: warning: ...`.  Progress goes to stderr, results to stdout.
"""
from __future__ import annotations

import argparse
import warnings

from ..errors import show_warning
from . import options
from .failures import report
from .options import OneLineParser, int_at_least


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns its exit code (0, 1 for an error, 2 for a usage error)."""
    with warnings.catch_warnings():
        warnings.showwarning = show_warning
        try:
            opts = build_parser().parse_args(argv)
            return opts.fn(opts)
        except (Exception, KeyboardInterrupt) as err:      # noqa: BLE001 - every failure gets its line
            return report(err)


def build_parser() -> argparse.ArgumentParser:
    from tensorforge import __version__

    parser = OneLineParser(prog="tensorforge", description="An optimizing compiler for deep learning.",
                           epilog="Errors are one line; set TENSORFORGE_DEBUG=1 to see tracebacks.")
    parser.add_argument("--version", action="version", version=f"tensorforge {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_demo(sub)
    _add_compile(sub)
    _add_tune(sub)
    _add_run(sub)
    _add_bench(sub)
    _add_inspect(sub)
    _add_calibrate(sub)
    from .cache_cmd import add_cache_command
    add_cache_command(sub)
    try:
        from tensorforge.autotune.pool import add_pool_commands
        add_pool_commands(sub)
    except ImportError:          # pragma: no cover - pool.py imports dask lazily; this is a guard
        pass
    return parser


def _add_demo(sub) -> None:
    from .demo import demo

    p = sub.add_parser("demo", help="compile, verify and time a zoo model (no files needed)")
    p.add_argument("--model", default="resnet18", help="zoo model (default resnet18)")
    p.add_argument("--gemm", action="store_true", help="instead: a hand-scheduled fp32 GEMM against NumPy")
    p.add_argument("--size", type=int_at_least(1, "a matrix size"), default=1024,
                   help="GEMM size for --gemm (default 1024)")
    options.add_target_option(p)
    options.add_precision_option(p)
    p.add_argument("--show-source", action="store_true", help="print the generated C")
    p.set_defaults(fn=demo)


def _add_compile(sub) -> None:
    from .model_cmds import compile_model

    p = sub.add_parser("compile", help="compile an ONNX model into one file")
    p.add_argument("model", help="an ONNX file, or a zoo model name (resnet18, mobilenet_v1, ...)")
    p.add_argument("-o", "--output", help="output file (default: MODEL.tfm)")
    options.add_target_option(p)
    p.add_argument("--opt-level", type=options.opt_level, default=3,
                   help="graph optimization level, 0 (only what correctness needs) to 3 (default: every pass)")
    options.add_shape_option(p)
    p.add_argument("--records", help="apply the best tuning record per kernel from this file")
    options.add_threads_option(p, "the thread count the model will run with: records measured with it are "
                                  "applied (default: $TENSORFORGE_NUM_THREADS, else the number of cores)")
    p.set_defaults(fn=compile_model)


def _add_tune(sub) -> None:
    from .tune_cmd import tune_model

    p = sub.add_parser("tune", help="tune the model's kernels and append records (JSON lines)")
    p.add_argument("model", help="an ONNX file, or a zoo model name (resnet18, mobilenet_v1, ...)")
    p.add_argument("--records", required=True, help="record file (appended; a rerun resumes)")
    p.add_argument("--trials", type=int_at_least(1, "a trial count"), default=None,
                   help="most measured configs per task, those in the records included "
                        "(default 64 without a budget, else no cap)")
    p.add_argument("--time-budget", type=options.duration,
                   help="one wall-time budget for the whole model, e.g. 10m, 90s, 1h; rounds go where they "
                        "shrink latency most")
    p.add_argument("--total-trials", type=int_at_least(1, "a trial count"),
                   help="one budget of measured configs for the whole model, those in the records included "
                        "(a resumed run measures only the rest)")
    names = _tuner_names()
    p.add_argument("--tuner", default="xgb" if "xgb" in names else "ga", choices=names,
                   help="xgb: simulated annealing over a learned cost model (default); random, grid, ga")
    p.add_argument("--pool", help="measure on a Dask pool at this address (see `tensorforge pool`)")
    p.add_argument("--device", default="cpu", help="device kind the pool's workers must carry (default cpu)")
    options.add_threads_option(p, "threads the kernels are measured with: tune for the thread count you deploy "
                                  "with (default: TENSORFORGE_NUM_THREADS or all cores)")
    p.add_argument("--min-repeat-ms", type=options.positive_float, default=5.0,
                   help="each timing lasts at least this long (default 5 ms; steadier on a busy machine)")
    p.add_argument("--cold-cache", action="store_true",
                   help="time each run of a candidate alone, after evicting every cache level (64 MiB "
                        "overwritten), instead of back-to-back runs: for models whose weights do not stay "
                        "in cache from one call to the next, where a kernel reads its weights from memory "
                        "(--min-repeat-ms does not apply; slower per candidate)")
    p.add_argument("--confirm", type=int_at_least(0, "a config count"), default=3,
                   help="at the end, re-measure each kernel's default and its N fastest configs side by side; "
                        "those times pick the best (default 3; 0 skips)")
    p.add_argument("--confirm-model", action=argparse.BooleanOptionalAction, default=True,
                   help="then time each kernel's default and best configs inside the running model (where "
                        "inputs and weights are not hot in cache as in a loop of one kernel); those times "
                        "pick the config compile applies, so a tuned kernel is never slower there than its "
                        "default (default on; a few seconds to two minutes after the search)")
    p.add_argument("--algorithms", action=argparse.BooleanOptionalAction, default=True,
                   help="also tune the forms the model's 3x3 stride-1 convs could run as (direct, Winograd "
                        "with 2x2 or 4x4 tiles), so that compile runs each as the fastest (default on)")
    p.add_argument("--plot", help="draw best-so-far curves per task into this image (needs matplotlib)")
    p.add_argument("--seed", type=int, default=0)
    options.add_target_option(p)
    options.add_shape_option(p)
    p.set_defaults(fn=tune_model)


def _add_run(sub) -> None:
    from .model_cmds import run_model

    p = sub.add_parser("run", help="run a compiled model on .npy / .npz inputs, save the outputs as .npy")
    p.add_argument("model", help="a compiled model (.tfm, from `tensorforge compile`)")
    p.add_argument("--input", action="append", metavar="[NAME=]FILE",
                   help="NAME=FILE.npy for one input (repeat per input), or FILE.npz holding the inputs by name")
    p.add_argument("-o", "--output-dir", default=".", metavar="DIR",
                   help="the folder the outputs are written to, one OUTPUT_NAME.npy each (created if "
                        "missing; default: the current folder)")
    p.set_defaults(fn=run_model)


def _add_bench(sub) -> None:
    from .bench_cmd import bench

    p = sub.add_parser("bench", help="check a model's outputs against ONNX Runtime and time both side by side")
    p.add_argument("model", help="an ONNX file, or a zoo model name (resnet18, mobilenet_v1, ...)")
    p.add_argument("--input", action="append", metavar="[NAME=]FILE",
                   help="NAME=FILE.npy for one input (repeat per input), or FILE.npz holding the inputs by "
                        "name (default: random inputs; a zoo model's own)")
    p.add_argument("--threads", type=options.thread_counts, default=None,
                   help="thread counts to time, e.g. 1,2 (default: $TENSORFORGE_NUM_THREADS, else the number "
                        "of cores)")
    p.add_argument("--repeat", type=int_at_least(1, "a call count"), default=20,
                   help="timed calls of each per thread count (default 20)")
    p.add_argument("--records", help="apply the best tuning record per kernel from this file")
    p.add_argument("--opt-level", type=options.opt_level, default=3,
                   help="graph optimization level, 0 to 3 (default 3)")
    options.add_target_option(p)
    options.add_shape_option(p)
    p.set_defaults(fn=bench)


def _add_inspect(sub) -> None:
    from .inspect_cmd import inspect

    p = sub.add_parser("inspect", help="graph after passes, fused groups, memory plan, kernel timings")
    p.add_argument("model", nargs="?", help="an ONNX file, a zoo model name, or a compiled model (.tfm)")
    p.add_argument("--records", help="summarize a tuning record file instead (or as well)")
    options.add_target_option(p)
    options.add_shape_option(p)
    options.add_precision_option(p)
    p.add_argument("--source", action="store_true", help="also print the generated C")
    p.set_defaults(fn=inspect)


def _add_calibrate(sub) -> None:
    from .calibrate_cmd import calibrate_machine

    p = sub.add_parser("calibrate", help="measure this CPU's GEMM micro-kernel once (cached; under 30 s)")
    p.add_argument("--show", action="store_true", help="print the cached choice without measuring")
    options.add_target_option(p)
    p.set_defaults(fn=calibrate_machine)


def _tuner_names() -> tuple:
    from tensorforge.autotune.tuners import TUNERS
    return tuple(TUNERS)


__all__ = ["main", "build_parser"]
