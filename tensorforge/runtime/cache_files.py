"""Files of the on-disk cache, written atomically and verified when read.

A damaged entry (a truncated library, a zero-length file, a disk error) must never be used:
loading a truncated shared library kills the process with SIGBUS, and a cache that keeps the
damaged file breaks every later run.  So every entry carries its size and SHA-256 and is checked
before use; an entry that does not check out is reported with one warning and rebuilt.

- Data entries (lowered kernels, their C text): one file, a header line
  `tensorforge-cache 1 <size> <sha256>` followed by the payload.  Written under a temporary
  name and renamed, so a reader sees either the old file or the complete new one.
- Libraries: `<stem>.json`, a small manifest {"lib", "size", "sha256"} beside a library file
  named by its own content hash (`<stem>-<hash16>.so`).  The library is renamed into place
  before the manifest, so a manifest only ever names a complete library, and two processes
  that build the same entry at once each leave a consistent pair.

The directory is created with mode 0700: the cache holds native code that this user runs.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from pathlib import Path

_MAGIC = b"tensorforge-cache 1 "


class DamagedEntry(ValueError):
    """A cache entry whose size or checksum does not match what was recorded with it."""


def cache_dir() -> Path:
    """$TENSORFORGE_CACHE_DIR, else ~/.cache/tensorforge; created (mode 0700) when missing."""
    path = Path(os.environ.get("TENSORFORGE_CACHE_DIR") or Path.home() / ".cache" / "tensorforge")
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def make_private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` under a temporary name, then rename it into place."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        unlink(tmp)
        raise


def unlink(path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# -- data entries --------------------------------------------------------------------------------
def write_entry(path: Path, payload: bytes) -> None:
    """Store `payload` at `path` with its size and checksum (folders made when missing)."""
    make_private_dir(path.parent)
    header = _MAGIC + f"{len(payload)} {hashlib.sha256(payload).hexdigest()}\n".encode()
    write_atomic(path, header + payload)


def read_entry(path: Path) -> bytes | None:
    """The payload stored at `path`, or None when there is no such file; DamagedEntry when the
    file does not check out (truncated, changed, not a cache entry)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as err:
        raise DamagedEntry(f"{path.name}: cannot be read ({err})") from None
    header, sep, payload = data.partition(b"\n")
    fields = header[len(_MAGIC):].split(b" ")
    if not sep or not header.startswith(_MAGIC) or len(fields) != 2 or not fields[0].isdigit():
        raise DamagedEntry(f"{path.name}: not a tensorforge cache entry")
    if int(fields[0]) != len(payload) or hashlib.sha256(payload).hexdigest().encode() != fields[1]:
        raise DamagedEntry(f"{path.name}: size or checksum does not match (truncated or changed)")
    return payload


# -- libraries ----------------------------------------------------------------------------------
def store_library(manifest: Path, built: str) -> str:
    """Move the library file `built` into the cache under `manifest`'s stem, record its size and
    checksum in `manifest`, and return the library's path."""
    digest = sha256_file(Path(built))
    lib = manifest.with_name(f"{manifest.stem}-{digest[:16]}.so")
    size = os.path.getsize(built)
    os.replace(built, lib)
    write_atomic(manifest, json.dumps({"lib": lib.name, "size": size, "sha256": digest}).encode())
    return str(lib)


def verified_library(manifest: Path) -> str | None:
    """The path of the library recorded in `manifest` when it checks out; None when there is no
    entry; DamagedEntry when the manifest or the library is damaged or missing."""
    try:
        text = manifest.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as err:
        raise DamagedEntry(f"{manifest.name}: cannot be read ({err})") from None
    try:
        entry = json.loads(text)
        name, size, digest = entry["lib"], entry["size"], entry["sha256"]
    except (ValueError, KeyError, TypeError):
        raise DamagedEntry(f"{manifest.name}: not a library manifest") from None
    if not isinstance(name, str) or os.path.basename(name) != name or not name.endswith(".so"):
        raise DamagedEntry(f"{manifest.name}: names no library of this folder")
    lib = manifest.with_name(name)
    return check_file(lib, size, digest)


def check_file(path: Path, size: int, digest: str) -> str:
    """`path` as a string when the file has `size` bytes and SHA-256 `digest`; DamagedEntry
    otherwise."""
    try:
        actual = os.path.getsize(path)
    except OSError:
        raise DamagedEntry(f"{path.name}: missing") from None
    if actual != size:
        raise DamagedEntry(f"{path.name}: {actual} bytes, {size} recorded (truncated or changed)")
    if sha256_file(path) != digest:
        raise DamagedEntry(f"{path.name}: checksum does not match (changed on disk)")
    return str(path)


def warn_rebuild(err: Exception, what: str) -> None:
    """The one warning of a damaged cache entry that is being rebuilt."""
    warnings.warn(f"damaged cache entry ({err}); {what}", RuntimeWarning, stacklevel=3)
