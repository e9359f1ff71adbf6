"""Target: which device kind the code is generated for, and what that machine looks like.

A target is parsed from a short string such as "c", "c -mcpu=native", "c -mcpu=x86-64-v3 -O2"
or "cuda -arch=sm_90" ("llvm" is accepted as an alias for "c").  The kinds, their options and
their facts are registered in backends/registry.py (plain data; the backends themselves are
loaded only when something is built).  It is a frozen value: it can be
hashed into cache keys, compared, and printed back (`Target.parse(str(t)) == t`).

Facts about the host (SIMD width, core count, cache sizes) are properties read lazily from
/proc and /sys, so parsing stays cheap and pure.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from .backends.registry import KindSpec, kind_spec, known_names, resolve
from .ir import dtype as dt

# Every fact about a kind (its options, thread axes, memory scopes, vector width, template
# suffix, layouts) lives in its registered KindSpec (backends/registry.py, plain data).
_DEFAULT_OPT_LEVEL = 3
_FIELDS = ("mcpu", "arch", "device")     # options stored in a field of their own; others in `attrs`

# Vector register width in bytes for explicit -mcpu values.  Anything not listed gets the
# conservative 16 bytes (SSE2 / NEON), which every 64-bit x86 and ARM core has.
_MCPU_SIMD_BYTES = {
    "x86-64-v4": 64, "skylake-avx512": 64, "cascadelake": 64, "cooperlake": 64,
    "icelake-client": 64, "icelake-server": 64, "tigerlake": 64, "sapphirerapids": 64,
    "graniterapids": 64, "znver4": 64, "znver5": 64,
    "x86-64-v3": 32, "haswell": 32, "broadwell": 32, "skylake": 32, "alderlake": 32,
    "raptorlake": 32, "znver1": 32, "znver2": 32, "znver3": 32,
}


@dataclass(frozen=True)
class Target:
    """A code generation target: `kind` plus the options given on its string."""

    kind: str = "c"
    mcpu: str = "native"        # c: the -march value; "native" means the host
    opt_level: int = _DEFAULT_OPT_LEVEL
    arch: str = ""              # cuda: e.g. "sm_90"
    device: str = ""            # opencl: a device name filter
    attrs: tuple = ()           # other options a registered kind declares: sorted (name, value) pairs

    # Parsing and printing -------------------------------------------------------------------
    @staticmethod
    def parse(spec: "str | Target") -> "Target":
        """Parse "kind -opt=value ..." (or return a Target unchanged); ValueError names the bad part."""
        if isinstance(spec, Target):
            return spec
        if not isinstance(spec, str):
            raise TypeError(f"a target is a string such as 'c -mcpu=native', got {type(spec).__name__}")
        text = spec
        parts = text.split()
        if not parts:
            raise ValueError("empty target string; expected e.g. 'c' or 'c -mcpu=native'")
        info = resolve(parts[0])
        if info is None:
            raise ValueError(f"unknown target kind {parts[0]!r} in {text!r}; "
                             f"known kinds: {', '.join(known_names())}")
        fields: dict = {"kind": info.kind}
        attrs: dict = {}
        known = [name for name, _ in info.options]
        for part in parts[1:]:
            if part.startswith("-O") and "=" not in part:
                level = part[2:]
                if level not in ("0", "1", "2", "3"):
                    raise ValueError(f"bad optimization level {part!r} in {text!r}; use -O0 .. -O3")
                fields["opt_level"] = int(level)
                continue
            name, eq, value = part.lstrip("-").partition("=")
            if not part.startswith("-") or not eq or not value:
                raise ValueError(f"bad target option {part!r} in {text!r}; expected -name=value")
            if name not in known:
                raise ValueError(f"unknown option {part!r} for target kind {info.kind!r} in {text!r}; "
                                 f"known: {', '.join(['-' + o for o in known] + ['-O<n>'])}")
            if name in _FIELDS:
                fields[name] = value
            else:
                attrs[name] = value
        if attrs:
            fields["attrs"] = tuple(sorted(attrs.items()))
        return Target(**fields)

    def __str__(self) -> str:
        spec = self.spec
        parts = [self.kind]
        for name, default in spec.options:
            value = self.option(name)
            if value != default:
                parts.append(f"-{name}={value}")
        if self.opt_level != _DEFAULT_OPT_LEVEL:
            parts.append(f"-O{self.opt_level}")
        return " ".join(parts)

    def option(self, name: str) -> str:
        """The value of option `name` ("-name=value" on the target string, else its default)."""
        if name in _FIELDS:
            return getattr(self, name) or self.spec.option_default(name)
        return dict(self.attrs).get(name, self.spec.option_default(name))

    @property
    def spec(self) -> KindSpec:
        """The registered facts about this target's kind (backends/registry.py)."""
        return kind_spec(self.kind)

    # Machine facts ---------------------------------------------------------------------------
    @property
    def simd_bytes(self) -> int:
        """Width of one vector register in bytes (64 for AVX-512, 32 for AVX2, else 16)."""
        if self.spec.vector_bytes:
            return self.spec.vector_bytes
        # 0: a CPU kind, whose vector width is the -mcpu's (or the host's)
        if self.mcpu == "native":
            return _host_simd_bytes()
        return _MCPU_SIMD_BYTES.get(self.mcpu, 16)

    def simd_lanes(self, dtype: str) -> int:
        """How many elements of `dtype` fit in one vector register (at least 1)."""
        return max(1, self.simd_bytes // dt.itemsize(dt.element_of(dtype)))

    @property
    def vector_registers(self) -> int:
        """Architectural vector registers of a CPU target: 32 with AVX-512, else 16 (AVX2, SSE;
        the 64-byte width implies AVX-512's register file)."""
        return 32 if self.simd_bytes == 64 else 16

    @property
    def num_cores(self) -> int:
        return _host_num_cores()

    @property
    def l1_cache_bytes(self) -> int:
        return _host_cache_bytes(1, 32 * 1024)

    @property
    def l2_cache_bytes(self) -> int:
        return _host_cache_bytes(2, 1024 * 1024)

    @property
    def thread_axes(self) -> tuple:
        """Names that `bind` accepts on this target (none on the C target)."""
        return self.spec.thread_axes

    @property
    def memory_scopes(self) -> tuple:
        return self.spec.memory_scopes

    @property
    def template_suffix(self) -> str:
        """Schedule templates for this target are named "<name>.<suffix>" ("cpu", "gpu")."""
        return self.spec.template_suffix

    def prefers(self, layout: str) -> bool:
        """Whether the graph passes may apply layout rewrite `layout` for this target
        ("NCHWc", "packed_weights", "packed_rnn", "rows", "winograd", "winograd_nchw"; see backends/registry.py)."""
        return layout in self.spec.layouts


# --------------------------------------------------------------------------------------------
# Host detection (cached for the process)


@functools.lru_cache(maxsize=None)
def _host_simd_bytes() -> int:
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    flags.update(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    if "avx512f" in flags:
        return 64
    if "avx2" in flags:
        return 32
    return 16  # SSE2 on x86-64, NEON on ARM: the baseline every 64-bit core has


@functools.lru_cache(maxsize=None)
def _host_num_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@functools.lru_cache(maxsize=None)
def _host_cache_bytes(level: int, default: int) -> int:
    """Size of the level-`level` data (or unified) cache of cpu0 from sysfs, else `default`."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = sorted(os.listdir(base))
    except OSError:
        return default
    for entry in entries:
        if not entry.startswith("index"):
            continue
        try:
            with open(f"{base}/{entry}/level") as f:
                if int(f.read().strip()) != level:
                    continue
            with open(f"{base}/{entry}/type") as f:
                if f.read().strip() == "Instruction":
                    continue
            with open(f"{base}/{entry}/size") as f:
                return _parse_size(f.read().strip()) or default
        except (OSError, ValueError):
            continue
    return default


def _parse_size(text: str) -> int:
    """'48K' -> 49152, '2048K' -> 2 MiB, '1M' -> 1 MiB, '512' -> 512."""
    scale = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}
    if text and text[-1].upper() in scale:
        return int(text[:-1]) * scale[text[-1].upper()]
    return int(text)
