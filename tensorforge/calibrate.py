"""Calibration: measure once per machine what the models of ops/schedules/gemm_kernel.py cannot
see, and cache it under the CPU's identity (`tensorforge calibrate`, or the first compile for the
host that finds no record).

What is measured: the GEMM register micro-kernel.  The best few shapes by the model (fewest loads
per FMA within the register budget) each schedule one float32 GEMM through the default matmul
template, with only the tile shape changed; they run interleaved in rounds, each keeping its
fastest run (noise from other processes only ever slows a run down), and the fastest shape wins
unless the register model's own pick is within MARGIN of it: two shapes a few tenths of a per
cent apart (6x64 and 9x48 at 235.0 and 235.1 GFLOP/s on a Zen 5 core) would otherwise change
the defaults from one calibration to the next by chance.
The record is a JSON file written atomically: the chosen kernel per vector width, every
candidate's GFLOP/s, and the machine facts the defaults were derived from.

With TENSORFORGE_CALIBRATE=0 nothing is measured: the detected shapes are used and compile
says so once (the test suite runs this way, fast and deterministic).
"""
from __future__ import annotations

import json
import os
import sys
import time
from typing import Callable

from .ops.schedules import gemm_kernel
from .target import Target

CANDIDATES = 3                 # shapes measured per vector width
GEMM_SHAPE = (384, 768, 512)   # (M, N, K): about 0.3 GFLOP, a few ms a run; multiples of 6, 9, 14 rows not needed
ROUNDS = 5
MARGIN = 0.02                  # another shape replaces the register model's only when this much faster
_noted = False


def enabled() -> bool:
    return os.environ.get("TENSORFORGE_CALIBRATE", "1").strip().lower() not in ("0", "no", "off", "false")


def _config(task, kernel: gemm_kernel.MicroKernel):
    """The default config of `task` with the tile set to `kernel` (and the right operand packed)."""
    m, n = GEMM_SHAPE[0], GEMM_SHAPE[1]
    space = task.config_space
    values = space.default_config().to_json()
    values.update({"tile_m": [-(-m // kernel.mr), kernel.mr],
                   "tile_n": [-(-n // kernel.nr), kernel.vectors, kernel.lanes]})
    if "pack_b" in values:
        values["pack_b"] = True
    return space.from_json(values)


def measure_kernels(target: Target, kernels: list, rounds: int = ROUNDS,
                    progress: Callable[[str], None] | None = None) -> dict:
    """GFLOP/s of a GEMM of GEMM_SHAPE under each micro-kernel in `kernels` (str(kernel) -> GFLOP/s),
    interleaved over `rounds`; a kernel whose shape the template's space lacks is skipped."""
    import numpy as np

    from .autotune.task import Task, instantiate
    from .build_module import build, lower

    m, n, k = GEMM_SHAPE
    task = Task.for_op("matmul", [((m, k), "float32"), ((k, n), "float32")], target=str(target))
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c = np.empty((m, n), np.float32)
    mods = {}
    for kern in kernels:
        if progress:
            progress(f"compile {kern.mr}x{kern.nr}")
        try:
            s, args = instantiate(task, _config(task, kern))
            mod = build(lower(s, args, "calibrate_gemm"), target=target)
        except (ValueError, KeyError):          # a shape outside the template's space
            continue
        c.fill(np.nan)
        mod(a, b, c)
        if not np.allclose(c, a @ b, rtol=1e-3, atol=1e-3):
            raise RuntimeError(f"calibration: the {kern} GEMM kernel computed a wrong result")
        mods[kern] = mod
    best = {kern: float("inf") for kern in mods}
    for r in range(rounds):
        if progress:
            progress(f"round {r + 1}/{rounds}")
        for kern, mod in mods.items():
            for _ in range(3):
                t0 = time.perf_counter()
                mod(a, b, c)
                best[kern] = min(best[kern], time.perf_counter() - t0)
    flops = 2.0 * m * n * k
    return {kern: flops / t / 1e9 for kern, t in best.items()}


def calibrate(target: "str | Target" = "c -mcpu=native", show: bool = True) -> dict:
    """Measure this machine, write its record to the cache directory and return it."""
    from .runtime.cache_files import write_atomic

    tgt = Target.parse(target)
    lanes = max(1, tgt.simd_lanes("float32"))
    kernels = gemm_kernel.candidates(lanes)[:CANDIDATES]
    steps = len(kernels) + ROUNDS
    done = [0]
    start = time.perf_counter()

    def progress(what: str) -> None:
        done[0] += 1
        if show:
            width = 30
            filled = width * min(done[0], steps) // steps
            sys.stderr.write(f"\rcalibrating [{'#' * filled}{'.' * (width - filled)}] {what:<24}")
            sys.stderr.flush()

    from .runtime import module as rt

    threads = rt.get_num_threads()
    rt.set_num_threads(1)                    # a core's kernel: measured on one core
    try:
        gflops = measure_kernels(tgt, kernels, progress=progress)
    finally:
        rt.set_num_threads(threads)
    if show:
        sys.stderr.write("\n")
    if not gflops:
        raise RuntimeError("calibration: no GEMM micro-kernel candidate could be built for this target")
    best = max(gflops, key=lambda kern: gflops[kern])
    model = kernels[0]                        # the register model's pick
    if model in gflops and gflops[best] <= (1 + MARGIN) * gflops[model]:
        best = model
    record = {
        "version": gemm_kernel.CALIBRATION_VERSION,
        "cpu": gemm_kernel.cpu_identity(),
        "facts": {"simd_bytes": tgt.simd_bytes, "cores": tgt.num_cores, "l1_bytes": tgt.l1_cache_bytes,
                  "l2_bytes": tgt.l2_cache_bytes, "registers": gemm_kernel.register_count(lanes)},
        "kernels": {str(lanes): {"mr": best.mr, "vectors": best.vectors}},
        "detected": {str(lanes): str(gemm_kernel.detected(lanes))},
        "gemm": {"shape": list(GEMM_SHAPE), "gflops": {str(kern): round(g, 1) for kern, g in gflops.items()}},
        "seconds": round(time.perf_counter() - start, 1),
    }
    path = gemm_kernel.calibration_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, (json.dumps(record, indent=1) + "\n").encode())
    return record


def describe(record: dict) -> str:
    """One paragraph on what calibration chose."""
    lines = [f"CPU {record['cpu']}: {record['facts']['simd_bytes'] * 8}-bit vectors, "
             f"{record['facts']['registers']} vector registers, {record['facts']['cores']} cores, "
             f"L1d {record['facts']['l1_bytes'] // 1024} KiB, L2 {record['facts']['l2_bytes'] // 1024} KiB"]
    for lanes, k in record["kernels"].items():
        chosen = gemm_kernel.MicroKernel(k["mr"], k["vectors"], int(lanes))
        lines.append(f"GEMM micro-kernel: {chosen} (the register model proposed {record['detected'][lanes]})")
    shape = "x".join(map(str, record["gemm"]["shape"]))
    lines.append(f"measured on a {shape} GEMM, 1 thread, GFLOP/s: "
                 + ", ".join(f"{name.split()[0]} {g}" for name, g in record["gemm"]["gflops"].items())
                 + f" ({record['seconds']} s)")
    return "\n".join(lines)


def ensure_calibrated(target: Target) -> None:
    """Before the first compile for the host: calibrate if this CPU has no record (or, with
    calibration disabled, say once that the detected defaults are used)."""
    global _noted
    if target.template_suffix != "cpu" or target.mcpu != "native":
        return
    if gemm_kernel.load_calibration() is not None:
        return
    if not enabled():
        if not _noted:
            lanes = max(1, target.simd_lanes("float32"))
            sys.stderr.write(f"tensorforge: calibration is off (TENSORFORGE_CALIBRATE=0): using the detected "
                             f"GEMM kernel {gemm_kernel.detected(lanes)}\n")
            _noted = True
        return
    sys.stderr.write("tensorforge: first compile on this CPU: calibrating the GEMM kernel once "
                     "(`tensorforge calibrate` does it ahead)\n")
    calibrate(target)
