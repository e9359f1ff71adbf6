"""The machine's int8 dot-product peak at 1 thread, measured: benchmarks/vnni_peak.c (independent
`vpdpbusd` chains, AVX-512 VNNI or AVX-VNNI) compiled through tensorforge's compile cache and
timed, best of `repeat` runs.  benchmarks/gemm_int8.py divides its GOP/s by it."""
from __future__ import annotations

import ctypes
from pathlib import Path

SOURCE = Path(__file__).with_name("vnni_peak.c")


def measure(seconds: float = 0.1, repeat: int = 5) -> tuple[int, float]:
    """(lanes, GOP/s) of the probe; (0, 0.0) when the CPU has no VNNI unit."""
    from tensorforge.runtime.compile import compile_source

    lib = ctypes.CDLL(compile_source(SOURCE.read_text(), ["-O2", "-fPIC", "-shared"]))
    lib.vnni_peak_run.argtypes = [ctypes.c_long]
    lib.vnni_peak_run.restype = ctypes.c_double
    lanes, chains = lib.vnni_peak_lanes(), lib.vnni_peak_chains()
    if lanes == 0:
        return 0, 0.0
    iters = 1 << 14
    lib.vnni_peak_run(1 << 22)        # warm up: wide vector units start at a lower clock
    while (elapsed := lib.vnni_peak_run(iters)) < seconds / 4:
        iters *= 4
    iters = max(1, int(iters * seconds / elapsed))
    best = min(lib.vnni_peak_run(iters) for _ in range(repeat))
    return lanes, iters * chains * lanes * 4 * 2 / best / 1e9


if __name__ == "__main__":
    lanes, gops = measure()
    print(f"int8 dot-product peak ({lanes} lanes, 1 thread): {gops:.1f} GOP/s")
