"""fp32 GEMM 1024^3: tensorforge's default matmul schedule (what `compile` gives a MatMul of two
inputs: the machine's micro-kernel, panels packed on the fly; ops/schedules/cpu_matmul.py), the
product with a constant right operand packed at compile time (what `compile` gives a MatMul
with a weight: `matmul_packed`, cache-blocked over kc, mc, nc on 16-register machines when the
reduction is long) and the hand-written schedule of testing/gemm.py, against numpy.matmul
(OpenBLAS), in one process, interleaved, with 1 and 2 threads; each as GFLOP/s and as a share
of the measured FMA peak (benchmarks/_peak.py).

    python benchmarks/gemm.py [--size 1024] [--k K] [--repeat 15]

--k sets the reduction length (default: the size): (size x K) @ (K x size).

Each round times every kernel `repeat // 3` times back to back and keeps its fastest run (noise
from other processes only slows a run down); the figure is the median over 3 rounds.  After
numpy's block the benchmark pauses until OpenBLAS's spinning threads have gone to sleep, so
they do not take the cores of the kernel timed next.  The last
line reads `gemm 1024 fp32: tensorforge X GFLOP/s, numpy Y GFLOP/s, ratio X/Y` (1 thread, the
default schedule).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _peak  # noqa: E402

import tensorforge  # noqa: E402
from tensorforge.autotune.task import Task, instantiate  # noqa: E402
from tensorforge.ops.nn_dense_packed import pack_columns  # noqa: E402
from tensorforge.ops.schedules import gemm_kernel  # noqa: E402
from tensorforge.runtime import module as rt  # noqa: E402
from tensorforge.target import Target  # noqa: E402
from tensorforge.testing.gemm import gemm_schedule  # noqa: E402

TARGET = "c -mcpu=native"
# OpenBLAS's worker threads spin for about 2^28 cycles after a call before they sleep; a kernel
# timed right after numpy would share its cores with them (tensorforge's second thread gets no
# core and the caller runs both shares), so each numpy block is followed by this pause.
OPENBLAS_PARK_S = 0.2


def _build(n: int, k: int, b: np.ndarray):
    """{name: callable(a, b, c)}: the default matmul schedule, the product with `b` packed at
    compile time, and the hand-written schedule."""
    task = Task.for_op("matmul", [((n, k), "float32"), ((k, n), "float32")], target=TARGET)
    s, args = instantiate(task, None)
    default = tensorforge.build(tensorforge.lower(s, args, name="gemm_default"), target=TARGET)
    nr = gemm_kernel.for_target(Target.parse(TARGET)).nr
    panels = pack_columns(b, nr)
    task = Task.for_op("matmul_packed", [((n, k), "float32"), (panels.shape, "float32")], {"units": n}, target=TARGET)
    s, args = instantiate(task, None)
    packed_mod = tensorforge.build(tensorforge.lower(s, args, name="gemm_packed"), target=TARGET)
    s, args = gemm_schedule(n, n, k)
    hand = tensorforge.build(tensorforge.lower(s, args, name="gemm_hand"), target=TARGET)
    return {"tensorforge (default matmul)": default,
            "tensorforge (weights packed)": lambda a, _b, c: packed_mod(a, panels, c),
            "tensorforge (testing/gemm.py)": hand}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--k", type=int, default=None, help="reduction length (default: --size)")
    ap.add_argument("--repeat", type=int, default=15)
    opts = ap.parse_args()
    n = opts.size
    k = opts.k or n
    flops = 2.0 * n * n * k
    try:
        from threadpoolctl import threadpool_info, threadpool_limits
    except ImportError:  # pragma: no cover
        raise SystemExit("benchmarks need threadpoolctl (pip install -e .[dev])") from None

    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c = np.empty((n, n), np.float32)
    start = time.perf_counter()
    mods = _build(n, k, b)
    print(f"compile: {time.perf_counter() - start:.2f} s (a cache hit skips the C compiler)")
    lanes = Target.parse(TARGET).simd_lanes("float32")
    record = gemm_kernel.load_calibration()
    print(f"micro-kernel: {gemm_kernel.for_target(Target.parse(TARGET))} "
          f"({'calibrated' if record else 'detected; run `tensorforge calibrate` to measure'}; "
          f"the register model's choice: {gemm_kernel.detected(lanes)})")

    for mod in mods.values():
        c.fill(np.nan)
        mod(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-3)
    runners = dict(mods, numpy=lambda a, b, c: np.matmul(a, b, out=c))

    blas = [f"{i['internal_api']} {i.get('version')} ({i.get('architecture')})" for i in threadpool_info()
            if i["user_api"] == "blas"]
    print(f"machine: {platform.machine()} {os.cpu_count()} cores; numpy BLAS: {', '.join(blas)}")
    peak = _peak.measure([1, 2])
    print(peak.describe())
    results = {}
    per_round = max(1, opts.repeat // 3)
    for threads in (1, 2):
        rt.set_num_threads(threads)
        with threadpool_limits(limits=threads, user_api="blas"):
            times: dict = {name: [] for name in runners}
            for _ in range(3):  # interleave so background noise hits every kernel
                for name, fn in runners.items():
                    best = float("inf")
                    for _ in range(per_round):
                        t0 = time.perf_counter()
                        fn(a, b, c)
                        best = min(best, time.perf_counter() - t0)
                    times[name].append(best)
                    if name == "numpy":
                        time.sleep(OPENBLAS_PARK_S)
        peak = peak.merged(_peak.measure([threads]))
        top = peak.gflops[threads]
        gf = {name: flops / statistics.median(ts) / 1e9 for name, ts in times.items()}
        results[threads] = gf
        for name, g in gf.items():
            ratio = "" if name == "numpy" else f", {g / gf['numpy']:.2f}x numpy"
            print(f"{threads} thread{'s' if threads > 1 else ''}: {name:31s} {g:6.1f} GFLOP/s = "
                  f"{100 * g / top:3.0f}% of peak ({top:.0f}){ratio}")
    name = "tensorforge (default matmul)"
    print(f"2 threads / 1 thread: {name} {results[2][name] / results[1][name]:.2f}x, "
          f"numpy {results[2]['numpy'] / results[1]['numpy']:.2f}x")
    note = _peak.scaling_warning(peak)
    if note:
        print(note)
    tf, npy = results[1][name], results[1]["numpy"]
    shape = f"{n}" if k == n else f"{n}x{k}x{n}"
    print(f"gemm {shape} fp32: tensorforge {tf:.1f} GFLOP/s, numpy {npy:.1f} GFLOP/s, ratio {tf / npy:.2f}")


if __name__ == "__main__":
    main()
