"""The machine's fp32 FMA peak, measured: benchmarks/fma_peak.c compiled for this CPU
(-O2 -march=native, through tensorforge's content-addressed compile cache) and timed with 1, 2,
... threads.  Benchmarks divide their GFLOP/s by it to report "% of peak".

A peak is a maximum, so each thread count reports the best of `repeat` runs (noise on a shared
machine only ever lowers it); a run lasts about `seconds`.

FMA units per core: the probe also times a chain of dependent integer adds (one cycle each on
x86-64), which gives the core clock; the 1-thread peak divided by clock x lanes x 2 flops is the
number of vector FMAs the core retires per cycle, rounded (on other CPUs it is not known).
"""
from __future__ import annotations

import ctypes
import platform
from dataclasses import dataclass, field
from pathlib import Path

SOURCE = Path(__file__).with_name("fma_peak.c")


@dataclass(frozen=True)
class FmaPeak:
    vector_bits: int                 # width of the vectors the probe was compiled to
    chains: int                      # independent FMA chains per thread
    gflops: dict = field(default_factory=dict)   # threads -> GFLOP/s
    clock_ghz: float | None = None   # core clock during the integer-add chain (None: not measured)

    @property
    def fma_units(self) -> int | None:
        """Vector FMAs per cycle per core (1-thread peak / (clock x lanes x 2)), or None."""
        if not self.clock_ghz or not self.gflops:
            return None
        one = self.gflops[min(self.gflops)] / min(self.gflops)
        return max(1, round(one / (self.clock_ghz * (self.vector_bits // 32) * 2)))

    def merged(self, other: "FmaPeak") -> "FmaPeak":
        """The higher of two measurements per thread count (a peak is a maximum: a benchmark that
        measures it again between models keeps the best, so a busy moment does not lower it)."""
        threads = set(self.gflops) | set(other.gflops)
        best = {t: max(self.gflops.get(t, 0.0), other.gflops.get(t, 0.0)) for t in threads}
        clocks = [c for c in (self.clock_ghz, other.clock_ghz) if c]
        return FmaPeak(self.vector_bits, self.chains, best, max(clocks) if clocks else None)

    def describe(self) -> str:
        per = ", ".join(f"{t} thread{'s' if t > 1 else ''} {g:.1f}" for t, g in sorted(self.gflops.items()))
        units = (f"; {self.fma_units} FMA unit{'s' if self.fma_units > 1 else ''} per core "
                 f"(clock {self.clock_ghz:.2f} GHz measured)" if self.fma_units else "; FMA units not measured")
        return (f"fp32 FMA peak ({self.vector_bits}-bit vectors, {self.chains} chains, best of runs): "
                f"{per} GFLOP/s{units}")


def _flags() -> list[str]:
    machine = platform.machine().lower()
    cpu_flag = "-march" if machine in ("x86_64", "amd64", "i686", "i386") else "-mcpu"
    return ["-O2", f"{cpu_flag}=native", "-fPIC", "-shared", "-fopenmp"]


def load_probe() -> ctypes.CDLL:
    """The compiled probe library (compiled once, then served from the cache)."""
    from tensorforge.runtime.compile import compile_source

    lib = ctypes.CDLL(compile_source(SOURCE.read_text(), _flags()))
    lib.fma_peak_run.argtypes = [ctypes.c_int, ctypes.c_long]
    lib.fma_peak_run.restype = ctypes.c_double
    lib.fma_peak_vector_bits.restype = ctypes.c_int
    lib.fma_peak_chains.restype = ctypes.c_int
    lib.fma_peak_clock_ghz.argtypes = [ctypes.c_long]
    lib.fma_peak_clock_ghz.restype = ctypes.c_double
    return lib


def measure(thread_counts, seconds: float = 0.1, repeat: int = 5) -> FmaPeak:
    """GFLOP/s of the FMA probe for each thread count in `thread_counts`."""
    lib = load_probe()
    bits, chains = lib.fma_peak_vector_bits(), lib.fma_peak_chains()
    flops_per_iter = 2.0 * chains * (bits // 32)       # per thread: chains x lanes FMAs
    gflops = {}
    for threads in thread_counts:
        iters = 1 << 16
        while True:                                    # calibrate: grow until a run is long enough
            elapsed = lib.fma_peak_run(threads, iters)
            if elapsed >= seconds / 4:
                break
            iters *= 4
        iters = max(1, int(iters * seconds / elapsed))
        best = min(lib.fma_peak_run(threads, iters) for _ in range(repeat))
        gflops[threads] = flops_per_iter * iters * threads / best / 1e9
    clock = max(lib.fma_peak_clock_ghz(1 << 22) for _ in range(repeat))    # ~0.05 s each
    return FmaPeak(bits, chains, gflops, clock if clock > 0 else None)


def scaling_warning(peak: FmaPeak) -> str | None:
    """A note when more threads did not bring proportionally more peak (a busy or
    oversubscribed machine: then every multi-threaded number in the run is low too)."""
    if len(peak.gflops) < 2:
        return None
    base = min(peak.gflops)
    per_thread = peak.gflops[base] / base
    low = [t for t, g in sorted(peak.gflops.items()) if t > base and g < 0.75 * per_thread * t]
    if not low:
        return None
    return ("note: the FMA peak does not scale with threads here ("
            + ", ".join(f"{t} threads reach {peak.gflops[t] / peak.gflops[base]:.2f}x the "
                        f"{base}-thread peak, not {t / base:.0f}x" for t in low)
            + "); other processes share these cores or there are fewer of them")


if __name__ == "__main__":
    result = measure([1, 2])
    print(result.describe())
    print(scaling_warning(result) or "")
