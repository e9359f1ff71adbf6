"""Build records: a compile whose library was built before takes it from the cache without
lowering or printing a kernel.

The lowering cache (lowering.py) keeps each kernel's loop program and printed C, and the library
cache (runtime/compile.py) each library under the hash of its source.  To find the library, a
warm compile still read every loop program back (JSON) and printed the whole source to hash it:
3.4 s of GoogLeNet's warm compile, where its graph passes take 0.2 s.

A build record is kept under a key made of everything the library's source follows from: each
kernel's name and lowering cache key (which holds its group's signature, the target, the
machine's calibrated defaults and a hash of the compiler's own sources), the kernel calls the
sequence functions would make, and the backend.  It holds what the driver takes from a build:
the backend's description of the loaded module (for the CPU: the library's manifest and source
file, each kernel's buffers and C symbol, the compiler flags and the compiler's identity, all
checked again on restore), each kernel's buffer record, and whether the kernels were compiled
into sequence functions.

A record whose library is gone, damaged or built by another compiler is a miss: the compile
lowers and builds as before and writes the record again.  A damaged record is reported with one
warning.  The loop programs stay in the lowering cache; `model.info["funcs"]` reads them back
when it is first looked at (LazyFuncs).
"""
from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .lowering import lower_group_cached
from .runtime.cache_files import DamagedEntry, cache_dir, read_entry, warn_rebuild, write_entry


def record_key(kernels, calls: list, target, backend) -> str:
    """The key of a build of `kernels` (driver.plan_kernels), whose sequence functions would
    make `calls` ([[(kernel name, [slot, ...]), ...], ...]), for `target` on `backend`."""
    pending = [(p.name, Path(p.path).name) for p in kernels.pending]
    text = repr((backend.name, str(target), pending, calls))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:40]


def _path(key: str) -> Path:
    return cache_dir() / "builds" / f"{key}.json"


def restore(key: str, kernels, backend, target) -> tuple[Any, dict] | None:
    """(module, record) of the build recorded under `key` when the backend can load it again;
    None when there is no record or its files are gone."""
    if backend.restore is None:
        return None
    path = _path(key)
    try:
        payload = read_entry(path)
        record = None if payload is None else json.loads(payload)
    except (DamagedEntry, ValueError) as err:
        warn_rebuild(err if isinstance(err, DamagedEntry) else DamagedEntry(f"{path.name}: not a build record"),
                     "building the model's library again")
        return None
    if not isinstance(record, dict) or not isinstance(record.get("kernels"), dict) or \
            set(record["kernels"]) != {p.name for p in kernels.pending}:
        return None
    module = backend.restore(record.get("module") or {}, target)
    return None if module is None else (module, record)


def keep(key: str, kernels, backend, target, module, sequences: bool) -> None:
    """Record the build of `kernels` (their funcs lowered) as `module` under `key`."""
    if backend.describe is None:
        return
    described = backend.describe(module, target)
    if described is None:
        return
    record = {"module": described, "sequences": sequences,
              "kernels": {p.name: buffer_record(f) for p, f in zip(kernels.pending, kernels.funcs)}}
    try:
        write_entry(_path(key), json.dumps(record).encode("utf-8"))
    except (OSError, TypeError, ValueError) as err:     # a read-only cache only costs time
        warnings.warn(f"could not write a build record ({err})", RuntimeWarning, stacklevel=2)


def buffer_record(func) -> list:
    """[[shape, dtype], ...] of a kernel's buffers, in parameter order (runtime/validate.py)."""
    from .ir.expr import IntImm
    return [[[int(d.value) if isinstance(d, IntImm) else str(d) for d in b.shape], b.dtype] for b in func.params]


class LazyFuncs(Sequence):
    """The loop programs of a restored build, read back from the lowering cache (or lowered
    again) when first looked at."""

    def __init__(self, pending: list, target):
        self._pending, self._target = list(pending), target
        self._funcs: list | None = None

    def _load(self) -> list:
        if self._funcs is None:
            self._funcs = [lower_group_cached(p.group, self._target, p.name, p.config, p.path) for p in self._pending]
        return self._funcs

    def __len__(self) -> int:
        return len(self._pending)

    def __getitem__(self, index):
        return self._load()[index]

    def __iter__(self):
        return iter(self._load())

    def __repr__(self) -> str:
        return f"<{len(self)} loop programs, read from the lowering cache when used>"
