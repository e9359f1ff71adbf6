"""Backends, one module per device.  Each module registers the target kinds it serves; the core
asks `backend_for(target)` and never imports a backend by name."""
from __future__ import annotations

import importlib
from types import ModuleType

# target kind -> module that serves it (imported on first use so a missing optional dependency of
# one backend does not break the others)
_BACKENDS: dict[str, str] = {"c": "tensorforge.backends.cpu"}
_BACKENDS["opencl"] = "tensorforge.backends.opencl"
_BACKENDS["cuda"] = "tensorforge.backends.cuda"


def register(kind: str, module: str) -> None:
    _BACKENDS[kind] = module


def backend_for(target) -> ModuleType:
    module = _BACKENDS.get(target.kind)
    if module is None:
        raise NotImplementedError(f"no backend for target kind {target.kind!r} yet; "
                                  f"available: {', '.join(sorted(_BACKENDS))}")
    return importlib.import_module(module)
