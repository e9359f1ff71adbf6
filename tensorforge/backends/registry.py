"""The backend registry: which target kinds exist, the plain facts about each, and which module
builds for it.

A backend is one module under `backends/` (or anywhere importable) that defines `BACKEND`, a
`backends.base.Backend`.  What the compiler must know about a kind *before* it touches the
backend (to parse a target string, to check a `bind` or a memory scope, to pick a schedule
template, to choose layouts in the graph passes) is plain data, a `KindSpec`, registered here.
This module imports nothing from the package, so `Target` (a low layer) reads it freely; the
backend module itself (codegen, compiler, runtime) is imported by `backend_for` on first use,
so a missing optional dependency of one backend never breaks the others.

Adding a backend is one new module plus one `register(KindSpec(...))` line (below, or in the
code that brings the backend).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class KindSpec:
    """What the compiler knows about a target kind without loading its backend.

    options:          the "-name=value" options its target strings accept, with their defaults
                      ("-O<n>" is accepted by every kind)
    module:           the importable module that defines `BACKEND` for this kind
    thread_axes:      the names `bind` accepts (blockIdx.x, threadIdx.x, vthread, ...)
    memory_scopes:    the scopes a buffer may be placed in
    vector_bytes:     width of one vector register; 0 means "the host CPU's" (from -mcpu)
    template_suffix:  schedule templates are named "<name>.<suffix>" ("cpu", "gpu")
    layouts:          the layout rewrites the graph passes may apply for this kind:
                      "NCHWc" (blocked convolution data), "packed_weights" (weights re-laid out
                      into panels or transposed for unit-stride reads), "packed_rnn" (an LSTM / GRU
                      step's recurrent weight packed by blocks of hidden units, the gates of a
                      block side by side), "rows" (row-vectorized softmax / layer norm / pooling
                      forms), "winograd" (3x3 Winograd convs on blocked data), "winograd_nchw" (3x3
                      Winograd convs on NCHW data; turned off by the target option -winograd=0)
    """

    kind: str
    module: str
    options: tuple[tuple[str, str], ...] = ()
    thread_axes: tuple[str, ...] = ()
    memory_scopes: tuple[str, ...] = ("global", "local")
    vector_bytes: int = 16
    template_suffix: str = "cpu"
    layouts: frozenset = field(default_factory=frozenset)
    aliases: tuple[str, ...] = ()

    def option_default(self, name: str) -> str:
        return dict(self.options)[name]


_KINDS: dict[str, KindSpec] = {}
_ALIASES: dict[str, str] = {}


def register(spec: KindSpec) -> KindSpec:
    """Make target kind `spec.kind` (and its aliases) parse and build with `spec.module`.
    Registering the same kind again replaces it (a test may swap a backend in and out)."""
    if not isinstance(spec, KindSpec):
        raise TypeError(f"register expects a KindSpec, got {type(spec).__name__}")
    for name in (spec.kind,) + spec.aliases:
        owner = _ALIASES.get(name)
        if owner is not None and owner != spec.kind:
            raise ValueError(f"target kind name {name!r} is already taken by kind {owner!r}")
    _KINDS[spec.kind] = spec
    for name in (spec.kind,) + spec.aliases:
        _ALIASES[name] = spec.kind
    return spec


def unregister(kind: str) -> None:
    """Forget target kind `kind` (for tests that register a backend of their own)."""
    spec = _KINDS.pop(kind, None)
    if spec is not None:
        for name in (spec.kind,) + spec.aliases:
            _ALIASES.pop(name, None)


def resolve(name: str) -> KindSpec | None:
    """The spec of target kind `name` (or of the kind it is an alias of), or None."""
    kind = _ALIASES.get(name)
    return _KINDS[kind] if kind is not None else None


def kind_spec(kind: str) -> KindSpec:
    spec = _KINDS.get(kind)
    if spec is None:
        raise ValueError(f"unknown target kind {kind!r}; known kinds: {', '.join(known_names())}")
    return spec


def known_names() -> tuple[str, ...]:
    """Every kind and alias that parses, kinds first."""
    return tuple(_KINDS) + tuple(a for a in _ALIASES if a not in _KINDS)


def backend_for(target: Any):
    """The `Backend` that builds for `target` (a Target, or anything with a `.kind`), its module
    imported on first use."""
    spec = kind_spec(target.kind)
    try:
        module = importlib.import_module(spec.module)
    except ModuleNotFoundError as err:
        if err.name is not None and spec.module.startswith(err.name):
            raise NotImplementedError(f"target kind {spec.kind!r} has no backend in this installation "
                                      f"(module {spec.module} is missing)") from None
        raise ImportError(f"the backend for target kind {spec.kind!r} needs {err.name!r}, "
                          f"which is not installed") from err
    backend = getattr(module, "BACKEND", None)
    if backend is None:
        raise TypeError(f"backend module {spec.module} defines no BACKEND")
    return backend


# The kinds this package ships. ------------------------------------------------------------------
_CPU_LAYOUTS = frozenset({"NCHWc", "packed_weights", "packed_rnn", "rows", "winograd"})
_GPU_LAYOUTS = frozenset({"packed_rnn", "winograd_nchw"})
_GPU_THREAD_AXES = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z",
                    "vthread")

register(KindSpec("c", "tensorforge.backends.cpu", options=(("mcpu", "native"),), vector_bytes=0,
                  template_suffix="cpu", layouts=_CPU_LAYOUTS, aliases=("llvm", "cpu")))
register(KindSpec("cuda", "tensorforge.backends.cuda", options=(("arch", ""), ("winograd", "1")), thread_axes=_GPU_THREAD_AXES,
                  memory_scopes=("global", "shared", "local"), vector_bytes=16, template_suffix="gpu",
                  layouts=_GPU_LAYOUTS))
register(KindSpec("opencl", "tensorforge.backends.opencl", options=(("device", ""), ("winograd", "1")),
                  thread_axes=_GPU_THREAD_AXES, memory_scopes=("global", "shared", "local"), vector_bytes=16,
                  template_suffix="gpu", layouts=_GPU_LAYOUTS))
register(KindSpec("accel", "tensorforge.backends.accel.backend", options=(("config", "default"),),
                  thread_axes=("vthread",), memory_scopes=("global", "local.inp_buffer", "local.wgt_buffer",
                                                           "local.acc_buffer"), template_suffix="accel"))
