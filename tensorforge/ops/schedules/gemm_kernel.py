"""The GEMM register micro-kernel's shape for this machine: how many rows (mr) and how many
vectors of columns (nr = vectors * lanes) one (mr x nr) tile of the output holds in registers.

The shape follows from facts about the core (BLIS's analytical model, Low et al. 2016):
- the tile's mr * vectors accumulators, the `vectors` loads of the packed right operand and one
  broadcast of the left operand must fit in the vector registers (32 with AVX-512, 16 with AVX2
  and SSE) with one to spare, so the C compiler keeps the tile in registers for the whole
  reduction (a tile that took all 16 AVX2 registers, 4 x 3 vectors, ran at 75% of 6 x 2's speed);
- at least latency x FMA units accumulators are independent, so the FMA pipes never wait on a
  previous FMA (4 cycles x 2 units = 8 on current x86 cores);
- among the shapes that fit, the one with the fewest loads per FMA, (mr + vectors) / (mr *
  vectors), so the load ports are not the bound.
That gives 6 x 4 vectors with AVX-512 and 6 x 2 with AVX2.  The model cannot see everything (how
a core splits broadcasts between its ports, its prefetchers), so `tensorforge calibrate`
measures the best few candidates once per machine and caches the winner under the CPU's
identity (its model name and a hash of its feature flags); `for_target` returns the calibrated
shape when the host has one and the detected shape otherwise.

Invariant: every returned kernel fits the register budget of the lanes it was chosen for.
"""
from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

REGISTERS = {16: 32, 8: 16, 4: 16}     # float32 lanes per vector -> vector registers (AVX-512, AVX2, SSE)
FMA_LATENCY = 4                        # cycles of a vector FMA on current x86-64 cores
FMA_UNITS = 2                          # assumed until measured: more accumulators never hurt
MAX_VECTORS = 4                        # wider tiles waste more padded columns when N is not a multiple
CALIBRATION_VERSION = 1


@dataclass(frozen=True)
class MicroKernel:
    """An (mr x vectors * lanes) register tile of float32 accumulators."""

    mr: int
    vectors: int
    lanes: int

    @property
    def nr(self) -> int:
        return self.vectors * self.lanes

    @property
    def registers(self) -> int:
        """Vector registers the tile needs: accumulators, right-operand loads, one broadcast."""
        return self.mr * self.vectors + self.vectors + 1

    @property
    def loads_per_fma(self) -> float:
        return (self.mr + self.vectors) / (self.mr * self.vectors)

    def __str__(self) -> str:
        return f"{self.mr}x{self.nr} ({self.mr} rows x {self.vectors} vectors of {self.lanes})"


def register_count(lanes: int) -> int:
    return REGISTERS.get(lanes, 16)


def accumulators(lanes: int, cap: int) -> int:
    """Vector registers a template's accumulator tile may take: `cap` (the tile size its
    template chose on 32-register cores), at most all registers but one, the broadcast or
    input vector each step of the reduction loads (the other operand, a weight vector, can be
    an FMA's memory operand).  With 16 registers (AVX2) a 24-vector tile spilled: DCGAN's
    transposed convs ran at half ONNX Runtime's speed."""
    return max(1, min(cap, register_count(lanes) - 1))


def narrow_register_file(lanes: int) -> bool:
    """Fewer vector registers than the 32 that the templates' measured defaults were chosen
    for (AVX2 and SSE have 16): the templates then take their 16-register defaults, and their
    32-register ones stay as measured on AVX-512."""
    return register_count(lanes) < 32


def candidates(lanes: int, registers: int | None = None, fma_units: int = FMA_UNITS) -> list[MicroKernel]:
    """Every shape that fits the registers and hides the FMA latency, best first by the model
    (fewest loads per FMA, then more accumulators)."""
    regs = registers or register_count(lanes)
    need = FMA_LATENCY * max(1, fma_units)
    out = []
    for vectors in range(1, MAX_VECTORS + 1):
        mr = (regs - vectors - 2) // vectors     # accumulators, loads, a broadcast, one spare
        if mr < 1:
            continue
        k = MicroKernel(mr, vectors, lanes)
        if mr * vectors >= min(need, regs // 2):
            out.append(k)
    return sorted(out, key=lambda k: (k.loads_per_fma, -k.mr * k.vectors))


def detected(lanes: int, registers: int | None = None) -> MicroKernel:
    """The model's choice for a core with `lanes` float32 lanes per vector."""
    found = candidates(lanes, registers)
    return found[0] if found else MicroKernel(1, 1, lanes)


# --------------------------------------------------------------------------------------------
# The calibrated choice, cached per CPU


@functools.lru_cache(maxsize=None)
def cpu_identity() -> str:
    """The host CPU as a file name: its model name and a hash of its feature flags."""
    model, flags = "unknown-cpu", ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "Model", "CPU part") and model == "unknown-cpu":
                    model = value.strip() or model
                elif key in ("flags", "Features") and not flags:
                    flags = " ".join(sorted(value.split()))
    except OSError:
        pass
    slug = re.sub(r"[^A-Za-z0-9]+", "-", model).strip("-")[:60] or "cpu"
    return f"{slug}-{hashlib.sha256(flags.encode()).hexdigest()[:12]}"


def calibration_path() -> Path:
    """Where this CPU's calibration lives in the cache directory."""
    from ...runtime.cache_files import cache_dir

    return cache_dir() / "calibration" / f"{cpu_identity()}.json"


def load_calibration(path: Path | None = None) -> dict | None:
    """This CPU's calibration record, or None when it was never measured (or is unreadable or
    from another version of the calibration)."""
    path = path or calibration_path()
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("version") != CALIBRATION_VERSION:
        return None
    return record


def calibrated(lanes: int, record: dict | None = None) -> MicroKernel | None:
    """The measured kernel for `lanes` from the calibration record (None if not measured)."""
    record = record if record is not None else load_calibration()
    entry = (record or {}).get("kernels", {}).get(str(lanes))
    if not isinstance(entry, dict):
        return None
    try:
        k = MicroKernel(int(entry["mr"]), int(entry["vectors"]), lanes)
    except (KeyError, TypeError, ValueError):
        return None
    return k if 1 <= k.mr and 1 <= k.vectors and k.registers <= register_count(lanes) else None


def for_target(target, dtype: str = "float32") -> MicroKernel:
    """The micro-kernel for `target`: the host's calibrated shape when the target is the host
    (-mcpu=native) and it was calibrated, else the detected one."""
    lanes = max(1, target.simd_lanes(dtype))
    if getattr(target, "mcpu", "") == "native":
        found = calibrated(lanes)
        if found is not None:
            return found
    return detected(lanes)
