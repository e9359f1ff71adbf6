"""Measuring candidates: the `configs -> measurements` arrow of autotune/.

A candidate is a (task, config) pair (`MeasureInput`).  A `Builder` turns candidates into
compiled libraries (`BuildResult`); a `Runner` times built candidates (`MeasureResult`).  Both
are protocols with one method, so a runner that sends libraries to other machines (Dask) fits
beside the local ones.  Candidates and results cross process boundaries as JSON-able values
(task and config JSON, a library path, a PrimFunc), never as live objects.

Nothing a candidate does stops tuning.  Each failure becomes a result with an error kind:

  build_error    the template, lowering or the C compiler raised (message: the error)
  build_timeout  building took longer than the builder's time limit
  build_crash    the building process died (twice: once in a batch, once alone)
  runtime_error  the kernel raised (bad status, argument check)
  crash          the measuring process died (message names the signal, e.g. SIGSEGV)
  timeout        the check and timing took longer than the runner's time limit
  wrong_answer   the output differs from the NumPy reference (checked once per candidate)

LocalBuilder compiles in a `ProcessPoolExecutor`; each job arms a timer (SIGALRM) for its
limit, which interrupts lowering or the compiler (subprocess.run kills the compiler when
interrupted); a backstop in the parent kills the pool if a job still does not return.
LocalRunner times one candidate at a time in a separate, persistent process that it talks to
over a pipe; on a hang it kills that process, on a crash it reads the signal from the exit
code, and in both cases it starts a fresh one for the next candidate.  Processes are started
with "spawn" (a fork of a process that has OpenMP threads can deadlock); a new process imports
the modules that register the candidates' templates (so templates defined in any importable
module, tests included, can be measured).
"""
from __future__ import annotations

import concurrent.futures as cf
import importlib
import math
import multiprocessing
import os
import signal
import threading
import time
import traceback
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Protocol, Sequence

import numpy as np

from ..te.space import ConfigEntity
from .task import Task


class ErrorKind:
    BUILD = "build_error"
    BUILD_TIMEOUT = "build_timeout"
    BUILD_CRASH = "build_crash"
    RUNTIME = "runtime_error"
    CRASH = "crash"
    TIMEOUT = "timeout"
    WRONG = "wrong_answer"


@dataclass(frozen=True)
class MeasureInput:
    task: Task
    config: ConfigEntity


@dataclass(frozen=True)
class BuildResult:
    input: MeasureInput
    lib_path: str | None = None
    func: object = None             # the PrimFunc (pickles); the runner rebuilds its Module from it
    symbol: str = ""
    error: str | None = None
    message: str = ""
    build_s: float = 0.0


@dataclass(frozen=True)
class MeasureResult:
    costs: tuple = ()               # seconds per run, one per repeat
    error: str | None = None
    message: str = ""
    build_s: float = 0.0
    run_s: float = 0.0
    timestamp: float = field(default_factory=time.time)

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.costs)

    @property
    def cost(self) -> float:
        """Seconds per run: the fastest repeat.  Other processes on the machine can only add
        time to a repeat, so the minimum is the steadiest estimate of what the candidate costs
        on its own, and candidates timed at busy and at quiet moments stay comparable."""
        return min(self.costs) if self.ok else math.inf


class Builder(Protocol):
    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]: ...


class Runner(Protocol):
    def run(self, builds: Sequence[BuildResult]) -> list[MeasureResult]: ...


def measure(builder: Builder, runner: Runner, inputs: Sequence[MeasureInput]) -> list[MeasureResult]:
    """Build then run `inputs`; one result per input, in order."""
    return runner.run(builder.build(inputs))


def template_modules(tasks: Sequence[Task]) -> list[str]:
    """The modules a fresh process imports so that `tasks`' templates are registered."""
    return sorted({t.tunable.module for t in tasks})


def _import(modules: Sequence[str]) -> None:
    for m in modules:
        importlib.import_module(m)


def _spawn():
    return multiprocessing.get_context("spawn")


# Builder -----------------------------------------------------------------------------------

class _BuildTimeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise _BuildTimeout()


def _build_job(task_json: dict, config_json: dict, modules: list, limit: float) -> dict:
    """In a pool process: lower and compile one candidate within `limit` seconds."""
    from ..errors import install_warning_format

    install_warning_format()        # a warning from a pool process is one line too, with no source
    start = time.perf_counter()
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        _import(modules)
        from ..build_module import build
        from .task import build_candidate
        task = Task.from_json(task_json)
        config = task.config_space.from_json(config_json)
        func = build_candidate(task, config)
        module = build(func, target=task.target)
        cfunc = getattr(module.get_function(func.name), "_cfunc", None)
        # a device module (GPU) has no library to pass on: the measuring process builds its
        # program again from `func` (the compile caches make that cheap)
        return {"lib_path": getattr(module, "lib_path", None), "func": func,
                "symbol": cfunc.__name__ if cfunc is not None else func.name,
                "build_s": time.perf_counter() - start}
    except _BuildTimeout:
        return {"error": ErrorKind.BUILD_TIMEOUT, "message": f"building took more than {limit:g} s",
                "build_s": time.perf_counter() - start}
    except Exception as err:    # noqa: BLE001 - every failure of a candidate becomes a record
        return {"error": ErrorKind.BUILD, "message": _describe(err), "build_s": time.perf_counter() - start}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _describe(err: BaseException, limit: int = 2000) -> str:
    text = f"{type(err).__name__}: {err}"
    return text if len(text) <= limit else text[:limit] + " ..."


class LocalBuilder:
    """Compiles candidates in a pool of `n_parallel` processes, `timeout` seconds each."""

    def __init__(self, n_parallel: int | None = None, timeout: float = 30.0):
        if timeout <= 0:
            raise ValueError(f"LocalBuilder timeout must be positive, got {timeout}")
        self.n_parallel = max(1, n_parallel or os.cpu_count() or 1)
        self.timeout = float(timeout)
        self._pool: cf.ProcessPoolExecutor | None = None

    def _executor(self) -> cf.ProcessPoolExecutor:
        if self._pool is None:
            self._pool = cf.ProcessPoolExecutor(self.n_parallel, mp_context=_spawn(),
                                                initializer=_watch_parent, initargs=(os.getpid(),))
        return self._pool

    def _discard_pool(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        for proc in list(getattr(pool, "_processes", {}).values()):   # no public kill before 3.14
            if proc.is_alive():
                proc.kill()
        pool.shutdown(wait=False, cancel_futures=True)

    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        if not inputs:
            return []
        modules = template_modules([i.task for i in inputs])
        results: list[BuildResult | None] = [None] * len(inputs)
        broken = self._run(inputs, range(len(inputs)), modules, results)
        for k in broken:        # a process died: retry each of those alone, to find the culprit
            if self._run(inputs, [k], modules, results):
                results[k] = BuildResult(inputs[k], error=ErrorKind.BUILD_CRASH,
                                         message="the building process died (twice)")
        return results  # type: ignore[return-value]

    def _run(self, inputs, indices, modules, results) -> list[int]:
        """Build `indices` in the pool; returns those lost to a dead process."""
        pool = self._executor()
        futures = {k: pool.submit(_build_job, inputs[k].task.to_json(), inputs[k].config.to_json(),
                                  modules, self.timeout) for k in indices}
        # each job stops itself at its limit; the backstop covers a job that cannot be interrupted
        rounds = math.ceil(len(futures) / self.n_parallel)
        deadline = time.monotonic() + rounds * self.timeout + 30.0
        broken, hung = [], False
        for k, fut in futures.items():
            try:
                out = fut.result(timeout=max(0.0, deadline - time.monotonic()))
            except cf.TimeoutError:
                hung = True
                results[k] = BuildResult(inputs[k], error=ErrorKind.BUILD_TIMEOUT,
                                         message=f"building did not stop at its {self.timeout:g} s limit")
                continue
            except BrokenProcessPool:
                broken.append(k)
                continue
            results[k] = BuildResult(inputs[k], out.get("lib_path"), out.get("func"), out.get("symbol", ""),
                                     out.get("error"), out.get("message", ""), out.get("build_s", 0.0))
        if hung or broken:
            self._discard_pool()
        return broken

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "LocalBuilder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# Runner ------------------------------------------------------------------------------------

def _runner_main(conn, parent: int | None = None) -> None:
    """The measuring process: answers "prepare" (make a task's inputs and reference outputs)
    and "run" (check and time one built candidate) messages until the pipe closes."""
    _die_with_parent(parent)
    prepared: dict[str, tuple] = {}
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        try:
            if msg["kind"] == "prepare":
                _import(msg["modules"])
                if msg["num_threads"]:
                    from ..runtime.module import set_num_threads
                    set_num_threads(msg["num_threads"])
                task = Task.from_json(msg["task"])
                prepared[task.key] = prepare_io(task, msg["seed"])
                reply = {"ok": True}
            else:
                reply = _check_and_time(msg, prepared[msg["task_key"]])
        except Exception as err:    # noqa: BLE001
            reply = {"error": ErrorKind.RUNTIME, "message": _describe(err) + "\n" + traceback.format_exc(limit=3)}
        conn.send(reply)


def _die_with_parent(parent: int | None = None) -> None:
    """In the measuring process: end when the parent dies, so that a candidate stuck in an
    endless loop does not outlive a tuner or pool worker that was killed (even by SIGKILL,
    which runs no cleanup).  On Linux the kernel is asked to send SIGKILL (PR_SET_PDEATHSIG:
    it acts even while a candidate holds the GIL); the parent's pid is watched as well."""
    import sys

    if sys.platform.startswith("linux"):
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)      # PR_SET_PDEATHSIG = 1
        except (OSError, AttributeError):
            pass
    _watch_parent(os.getppid() if parent is None else parent)


def _watch_parent(parent: int) -> None:
    """End this process (within half a second) once its parent, pid `parent`, has died; also
    when it died before this call.  The builder's pool processes use only this: the kernel's
    parent-death signal follows the *thread* that started a process, and the pool starts its
    processes from whichever thread submits work, which may end long before the tuner does."""
    if os.getppid() != parent:
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)
    threading.Thread(target=watch, name="tensorforge-parent-watch", daemon=True).start()


_FLUSH: np.ndarray | None = None


def _flush_caches() -> None:
    """Overwrite 64 MiB, evicting the candidate's data from every cache level."""
    global _FLUSH
    if _FLUSH is None:
        _FLUSH = np.zeros(1 << 24, np.float32)
    _FLUSH += 1.0


def prepare_io(task: Task, seed: int) -> tuple[list, list]:
    """(inputs, expected outputs) of `task` as its candidates are measured: the reference's
    inputs copied to buffers that start on a cache line (`_aligned`)."""
    inputs, expected = task.reference_io(seed)
    return [_aligned(a) for a in inputs], expected


def output_buffers(func, n_inputs: int) -> list[np.ndarray]:
    """The candidate's output arguments (its params after the inputs), cache-line aligned: NaN
    where the kernel should write, so an element it skips cannot pass the check."""
    from ..ir import dtype as dt
    from ..runtime.memory import aligned_empty

    outs = []
    for buf in func.params[n_inputs:]:
        out = aligned_empty(tuple(int(d.value) for d in buf.shape), dt.element_of(buf.dtype))
        out[...] = np.nan if out.dtype.kind == "f" else 0
        outs.append(out)
    return outs


def _check_and_time(msg: dict, prepared: tuple) -> dict:
    from ..backends import backend_for
    from ..codegen.analysis import kernel_signature
    from ..runtime.module import Module
    from ..target import Target

    inputs, expected = prepared
    func = msg["func"]
    target = Target.parse(msg.get("target", "c"))
    if msg["lib_path"]:
        module = Module([kernel_signature(func)], msg["lib_path"], "", symbols={func.name: msg["symbol"]})
    else:                            # a device backend: its program is built on the device here
        module = backend_for(target).build([func], target)
    outs = output_buffers(func, len(inputs))
    if msg["check"]:
        module(*inputs, *outs)
        for k, (got, want) in enumerate(zip(outs, expected)):
            problem = _compare(got, np.asarray(want), msg["rtol"], msg["atol"])
            if problem:
                return {"error": ErrorKind.WRONG, "message": f"output {k}: {problem}"}
    # the clock is the target's backend's (a device backend times on the device)
    timer = backend_for(target).timer
    evaluate = timer(module, func.name, number=msg["number"], repeat=1 if msg["flush"] else msg["repeat"],
                     min_repeat_ms=msg["min_repeat_ms"])
    if msg["flush"]:
        costs = []
        for _ in range(msg["repeat"]):
            _flush_caches()
            costs += evaluate(*inputs, *outs)
    else:
        costs = evaluate(*inputs, *outs)
    return {"costs": list(costs)}


def _aligned(array: np.ndarray) -> np.ndarray:
    """`array`'s values in a buffer that starts on a cache line, as the executor's arena and
    params do: NumPy's own 16-byte alignment makes vector loads straddle lines, and a blocked
    3x3 conv's default took 1.98 ms so against 1.52 ms aligned, which ranked candidates by how
    they cope with a layout no model gives them."""
    from ..runtime.memory import aligned_empty

    out = aligned_empty(array.shape, array.dtype)
    out[...] = array
    return out


def _compare(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str:
    """'' when `got` matches `want`, else what differs."""
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    if got.dtype.kind != "f":
        bad = int(np.count_nonzero(got != want.astype(got.dtype)))
        return f"{bad} of {got.size} elements differ" if bad else ""
    want = want.astype(np.float64)
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    err = np.abs(got.astype(np.float64) - want)
    bad = ~(err <= atol * scale + rtol * np.abs(want))        # NaN counts as bad
    if not bad.any():
        return ""
    where = np.unravel_index(int(np.argmax(bad)), got.shape)
    return (f"{int(bad.sum())} of {got.size} elements differ; first at {tuple(int(i) for i in where)}: "
            f"got {float(got[where]):.7g}, expected {float(want[where]):.7g}")


class _Process:
    """One measuring process and the pipe to it."""

    def __init__(self):
        ctx = _spawn()
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_runner_main, args=(child, os.getpid()), daemon=True, name="tensorforge-runner")
        self.proc.start()
        child.close()
        self.prepared: set[str] = set()
        self.runs = 0

    def call(self, msg: dict, timeout: float) -> tuple[str, object]:
        """("ok", reply) | ("timeout", None) | ("died", exit code)."""
        try:
            self.conn.send(msg)
            if not self.conn.poll(timeout):
                return "timeout", None
            return "ok", self.conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            self.proc.join(5)
            return "died", self.proc.exitcode

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()


def _signal_text(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by signal {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with code {exitcode}"


class LocalRunner:
    """Times built candidates one at a time in a separate process.

    Each candidate is run once and compared with the task's NumPy reference (`check`), then
    timed: `repeat` measurements, each the mean of `number` back-to-back runs (`number` grows
    until one measurement lasts `min_repeat_ms`), after a warm-up run; with `flush_cache` the
    caches are flushed before each measurement.  `timeout` bounds the check and timing of one
    candidate; `prepare_timeout` bounds making a task's inputs and reference outputs (once per
    task and process).  `num_threads` sets the kernels' thread count (None: this process's)."""

    def __init__(self, number: int = 4, repeat: int = 3, min_repeat_ms: float = 0.0, timeout: float = 10.0,
                 check: bool = True, rtol: float = 1e-3, atol: float = 1e-3, num_threads: int | None = None,
                 flush_cache: bool = False, seed: int = 0, prepare_timeout: float = 120.0,
                 runs_per_process: int = 200):
        if number < 1 or repeat < 1 or timeout <= 0:
            raise ValueError("LocalRunner needs number >= 1, repeat >= 1 and a positive timeout")
        self.number, self.repeat, self.min_repeat_ms = number, repeat, min_repeat_ms
        self.timeout, self.prepare_timeout = float(timeout), float(prepare_timeout)
        self.check, self.rtol, self.atol = check, rtol, atol
        self.num_threads, self.flush_cache, self.seed = num_threads, flush_cache, seed
        self.runs_per_process = runs_per_process     # each run loads a library; start afresh now and then
        self._proc: _Process | None = None

    def threads(self) -> int:
        """The kernels' thread count in the measuring process: `num_threads`, or this process's
        own count (a spawned process would otherwise start from the machine's default, not from
        a `set_num_threads` made here)."""
        if self.num_threads is not None:
            return int(self.num_threads)
        from ..runtime.module import get_num_threads
        return get_num_threads()

    def _process(self) -> _Process:
        if self._proc is not None and (not self._proc.proc.is_alive() or self._proc.runs >= self.runs_per_process):
            self._drop()
        if self._proc is None:
            self._proc = _Process()
        return self._proc

    def _drop(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc = None

    def run(self, builds: Sequence[BuildResult]) -> list[MeasureResult]:
        return [self._run_one(b) for b in builds]

    def _run_one(self, b: BuildResult) -> MeasureResult:
        if b.error is not None:
            return MeasureResult((), b.error, b.message, b.build_s)
        task = b.input.task
        start = time.perf_counter()
        proc = self._process()
        if task.key not in proc.prepared:
            status, reply = proc.call({"kind": "prepare", "task": task.to_json(), "seed": self.seed,
                                       "modules": template_modules([task]), "num_threads": self.threads()},
                                      self.prepare_timeout)
            failure = self._failure(status, reply, "preparing the task's inputs and reference", self.prepare_timeout)
            if failure is not None:
                return MeasureResult((), failure[0], failure[1], b.build_s, time.perf_counter() - start)
            proc.prepared.add(task.key)
        msg = {"kind": "run", "task_key": task.key, "func": b.func, "lib_path": b.lib_path, "symbol": b.symbol,
               "check": self.check, "rtol": self.rtol, "atol": self.atol, "number": self.number,
               "repeat": self.repeat, "min_repeat_ms": self.min_repeat_ms, "flush": self.flush_cache,
               "target": task.target}
        status, reply = proc.call(msg, self.timeout)
        proc.runs += 1
        run_s = time.perf_counter() - start
        failure = self._failure(status, reply, "checking and timing the candidate", self.timeout)
        if failure is not None:
            return MeasureResult((), failure[0], failure[1], b.build_s, run_s)
        return MeasureResult(tuple(reply["costs"]), None, "", b.build_s, run_s)

    def _failure(self, status: str, reply, what: str, limit: float) -> tuple[str, str] | None:
        if status == "timeout":
            self._drop()
            return ErrorKind.TIMEOUT, f"{what} took more than {limit:g} s"
        if status == "died":
            code = reply
            self._drop()
            return ErrorKind.CRASH, f"the measuring process died while {what}: {_signal_text(code)}"
        if "error" in reply:
            return reply["error"], reply.get("message", "")
        return None

    def close(self) -> None:
        self._drop()

    def __enter__(self) -> "LocalRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
