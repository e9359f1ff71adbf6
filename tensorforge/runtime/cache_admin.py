"""What the cache directory holds, and pruning it (`tensorforge cache`).

Nothing in the cache is ever deleted by a compile: every model shape, tuning config and compiler
version adds entries, and a service whose inputs change length adds them for months (a developer
machine had gathered 9.8 GB in 428,000 files).  This module sorts the directory into entries that
are kept or removed whole, each with its size and when it was last used (the latest access or
modification time of its files: access times are kept to within a day on most mounts):

  library        tf_<key>.json (manifest), tf_<key>-<hash>.so, tf_<key>.c (runtime/compile.py)
  kernel         lowered/<key>.ir and lowered/<key>.c.entry (lowering.py)
  build record   builds/<key>.json (build_records.py)
  loaded model   model_<hash>.so: the library of a .tfm file that was loaded (runtime/model.py)
  cuda binary    cuda/.../<key>.cubin (backends/cuda.py)
  calibration    calibration/<cpu>.json: this machine's measured GEMM kernel, never pruned
  temporary      a compile's scratch files (*.tmp, tf_<key>.units.*), pruned once an hour old
  other          anything else, left alone

`prune` removes the least recently used entries until the rest fit `max_bytes`, and every entry
unused for `older_than` seconds.  It is safe beside running compiles and models: a library is
removed manifest first (a compile that then finds no manifest builds it again; one that still
reads the manifest finds the library gone, warns once and builds it again), a loaded library
stays mapped in the processes that use it, and what a later compile misses it builds again.
"""
from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from .cache_files import cache_dir

KINDS = ("library", "kernel", "build record", "loaded model", "cuda binary", "calibration", "temporary", "other")
KEPT = frozenset({"calibration", "other"})     # never pruned
TEMPORARY_AGE_S = 3600.0                        # scratch files younger than this may be in use

_LIBRARY = re.compile(r"^tf_([0-9a-f]+)(?:\.json|\.c|-[0-9a-f]+\.so)$")
_UNITS = re.compile(r"^tf_[0-9a-f]+\.units\.")


@dataclass
class Entry:
    """Files kept or removed together."""
    kind: str
    paths: list = field(default_factory=list)
    size: int = 0
    used: float = 0.0

    def add(self, path: Path, st: os.stat_result) -> None:
        self.paths.append(path)
        self.size += st.st_size
        self.used = max(self.used, st.st_atime, st.st_mtime)


def scan(directory: Path | None = None) -> list[Entry]:
    """The entries of the cache directory (module docstring)."""
    root = Path(directory) if directory is not None else cache_dir()
    entries: dict = {}

    def entry(key, kind: str) -> Entry:
        found = entries.get(key)
        if found is None:
            found = entries[key] = Entry(kind)
        return found

    for path, st in _walk(root):
        rel = path.relative_to(root)
        top = rel.parts[0]
        if _UNITS.match(top):                                       # scratch of a compile
            entry(("temporary", top), "temporary").add(path, st)
        elif path.name.endswith(".tmp"):
            entry(("temporary", str(rel)), "temporary").add(path, st)
        elif top == "lowered" and len(rel.parts) == 2:
            stem = path.name.split(".", 1)[0]
            entry(("kernel", stem), "kernel").add(path, st)
        elif top == "builds" and len(rel.parts) == 2:
            entry(("build", path.name), "build record").add(path, st)
        elif top == "calibration":
            entry(("calibration", str(rel)), "calibration").add(path, st)
        elif top == "cuda":
            entry(("cuda", str(rel)), "cuda binary").add(path, st)
        elif len(rel.parts) == 1 and _LIBRARY.match(path.name):
            entry(("library", _LIBRARY.match(path.name).group(1)), "library").add(path, st)
        elif len(rel.parts) == 1 and path.name.startswith("model_") and path.name.endswith(".so"):
            entry(("model", path.name), "loaded model").add(path, st)
        else:
            entry(("other", str(rel)), "other").add(path, st)
    return list(entries.values())


def _walk(root: Path):
    """(path, stat) of every file under `root` (symbolic links not followed), and of a compile's
    scratch folders (tf_<key>.units.*) as one item each."""
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            items = list(os.scandir(folder))
        except OSError:
            continue                 # removed while we looked
        for item in items:
            try:
                st = item.stat(follow_symlinks=False)
                if item.is_dir(follow_symlinks=False) and not _UNITS.match(item.name):
                    stack.append(Path(item.path))
                    continue
            except OSError:
                continue
            yield Path(item.path), st


def summary(entries: list[Entry]) -> dict:
    """{kind: (entries, bytes)} in KINDS order, kinds with no entry left out."""
    out: dict = {}
    for kind in KINDS:
        mine = [e for e in entries if e.kind == kind]
        if mine:
            out[kind] = (len(mine), sum(e.size for e in mine))
    return out


def prune(entries: list[Entry], max_bytes: int | None = None, older_than: float | None = None,
          dry_run: bool = False, now: float | None = None) -> list[Entry]:
    """Remove (unless `dry_run`) the entries unused for `older_than` seconds and then the least
    recently used until all entries take at most `max_bytes`; returns the entries removed,
    oldest first.  Calibration and unknown files are kept; a compile's scratch files are removed
    only once TEMPORARY_AGE_S old."""
    now = time.time() if now is None else now
    total = sum(e.size for e in entries)
    gone: list[Entry] = []
    for e in sorted(entries, key=lambda e: e.used):
        if e.kind in KEPT or (e.kind == "temporary" and now - e.used < TEMPORARY_AGE_S):
            continue
        stale = older_than is not None and now - e.used > older_than
        over = max_bytes is not None and total > max_bytes
        if not (stale or over):
            continue
        if not dry_run:
            _remove(e)
        total -= e.size
        gone.append(e)
    return gone


def clear(entries: list[Entry], calibration: bool = False, dry_run: bool = False, now: float | None = None) -> list[Entry]:
    """Remove every entry but unknown files and the scratch of compiles that may still run
    (younger than TEMPORARY_AGE_S), and the calibration only when asked."""
    now = time.time() if now is None else now
    gone = [e for e in entries if e.kind != "other" and (calibration or e.kind != "calibration")
            and not (e.kind == "temporary" and now - e.used < TEMPORARY_AGE_S)]
    if not dry_run:
        for e in gone:
            _remove(e)
    return gone


def _remove(e: Entry) -> None:
    # a library's manifest goes first: a reader then finds no entry rather than half of one
    for path in sorted(e.paths, key=lambda p: (not p.name.endswith(".json"), -len(p.parts))):
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink()
        except FileNotFoundError:
            pass


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """'500M', '2G', '1.5GB', '800k', '1024' (bytes) -> bytes (powers of 1024); ValueError else."""
    m = _SIZE.match(text)
    if m is None:
        raise ValueError(f"not a size: {text!r} (examples: 500M, 2G, 1.5GB)")
    return int(float(m.group(1)) * 1024 ** " kmgt".index(m.group(2).lower() or " "))


def parse_age(text: str) -> float:
    """'30d', '12h', '90m', '2w', '45s' -> seconds; ValueError else."""
    m = _AGE.match(text)
    if m is None:
        raise ValueError(f"not a duration: {text!r} (examples: 30d, 12h, 90m)")
    return float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[m.group(2).lower()]


def human(n: float) -> str:
    """Bytes as text: '812 B', '3.4 MB', '9.8 GB'."""
    if n < 1024:
        return f"{n:.0f} B"
    for unit in ("KB", "MB"):
        n /= 1024
        if n < 1024:
            return f"{n:.1f} {unit}"
    return f"{n / 1024:.1f} GB"
