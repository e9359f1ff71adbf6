"""The `tensorforge` command line.

    tensorforge demo [--size N]   build, verify and time a scheduled matmul against NumPy
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def _demo(opts: argparse.Namespace) -> int:
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

    def median(fn, repeat=7):
        fn()
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    t_tf = median(lambda: mod(a, b, c))
    t_np = median(lambda: np.matmul(a, b, out=c))
    gflop = 2.0 * n ** 3 / 1e9
    threads = tensorforge.runtime.module.get_num_threads()
    print(f"[4/4] median latency with {threads} thread(s) (numpy uses its own BLAS threads):")
    print(f"      tensorforge {t_tf * 1e3:8.2f} ms  {gflop / t_tf:7.1f} GFLOP/s")
    print(f"      numpy       {t_np * 1e3:8.2f} ms  {gflop / t_np:7.1f} GFLOP/s")
    print(f"      ratio tensorforge/numpy speed: {t_np / t_tf:.2f}")
    if opts.show_source:
        print(mod.source)
    return 0


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from tensorforge import __version__

    parser = argparse.ArgumentParser(prog="tensorforge", description="An optimizing compiler for deep learning.")
    parser.add_argument("--version", action="version", version=f"tensorforge {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="build, verify and time a scheduled matmul (no files needed)")
    demo.add_argument("--size", type=int, default=1024, help="matrix size (default 1024)")
    demo.add_argument("--target", default="c -mcpu=native", help='target string (default "c -mcpu=native")')
    demo.add_argument("--show-source", action="store_true", help="print the generated C")
    demo.set_defaults(fn=_demo)
    opts = parser.parse_args(argv)
    return opts.fn(opts)


if __name__ == "__main__":
    sys.exit(main())
