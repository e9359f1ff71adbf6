"""Schedule templates per target kind, registered by name with `@template("name.kind")`.

A template gets (schedule, the master op's output tensors, the group's output tensors, target,
config) and applies its knobs; with config None it uses its heuristic default.
"""
from __future__ import annotations

import functools
from typing import Callable

_TEMPLATES: dict[str, Callable] = {}


def template(name: str) -> Callable:
    def wrap(fn: Callable) -> Callable:
        if name in _TEMPLATES:
            raise ValueError(f"schedule template {name} registered twice")
        _TEMPLATES[name] = fn
        return fn
    return wrap


def get_template(name: str) -> Callable:
    _load()
    try:
        return _TEMPLATES[name]
    except KeyError:
        raise KeyError(f"unknown schedule template {name!r}") from None


@functools.cache
def _load() -> None:
    """Import every template module of the package once, so their decorators run."""
    import importlib
    import pkgutil

    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")
