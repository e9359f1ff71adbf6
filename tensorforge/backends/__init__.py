"""Backends, one module per device, on one protocol (backends/base.py).  Each target kind is
registered with its plain facts in backends/registry.py; the core asks `backend_for(target)`
and never imports a backend by name."""
from __future__ import annotations

from .registry import KindSpec, backend_for, kind_spec, register, unregister  # noqa: F401
