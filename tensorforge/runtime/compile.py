"""C source -> shared library, through a content-addressed on-disk cache.

The cache key is the SHA-256 of everything that determines the library's bytes: the source, the
compiler's path and its `--version` text (computed once per process) and the flags.  A key that
is already on disk, and whose library checks out against the size and SHA-256 recorded with
it, is returned without running the compiler; a damaged entry is rebuilt with a warning
(runtime/cache_files.py).  Libraries are compiled to a temporary name in the cache directory
and moved into place with `os.replace`, which is atomic: a reader sees either no file or a
complete one, so two processes compiling the same kernel at once are safe.

Cache directory: $TENSORFORGE_CACHE_DIR, else ~/.cache/tensorforge.
Compiler: the `cc` argument, else $CC, else the first of cc, gcc, clang on PATH.
"""
from __future__ import annotations

import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Sequence

from .cache_files import DamagedEntry, cache_dir, store_library, unlink, verified_library, warn_rebuild, write_atomic

_CANDIDATES = ("cc", "gcc", "clang")


class CompileError(RuntimeError):
    """The C compiler rejected generated source; the message has its output and the source path."""


def find_compiler(cc: str | None = None) -> list[str]:
    """The C compiler command to use (its program resolved to an absolute path; $CC may hold
    several words, e.g. "ccache gcc"); RuntimeError saying how to get one if none is found."""
    requested = cc or os.environ.get("CC")
    for name in [requested] if requested else _CANDIDATES:
        words = shlex.split(name)
        found = shutil.which(words[0]) if words else None
        if found:
            return [found, *words[1:]]
    if requested:
        raise RuntimeError(f"C compiler {requested!r} (from {'the cc argument' if cc else '$CC'}) "
                           "was not found on PATH")
    raise RuntimeError("no C compiler found: install gcc or clang (e.g. `apt-get install gcc`), "
                       "or point $CC at one; the CPU backend needs it")


@functools.lru_cache(maxsize=None)
def compiler_version(cc: tuple[str, ...]) -> str:
    """`cc --version` output, part of every cache key (cached for the process)."""
    try:
        result = subprocess.run([*cc, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise RuntimeError(f"cannot run the C compiler {shlex.join(cc)!r}: {err}") from err
    return result.stdout + result.stderr


def cache_key(source: str, flags: list[str], cc: list[str]) -> str:
    h = hashlib.sha256()
    for part in (source, "\0".join(cc), compiler_version(tuple(cc)), "\0".join(flags)):
        data = part.encode("utf-8")
        h.update(len(data).to_bytes(8, "little"))   # length-prefixed: parts cannot run together
        h.update(data)
    return h.hexdigest()


def compiler_identity(cc: str | None = None) -> str:
    """The compiler command and a hash of its `--version` text: what a library built earlier
    must have been built with to be used again without its source (build_records.py)."""
    compiler = find_compiler(cc)
    version = hashlib.sha256(compiler_version(tuple(compiler)).encode("utf-8")).hexdigest()[:16]
    return f"{shlex.join(compiler)} {version}"


def library_entry(lib_path: str) -> tuple[Path, Path]:
    """(manifest, source file) of a library `compile_source` returned: `tf_<key>-<hash>.so` is
    recorded in `tf_<key>.json` and was built from `tf_<key>.c`."""
    lib = Path(lib_path)
    stem = lib.name.rsplit("-", 1)[0]
    return lib.with_name(stem + ".json"), lib.with_name(stem + ".c")


def compile_source(source: str, flags: list[str], cc: str | None = None, units: Sequence[str] = ()) -> str:
    """Compile C `source` into a shared library with `flags`; returns the library's path.

    Flags are passed after the source file, so libraries (-lm) resolve.  Raises CompileError
    with the compiler's output and the path of the kept source when compilation fails.
    `units`: the same code split into translation units (codegen/c.py): they are compiled
    at the same time, one compiler process each, and linked (the library is cached under the
    whole source's key either way).
    """
    compiler = find_compiler(cc)
    key = cache_key(source, list(flags), compiler)
    directory = cache_dir()
    manifest = directory / f"tf_{key[:32]}.json"
    try:
        found = verified_library(manifest)
    except DamagedEntry as err:
        warn_rebuild(err, "compiling the library again")
        found = None
    if found is not None:
        return found
    src = directory / f"tf_{key[:32]}.c"
    write_atomic(src, source.encode("utf-8"))
    fd, tmp_lib = tempfile.mkstemp(dir=directory, prefix=manifest.stem + ".", suffix=".so.tmp")
    os.close(fd)
    try:
        if len(units) > 1:
            _compile_units(compiler, list(units), flags, directory / f"tf_{key[:32]}", tmp_lib, src)
        else:
            cmd = [*compiler, str(src), "-o", tmp_lib, *flags]
            try:
                result = subprocess.run(cmd, capture_output=True, text=True)
            except OSError as err:
                raise _not_run(compiler, err, src) from err
            if result.returncode != 0:
                raise _failed(cmd, result.returncode, result.stderr + result.stdout, src)
        return store_library(manifest, tmp_lib)
    finally:
        unlink(tmp_lib)


def _not_run(compiler: list[str], err: OSError, src: Path) -> CompileError:
    return CompileError(f"could not run the C compiler {shlex.join(compiler)!r}: {err}\nsource kept at: {src}")


def _failed(cmd: list[str], code: int, output: str, src: Path, how: str = "") -> CompileError:
    return CompileError(
        f"C compilation failed (exit code {code}).\n"
        f"command: {shlex.join(cmd)}\n"
        f"source kept at: {src}{how}\n"
        f"compiler output:\n{output.strip()}")


def _compile_units(compiler: list[str], units: list[str], flags: list[str], stem: Path, out: str, src: Path) -> None:
    """Compile each unit to an object file, all at once, then link them into `out`."""
    compile_flags = [f for f in flags if f != "-shared" and not f.startswith("-l")]
    tmpdir = Path(tempfile.mkdtemp(dir=stem.parent, prefix=stem.name + ".units."))
    try:
        jobs = []
        for k, text in enumerate(units):
            unit, obj = tmpdir / f"u{k}.c", tmpdir / f"u{k}.o"
            unit.write_text(text, encoding="utf-8")
            cmd = [*compiler, "-c", str(unit), "-o", str(obj), *compile_flags]
            try:
                jobs.append((cmd, obj, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                        text=True)))
            except OSError as err:
                raise _not_run(compiler, err, src) from err
        how = f" (compiled as {len(units)} units)"
        failed = None
        for cmd, _obj, proc in jobs:
            stdout, stderr = proc.communicate()
            if proc.returncode != 0 and failed is None:
                failed = _failed(cmd, proc.returncode, stderr + stdout, src, how)
        if failed is None:
            cmd = [*compiler, *[str(obj) for _, obj, _ in jobs], "-o", out, *flags]
            result = subprocess.run(cmd, capture_output=True, text=True)
            if result.returncode != 0:
                failed = _failed(cmd, result.returncode, result.stderr + result.stdout, src, how)
        if failed is not None:
            raise failed
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
