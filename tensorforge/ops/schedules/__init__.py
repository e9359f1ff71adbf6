"""Schedule templates, one registry: the `op + target -> schedule` arrow (lowering.py calls
the template an op names for the target's kind; the auto-tuner looks up the same entry).

Two kinds of template share it:

- group templates, `@template("name.kind")` or `@template("name.kind", tunable=True)`:
  `fn(schedule, master outputs, group outputs, target, cfg=None)`.  The computation is the op's
  own (from the op registry); the template only schedules it.  A tunable one declares its knobs
  on `cfg` and applies them in the same function (te/space.py): with `cfg` None it schedules at
  its heuristic default, which is the space's default point by construction.  A plain one
  ignores `cfg`.
- workload templates, `@workload_template("name", reference=numpy_fn)` (TVM's
  `@autotvm.template`), always tunable: they build their computation too,
  `fn(cfg, target, input placeholders, **attrs) -> (schedule, outputs)`, and come with a NumPy
  `reference(*input arrays, **attrs)` that measurement checks candidates against.

The template modules of this package (cpu*.py) are imported on the first lookup, so their
decorators have run before any name is resolved; a template defined elsewhere (a test, a
benchmark) registers when its module is imported, and `require_tunable(name, module)` imports
that module first (a fresh measuring process does).
"""
from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import Callable

__all__ = ["Template", "template", "workload_template", "get_template", "get_tunable", "require_tunable",
           "tunable_names"]

GROUP = "group"
WORKLOAD = "workload"


@dataclass(frozen=True)
class Template:
    """One registered template: its name, its function, its kind (GROUP or WORKLOAD), whether the
    auto-tuner may tune it, and (workload templates) its NumPy reference."""

    name: str
    fn: Callable
    kind: str = GROUP
    tunable: bool = False
    reference: Callable | None = None

    @property
    def module(self) -> str:
        """The module that registers this template (a measuring process imports it)."""
        return self.fn.__module__


_TEMPLATES: dict[str, Template] = {}


def _register(t: Template) -> None:
    """Add `t`; the same function registered again (its module imported a second time) replaces
    its entry, another function under a taken name is an error."""
    old = _TEMPLATES.get(t.name)
    if old is not None and (old.module, old.fn.__qualname__) != (t.module, t.fn.__qualname__):
        raise ValueError(f"schedule template {t.name!r} is registered twice "
                         f"({old.module}.{old.fn.__qualname__} and {t.module}.{t.fn.__qualname__})")
    _TEMPLATES[t.name] = t


def template(name: str, tunable: bool = False) -> Callable:
    """Register a group template `fn(s, master_outs, outs, target, cfg=None)` under `name`
    ("op.kind"); with `tunable=True` it declares knobs on `cfg` and the auto-tuner tunes it."""
    def wrap(fn: Callable) -> Callable:
        _register(Template(name, fn, GROUP, tunable))
        return fn
    return wrap


def workload_template(name: str, reference: Callable) -> Callable:
    """Register a tunable workload template `fn(cfg, target, inputs, **attrs) -> (schedule,
    outputs)` with its NumPy `reference(*input arrays, **attrs) -> output array(s)`."""
    if not callable(reference):
        raise ValueError(f"workload template {name!r} needs a NumPy reference function, got {reference!r}")

    def wrap(fn: Callable) -> Callable:
        _register(Template(name, fn, WORKLOAD, True, reference))
        return fn
    return wrap


@functools.cache
def _load() -> None:
    """Import every template module of the package once, so their decorators run."""
    import pkgutil

    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")


def _lookup(name: str) -> Template | None:
    if name not in _TEMPLATES:
        _load()
    return _TEMPLATES.get(name)


def get_template(name: str) -> Callable:
    """The schedule function of the group template `name` (tunable or not)."""
    t = _lookup(name)
    if t is None or t.kind != GROUP:
        raise KeyError(f"unknown schedule template {name!r}")
    return t.fn


def get_tunable(name: str) -> Template | None:
    """The tunable template registered as `name`, or None (unknown, or not tunable)."""
    t = _lookup(name)
    return t if t is not None and t.tunable else None


def require_tunable(name: str, module: str | None = None) -> Template:
    """The tunable template `name`, importing `module` first when given and the name is not
    registered yet (a fresh measuring process)."""
    if name not in _TEMPLATES and module:
        importlib.import_module(module)
    t = get_tunable(name)
    if t is None:
        why = "is not tunable" if name in _TEMPLATES else "is not registered"
        raise KeyError(f"schedule template {name!r} {why}; the tunable ones: {', '.join(tunable_names())}")
    return t


def tunable_names() -> list[str]:
    """The names of every registered tunable template, sorted."""
    _load()
    return sorted(n for n, t in _TEMPLATES.items() if t.tunable)
