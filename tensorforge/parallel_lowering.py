"""Lowering a graph's kernels on every core: the kernels the lowering cache lacks are lowered (and
printed) by this process and worker processes at the same time.

Lowering is Python: a cold compile of GoogLeNet spent 9.2 s lowering 68 kernels and 1.4 s
printing them as C, on one core of two.  When a compile misses at least MIN_TO_START kernels in
the lowering cache (MIN_KERNELS once workers run) and this process may run on more than one
core, the compiling process and worker processes (one per further core, at most one per missing
kernel; started on the first such compile and kept) take the kernels one at a time, the largest
groups first.  A worker writes the loop program to its lowering cache entry, prints the C into
its text entry beside it (lowering.py) and returns the loop program, pickled (reading the cache
entry's JSON back costs the compiling process about 40 ms a kernel).  The compile lowers again
in its own process any kernel that failed, so an error is raised there as without workers.

Workers are fresh interpreters (`python -m tensorforge.parallel_lowering`, importing the same
tensorforge) that read pickled jobs on stdin and write pickled results on stdout: a fork of a
process with OpenMP or kernel threads can deadlock, and multiprocessing's "spawn" would run the
user's script again in each worker when it has no `if __name__ == "__main__"` guard.  A new
worker imports tensorforge (about 0.5 s) while the compiling process lowers alone; with a few
kernels, the worker's start competed with the C compiler that follows (DQN's 5 kernels: 0.76 s
cold without workers, 0.83 with), hence MIN_TO_START.

A worker knows only tensorforge's own ops and templates: a kernel of an op the user's code
registered fails there and is lowered here.  A worker that dies or answers for another kernel is
dropped with its job; an interrupted compile (Ctrl-C) kills the workers, which may be mid-job.
A worker whose machine defaults (calibrated GEMM kernel, core count) differ from this process's
lowers nothing: its kernels would be cached under a key they do not match.
TENSORFORGE_LOWERING_WORKERS sets how many processes lower (1: this one alone, as in the test
suite, so that the templates a test monkeypatches are the ones that lower).
"""
from __future__ import annotations

import atexit
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
from pathlib import Path

from .lowering import CachedText, lower_group_cached, machine_defaults, text_path

MIN_TO_START = 12    # fewer missing kernels start no worker: its start would outlast them ...
MIN_KERNELS = 3      # ... and fewer than these are lowered here alone even when workers run

_workers: list["_Worker"] = []
_lock = threading.Lock()


def worker_count() -> int:
    """Processes that may lower a compile's kernels, this one included:
    TENSORFORGE_LOWERING_WORKERS, else the cores this process may run on."""
    env = os.environ.get("TENSORFORGE_LOWERING_WORKERS")
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            raise ValueError(f"TENSORFORGE_LOWERING_WORKERS must be an integer, got {env!r}") from None
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def prelower(missing: list, target, backend, done=None) -> dict:
    """{kernel name: loop program} of the kernels of `missing` (driver.PendingKernel, not in the
    lowering cache), lowered by this process and worker processes together when there are
    enough of them ({} otherwise, and without the kernels that failed to lower).  `done`, when
    given, is called (from any thread) after each kernel lowered."""
    count = min(worker_count(), len(missing))
    running = sum(w.alive for w in _workers)
    if count < 2 or len(missing) < (MIN_KERNELS if running else MIN_TO_START):
        return {}
    defaults = machine_defaults(target)
    # the largest groups first, so that no long job starts last
    order = sorted(missing, key=lambda p: -sum(n.outputs[0].size if n.outputs else 0 for n in p.group.nodes))
    jobs: queue.Queue = queue.Queue()
    for p in order:
        jobs.put((p.name, p))
    lowered: dict = {}
    with _lock:                     # one compile at a time uses the workers
        workers = _started(count - 1)
        threads = [threading.Thread(target=w.serve, args=(jobs, lowered, target, defaults, backend.name, done),
                                    daemon=True) for w in workers]
        for t in threads:
            t.start()
        try:
            _serve_here(jobs, lowered, target, done)
        except BaseException:
            # interrupted (Ctrl-C): the workers may be mid-job, so none of them is used again
            _stop_all(kill=True)
            raise
        for t in threads:
            t.join()
        _workers[:] = [w for w in _workers if w.alive]
    return lowered


def _serve_here(jobs: queue.Queue, lowered: dict, target, done=None) -> None:
    """This process takes jobs too, from the start: while a new worker imports tensorforge, and
    beside the workers afterwards (they wait on pipes without the interpreter's lock)."""
    while True:
        try:
            name, p = jobs.get_nowait()
        except queue.Empty:
            return
        try:
            lowered[name] = lower_group_cached(p.group, target, p.name, p.config, p.path)
        except Exception:           # noqa: BLE001 - lowered again by the compile, which raises it
            continue
        if done is not None:
            done()


class _Worker:
    """One worker process and the pipe protocol to it: a job or result is a 4-byte length and
    that many bytes of pickle."""

    def __init__(self):
        # the worker imports the same tensorforge as this process, and starts no workers itself
        package_root = str(Path(__file__).resolve().parent.parent)
        path = os.pathsep.join([package_root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
        env = dict(os.environ, TENSORFORGE_LOWERING_WORKERS="1", PYTHONPATH=path)
        self.proc = subprocess.Popen([sys.executable, "-m", "tensorforge.parallel_lowering"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env)
        self.alive = True

    def serve(self, jobs: queue.Queue, lowered: dict, target, defaults: str, backend_name: str, done=None) -> None:
        """Run jobs from `jobs` until it is empty, their loop programs into `lowered`."""
        while self.alive:
            try:
                name, p = jobs.get_nowait()
            except queue.Empty:
                return
            try:
                _send(self.proc.stdin, (p.group, target, p.name, p.config, str(p.path), defaults, backend_name))
                answer, ok, value = _receive(self.proc.stdout)
                if answer != p.name:
                    raise EOFError(f"the worker answered for {answer!r}, not {p.name!r}")
            except Exception:       # noqa: BLE001 - a dead or confused worker: lowered by the compile
                self.stop()
                return
            if ok and value is not None:
                lowered[name] = value
                if done is not None:
                    done()

    def stop(self) -> None:
        self.alive = False
        try:
            self.proc.kill()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass


def _started(count: int) -> list:
    while len(_workers) < count:
        try:
            _workers.append(_Worker())
        except OSError:
            break
    return _workers[:count]


def _send(stream, value) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<I", len(data)) + data)
    stream.flush()


def _receive(stream):
    head = stream.read(4)
    if len(head) != 4:
        raise EOFError("the lowering worker closed its pipe")
    (size,) = struct.unpack("<I", head)
    data = stream.read(size)
    if len(data) != size:
        raise EOFError("the lowering worker closed its pipe")
    return pickle.loads(data)


def _lower_job(group, target, name: str, config, path: str, defaults: str, backend_name: str):
    """In a worker: lower one kernel into the lowering cache, print its C text entry, and return
    the loop program (None when this process's machine defaults differ)."""
    if machine_defaults(target) != defaults:
        return None
    from .backends import backend_for
    func = lower_group_cached(group, target, name, config, Path(path))
    backend = backend_for(target)
    if backend.name == backend_name:
        backend.render([func], target, (), {name: CachedText(text_path(Path(path)))})
    return func


def _stop_all(kill: bool = False) -> None:
    """End every worker: closing its stdin ends its loop; `kill` ends it at once."""
    for w in _workers:
        if kill:
            w.stop()
            continue
        try:
            w.proc.stdin.close()
        except OSError:
            pass
    for w in _workers:
        try:
            w.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            w.stop()
    _workers.clear()


atexit.register(_stop_all)


def _serve_forever() -> None:
    """The worker's loop: jobs in on stdin, (kernel name, ok, loop program or error text) out on
    the original stdout; anything else written to stdout (Python or C) goes to stderr."""
    stdin = sys.stdin.buffer
    stdout = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import tensorforge.ops  # noqa: F401 - the op registry and its templates
    while True:
        try:
            job = _receive(stdin)
        except EOFError:
            return
        name = job[2]
        try:
            result = (name, True, _lower_job(*job))
        except Exception as err:     # noqa: BLE001 - reported; the compile lowers it again itself
            result = (name, False, f"{type(err).__name__}: {err}")
        try:
            _send(stdout, result)
        except (pickle.PicklingError, RecursionError, TypeError) as err:
            _send(stdout, (name, False, f"cannot send the loop program back: {err}"))


if __name__ == "__main__":
    _serve_forever()
