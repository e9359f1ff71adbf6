"""C source -> shared library, through a content-addressed on-disk cache.

The cache key is the SHA-256 of everything that determines the library's bytes: the source, the
compiler's path and its `--version` text (computed once per process) and the flags.  A key that
is already on disk is returned without running the compiler.  Libraries are compiled to a
temporary name in the cache directory and moved into place with `os.replace`, which is atomic:
a reader sees either no file or a complete one, so two processes compiling the same kernel at
once are safe (both compile, the second rename wins, both files are identical).  A library
that is already loaded keeps its old inode when replaced, so replacing never breaks a reader.

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

_CANDIDATES = ("cc", "gcc", "clang")


class CompileError(RuntimeError):
    """The C compiler rejected generated source; the message has its output and the source path."""


def cache_dir() -> Path:
    path = Path(os.environ.get("TENSORFORGE_CACHE_DIR") or Path.home() / ".cache" / "tensorforge")
    path.mkdir(parents=True, exist_ok=True)
    return path


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


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise


def read_pickle(path: Path):
    """The object pickled at `path` (a cache entry), or None when there is no such file;
    ValueError when the file cannot be read back."""
    import pickle
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except FileNotFoundError:
        return None
    except Exception as err:          # damaged, truncated, from another version, unreadable
        raise ValueError(f"{path.name}: {err}") from err


def write_pickle(path: Path, obj) -> None:
    """Pickle `obj` to `path` atomically (its folder made when missing); OSError when it cannot."""
    import pickle
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(path, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def _unlink(path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


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
    lib = directory / f"tf_{key[:32]}.so"
    if lib.exists():
        return str(lib)
    src = directory / f"tf_{key[:32]}.c"
    if not src.exists():
        _write_atomic(src, source.encode("utf-8"))
    fd, tmp_lib = tempfile.mkstemp(dir=directory, prefix=lib.name + ".", suffix=".tmp")
    os.close(fd)
    if len(units) > 1:
        try:
            _compile_units(compiler, list(units), flags, directory / f"tf_{key[:32]}", tmp_lib, src)
        except BaseException:
            _unlink(tmp_lib)
            raise
        os.replace(tmp_lib, lib)
        return str(lib)
    cmd = [*compiler, str(src), "-o", tmp_lib, *flags]
    try:
        result = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as err:
        _unlink(tmp_lib)
        raise _not_run(compiler, err, src) from err
    if result.returncode != 0:
        _unlink(tmp_lib)
        raise _failed(cmd, result.returncode, result.stderr + result.stdout, src)
    os.replace(tmp_lib, lib)
    return str(lib)


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
        for cmd, obj, proc in jobs:
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
