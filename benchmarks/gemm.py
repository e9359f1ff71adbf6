"""fp32 GEMM 1024^3: tensorforge's best hand-written schedule against numpy.matmul (OpenBLAS),
in one process, interleaved, with 1 and with 2 threads.  Medians of `--repeat` runs.

    python benchmarks/gemm.py [--size 1024] [--repeat 15]

The last line reads `gemm 1024 fp32: tensorforge X GFLOP/s, numpy Y GFLOP/s, ratio X/Y`
(single-threaded).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np  # noqa: E402

import tensorforge  # noqa: E402
from tensorforge.runtime import module as rt  # noqa: E402
from tensorforge.testing.gemm import gemm_schedule  # noqa: E402
from tensorforge.testing.timing import median_seconds  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=15)
    opts = ap.parse_args()
    n = opts.size
    flops = 2.0 * n * n * n

    start = time.perf_counter()
    s, args = gemm_schedule(n, n, n)
    func = tensorforge.lower(s, args, name="gemm")
    lowered = time.perf_counter()
    mod = tensorforge.build(func, target="c -mcpu=native")
    built = time.perf_counter()
    print(f"compile: lower {lowered - start:.2f} s, C compile+load {built - lowered:.2f} s "
          f"(a cache hit skips the C compiler)")

    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), np.float32)
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-3)

    try:
        from threadpoolctl import threadpool_info, threadpool_limits
    except ImportError:  # pragma: no cover
        raise SystemExit("benchmarks need threadpoolctl (pip install -e .[dev])") from None
    blas = [f"{i['internal_api']} {i.get('version')} ({i.get('architecture')})" for i in threadpool_info()
            if i["user_api"] == "blas"]
    print(f"machine: {platform.machine()} {os.cpu_count()} cores; numpy BLAS: {', '.join(blas)}")
    results = {}
    for threads in (2, 1):
        rt.set_num_threads(threads)
        with threadpool_limits(limits=threads, user_api="blas"):
            tf_times, np_times = [], []
            for _ in range(3):  # interleave the two so background noise hits both
                tf_times.append(median_seconds(lambda: mod(a, b, c), opts.repeat // 3 or 1))
                np_times.append(median_seconds(lambda: np.matmul(a, b, out=c), opts.repeat // 3 or 1))
        tf, npy = flops / min(tf_times) / 1e9, flops / min(np_times) / 1e9
        tf_med, np_med = flops / statistics.median(tf_times) / 1e9, flops / statistics.median(np_times) / 1e9
        results[threads] = (tf_med, np_med)
        print(f"{threads} thread(s): tensorforge {tf_med:.1f} GFLOP/s (best {tf:.1f}), "
              f"numpy {np_med:.1f} GFLOP/s (best {npy:.1f}), ratio {tf_med / np_med:.2f}")
    tf, npy = results[1]
    print(f"gemm {n} fp32: tensorforge {tf:.1f} GFLOP/s, numpy {npy:.1f} GFLOP/s, ratio {tf / npy:.2f}")


if __name__ == "__main__":
    main()
