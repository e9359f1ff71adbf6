"""Compile time: how long `tensorforge.compile(from_onnx(path))` takes, cold and warm.

    python benchmarks/compile_time.py --onnx DIR [--models resnet18,googlenet] [--repeat 1]

Each compile runs in a fresh Python process (what a user's script pays), on a cache directory of
its own that holds only this machine's GEMM calibration, so that nothing else is warm:

  cold serial    an empty cache, kernels lowered in the compiling process
                 (TENSORFORGE_LOWERING_WORKERS=1: how every compile ran before parallel lowering)
  cold           an empty cache, the kernels lowered by worker processes on every core
                 (parallel_lowering.py)
  warm           the same model again: its build record names the library, nothing is lowered
                 (build_records.py)
  warm, no record  the same with the build records deleted: every kernel read back from the
                 lowering cache and the source printed again to find the library (how a warm
                 compile ran before build records)

Times are the seconds `compile` took (not the interpreter's start or the import), the median of
`--repeat` runs of each; the lowering and compile steps of `model.info["timings"]` come with
them.  The figures in README were measured with this script.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

CHILD = r"""
import json, sys, time
import tensorforge
from tensorforge.frontend import from_onnx
graph = from_onnx(sys.argv[1])
start = time.perf_counter()
model = tensorforge.compile(graph)
took = time.perf_counter() - start
print(json.dumps({"seconds": took, "timings": model.info["timings"], "kernels": len(model.info["funcs"])}))
"""


def _run(path: Path, cache: Path, workers: str | None) -> dict:
    env = dict(os.environ, TENSORFORGE_CACHE_DIR=str(cache))
    env.pop("TENSORFORGE_LOWERING_WORKERS", None)
    if workers is not None:
        env["TENSORFORGE_LOWERING_WORKERS"] = workers
    out = subprocess.run([sys.executable, "-c", CHILD, str(path)], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"compiling {path.name} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _fresh(cache: Path, calibration: Path | None) -> None:
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    if calibration is not None and calibration.exists():
        shutil.copytree(calibration, cache / "calibration")


def measure(path: Path, work: Path, calibration: Path | None, repeat: int) -> dict:
    """{mode: [result, ...]} for one model (module docstring)."""
    cache = work / "cache"
    rows: dict = {"cold serial": [], "cold": [], "warm": [], "warm, no record": []}
    for _ in range(repeat):
        _fresh(cache, calibration)
        rows["cold serial"].append(_run(path, cache, "1"))
        _fresh(cache, calibration)
        rows["cold"].append(_run(path, cache, None))
        rows["warm"].append(_run(path, cache, None))
        shutil.rmtree(cache / "builds", ignore_errors=True)
        rows["warm, no record"].append(_run(path, cache, None))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--onnx", type=Path, required=True,
                    help="a folder of NAME.onnx files (benchmarks/exports/export.py --out DIR writes the six workloads)")
    ap.add_argument("--models", default="", help="comma-separated names (default: every file)")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args(argv)
    paths = sorted(args.onnx.glob("*.onnx"))
    if args.models:
        wanted = args.models.split(",")
        paths = [p for p in paths if p.stem in wanted]
        missing = sorted(set(wanted) - {p.stem for p in paths})
        if missing:
            ap.error(f"no such model in {args.onnx}: {', '.join(missing)}")
    from tensorforge.runtime.cache_files import cache_dir
    calibration = cache_dir() / "calibration"
    print(f"cores: {len(os.sched_getaffinity(0))}; median of {args.repeat} run(s) each; seconds of compile()")
    header = f"{'model':24s} {'kernels':>7s} {'cold serial':>12s} {'cold':>8s} {'warm':>8s} {'warm, no record':>16s}"
    print(header)
    with tempfile.TemporaryDirectory() as tmp:
        for path in paths:
            rows = measure(path, Path(tmp), calibration, args.repeat)
            med = {mode: statistics.median(r["seconds"] for r in results) for mode, results in rows.items()}
            kernels = rows["cold"][0]["kernels"]
            print(f"{path.stem:24s} {kernels:7d} {med['cold serial']:12.2f} {med['cold']:8.2f} {med['warm']:8.2f} "
                  f"{med['warm, no record']:16.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
