"""Measuring on a pool of machines: the `configs -> measurements` arrow of autotune/, spread
over Dask distributed workers.

    tensorforge pool scheduler --port 8786                      # prints tcp://127.0.0.1:8786
    tensorforge pool worker --device cpu --scheduler tcp://127.0.0.1:8786     # one per machine

    with DaskRunner("tcp://127.0.0.1:8786") as runner:
        tune(tasks, trials=64, records="tune.jsonl", runner=runner)

`DaskRunner` is a `Runner` (measure.py): candidates are still compiled by the builder on this
machine; each built candidate goes to a worker as data (the library's bytes, its symbol and
the pickled PrimFunc, since the library path means nothing on another machine).  Every task
asks for one unit of the resource named after the device kind (`resources={"cpu": 1}`) and
each worker offers exactly one, so a worker times one candidate at a time and measurements
never share its cores.  On the worker, `_measure_on_worker` writes the library into the
worker's scratch directory and times it with a `LocalRunner` cached in the worker process:
the kernel runs in that runner's child process, so a segfault or a hang kills the child, not
the Dask worker, and comes back as an error result like on one machine.

No candidate is lost.  When a worker dies mid-task, the scheduler runs the task again on
another worker (up to its `allowed-failures`, 3 by default); when it gives up (KilledWorker)
the runner submits the candidate again `retries` times, and then records it as a "crash"
naming the lost worker.  Every input gets exactly one MeasureResult, in input order.  Problems
of the pool itself are raised, not recorded (a record would make a resumed run skip the
config): no worker with the device's resource for `worker_wait` seconds, a scheduler that
cannot be reached or that forgets tasks, a worker that cannot import a template module.

Workers are plain `distributed.Worker`s without a nanny: a nanny runs the worker as a
daemonic process, and a daemonic process may not start the measuring process.  Start them
with `tensorforge pool worker` (or `dask worker --no-nanny --nthreads 1 --resources cpu=1`).
Template modules (`template_modules`) are imported on the worker on demand, so templates
outside tensorforge must be importable there too (installed, or on PYTHONPATH).
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Sequence

from .measure import BuildResult, ErrorKind, LocalRunner, MeasureInput, MeasureResult, _describe, template_modules
from .task import Task

_EXTRA_HINT = "the Dask pool needs dask.distributed: pip install 'tensorforge[distributed]'"


def _distributed():
    try:
        import distributed
    except ImportError as err:
        from ..errors import MissingDependencyError
        raise MissingDependencyError(f"{_EXTRA_HINT} ({err})") from err
    return distributed


# The worker side ---------------------------------------------------------------------------

_RUNNERS: dict[tuple, tuple[LocalRunner, threading.Lock]] = {}
_RUNNERS_LOCK = threading.Lock()


def _worker_runner(options: dict) -> tuple[LocalRunner, threading.Lock]:
    """The LocalRunner of this worker process for `options` (it keeps its measuring process
    and prepared tasks between candidates), and the lock that serializes its use."""
    key = tuple(sorted(options.items()))
    with _RUNNERS_LOCK:
        if key not in _RUNNERS:
            _RUNNERS[key] = (LocalRunner(**options), threading.Lock())
        return _RUNNERS[key]


def _import_templates(modules: Sequence[str], where: str) -> None:
    import importlib

    for m in modules:
        try:
            importlib.import_module(m)
        except ImportError as err:
            raise RuntimeError(f"the Dask worker {where} cannot import {m!r}, the module that registers the "
                               f"candidate's template; install it there or put it on the worker's PYTHONPATH "
                               f"({err})") from err


def _write_library(directory: Path, data: bytes) -> Path:
    """The library at a content-addressed path under `directory` (written atomically): a path
    names one content, so a library that the measuring process already loaded under that
    name is the same code."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"cand_{hashlib.sha256(data).hexdigest()[:32]}.so"
    if not path.exists():
        tmp = directory / f".{path.name}.{uuid.uuid4().hex}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, path)
    return path


def _measure_on_worker(payload: dict, options: dict) -> MeasureResult:
    """A Dask task: check and time one built candidate on this worker (see the module doc)."""
    import multiprocessing

    from distributed import get_worker

    worker = get_worker()
    if multiprocessing.current_process().daemon:
        raise RuntimeError(f"the Dask worker {worker.address} runs in a daemonic process (a nanny started it), "
                           "which cannot start the measuring process; start workers with "
                           "`tensorforge pool worker` or `dask worker --no-nanny`")
    _import_templates(payload["modules"], worker.address)
    task = Task.from_json(payload["task"])
    # a device candidate comes without a library: the measuring process builds its program
    lib = _write_library(Path(worker.local_directory) / "tensorforge", payload["lib"]) if payload["lib"] else None
    # the runner reads only the task, the library and the PrimFunc of a build: no config here
    build = BuildResult(MeasureInput(task, None), str(lib) if lib else None, payload["func"],  # type: ignore[arg-type]
                        payload["symbol"], build_s=payload["build_s"])
    runner, lock = _worker_runner(options)
    try:
        with lock:
            return runner.run([build])[0]
    finally:
        if lib is not None:
            lib.unlink(missing_ok=True)     # the measuring process has loaded it (or died)


# The client side ---------------------------------------------------------------------------

class DaskRunner:
    """Times built candidates on the Dask workers of the scheduler at `address` (an address
    such as "tcp://127.0.0.1:8786", or a scheduler file) that offer the resource `device`.

    `timeout` and the other keyword arguments are LocalRunner's (number, repeat,
    min_repeat_ms, check, rtol, atol, num_threads, flush_cache, seed, prepare_timeout,
    runs_per_process): each worker measures with a LocalRunner made with them.
    retries: submissions of a candidate after the scheduler gave up on it because the workers
    running it died (KilledWorker); then it is recorded as a "crash".
    worker_wait: seconds to wait, while nothing finishes, for a worker offering `device`
    before raising.  connect_timeout: seconds to reach the scheduler.

    tune() sends one batch at a time (`batch_size`, default two per build process): give a
    batch_size of at least the number of workers to keep them all busy."""

    def __init__(self, address: str, device: str = "cpu", *, timeout: float = 10.0, retries: int = 1,
                 worker_wait: float = 30.0, connect_timeout: float = 10.0, **measure_options):
        if retries < 0 or worker_wait <= 0 or connect_timeout <= 0:
            raise ValueError("DaskRunner needs retries >= 0 and positive worker_wait and connect_timeout")
        if not device:
            raise ValueError("DaskRunner needs the device kind its workers offer (e.g. 'cpu')")
        LocalRunner(timeout=timeout, **measure_options)          # check the options here, not on a worker
        self.address, self.device = address, device
        self.retries, self.worker_wait = int(retries), float(worker_wait)
        self.options = {"timeout": float(timeout), **measure_options}
        self.poll_s = 1.0
        self._client = _connect(address, connect_timeout)

    @property
    def num_threads(self) -> int | None:
        """The workers' measuring thread count, when the options fix it (for the records)."""
        return self.options.get("num_threads")

    # Submitting ----------------------------------------------------------------------------
    def _payload(self, b: BuildResult) -> dict:
        task = b.input.task
        return {"task": task.to_json(), "modules": template_modules([task]), "lib": Path(b.lib_path).read_bytes() if b.lib_path else None,
                "symbol": b.symbol, "func": b.func, "build_s": b.build_s}

    def _submit(self, payload: dict, b: BuildResult, attempt: int):
        config = getattr(b.input.config, "index", "x")
        key = f"tensorforge-measure-{b.input.task.template}-c{config}-{attempt}-{uuid.uuid4().hex[:12]}"
        return self._client.submit(_measure_on_worker, payload, self.options, key=key, pure=False,
                                   resources={self.device: 1})

    def workers(self) -> list[str]:
        """Addresses of the connected workers that offer this runner's device."""
        info = self._client.scheduler_info(n_workers=-1)
        return sorted(a for a, w in info.get("workers", {}).items()
                      if (w.get("resources") or {}).get(self.device, 0) >= 1)

    # Running -------------------------------------------------------------------------------
    def run(self, builds: Sequence[BuildResult]) -> list[MeasureResult]:
        from distributed import as_completed

        results: list[MeasureResult | None] = [None] * len(builds)
        payloads: dict[int, dict] = {}
        for k, b in enumerate(builds):
            if b.error is not None:
                results[k] = MeasureResult((), b.error, b.message, b.build_s)
                continue
            try:
                payloads[k] = self._payload(b)
            except OSError as err:
                results[k] = MeasureResult((), ErrorKind.RUNTIME, f"cannot read the built library: {_describe(err)}",
                                           b.build_s)
        pending = {self._submit(p, builds[k], 0): (k, 0) for k, p in payloads.items()}
        done = as_completed(list(pending), loop=self._client.loop)
        try:
            self._collect(builds, payloads, results, pending, done)
        finally:
            if pending:     # stopped by an error or Ctrl-C: do not leave candidates queued on the pool
                with contextlib.suppress(Exception):       # the scheduler may be gone
                    self._client.cancel(list(pending))
        return results      # type: ignore[return-value]

    def _collect(self, builds, payloads, results, pending, done) -> None:
        """Wait for `pending` futures, resubmitting lost candidates, until each has a result;
        raises when no worker offers the device for `worker_wait` seconds of no progress."""
        quiet_since = time.monotonic()
        no_worker_since: float | None = None
        while pending:
            batch = done.next_batch(block=False)
            if not batch:
                now = time.monotonic()
                if now - quiet_since >= self.poll_s:
                    quiet_since = now
                    if self.workers():
                        no_worker_since = None
                    elif no_worker_since is None:
                        no_worker_since = now
                    elif now - no_worker_since >= self.worker_wait:
                        raise RuntimeError(
                            f"no Dask worker offers the resource {self.device!r} at {self.address} (waited "
                            f"{self.worker_wait:g} s with {len(pending)} candidate(s) queued); start one with: "
                            f"tensorforge pool worker --device {self.device} --scheduler {self.address}")
                time.sleep(0.02)
                continue
            quiet_since, no_worker_since = time.monotonic(), None
            for fut in batch:
                k, attempt = pending.pop(fut)
                lost = self._outcome(fut, builds[k], results, k)
                if lost is None:
                    continue
                if attempt < self.retries:
                    new = self._submit(payloads[k], builds[k], attempt + 1)
                    pending[new] = (k, attempt + 1)
                    done.add(new)
                elif lost == "killed":
                    exc = fut.exception()
                    last = getattr(getattr(exc, "last_worker", None), "address", None) or _describe(exc)
                    results[k] = MeasureResult((), ErrorKind.CRASH,
                                               f"lost with the Dask workers that measured it (the last: {last}); "
                                               f"submitted {1 + attempt} time(s)", builds[k].build_s)
                else:
                    raise RuntimeError(f"the Dask scheduler at {self.address} dropped the measurement of "
                                       f"{builds[k].input.task.name} (restarted?); {1 + attempt} submission(s)")

    def _outcome(self, fut, build: BuildResult, results: list, k: int) -> str | None:
        """Store the result of a finished future; "killed" or "cancelled" when it was lost."""
        from distributed.scheduler import KilledWorker

        if fut.status == "finished":
            results[k] = fut.result()
            return None
        if fut.status == "error":
            exc = fut.exception()
            if isinstance(exc, KilledWorker):
                return "killed"
            raise RuntimeError(f"measuring {build.input.task.name} on the Dask pool at {self.address} failed: "
                               f"{_describe(exc)}") from exc
        if self._client.status not in ("running", "connecting"):
            raise ConnectionError(f"lost the connection to the Dask scheduler at {self.address} "
                                  f"(client {self._client.status}) while measuring {build.input.task.name}")
        return "cancelled"

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()

    def __enter__(self) -> "DaskRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _connect(address: str, timeout: float):
    """A Client of the scheduler at `address` (or in the scheduler file `address`)."""
    distributed = _distributed()
    where = {"scheduler_file": address} if os.path.isfile(address) else {"address": address}
    try:
        return distributed.Client(**where, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError) as err:
        raise ConnectionError(f"cannot reach the Dask scheduler at {address} within {timeout:g} s; start one "
                              f"with `tensorforge pool scheduler` ({_describe(err)})") from err


# The `pool` command ------------------------------------------------------------------------

def add_pool_commands(subparsers) -> None:
    """Register `pool scheduler` and `pool worker` under the CLI's `subparsers`."""
    pool = subparsers.add_parser("pool", help="a Dask pool of workers that measure tuning candidates")
    add_pool_subcommands(pool)


def add_pool_subcommands(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="pool_command", required=True)
    sch = sub.add_parser("scheduler", help="run the pool's Dask scheduler (Ctrl-C stops it)")
    sch.add_argument("--host", default="127.0.0.1",
                     help="interface to listen on (default 127.0.0.1: this machine only; 0.0.0.0: all)")
    sch.add_argument("--port", type=int, default=8786, help="port (default 8786; 0: any free port)")
    sch.add_argument("--scheduler-file", help="also write the address to this JSON file (for workers, clients)")
    sch.add_argument("--allowed-failures", type=int, default=None,
                     help="workers that may die running one task before it fails (default: Dask's, 3)")
    sch.set_defaults(fn=_scheduler_command)
    wk = sub.add_parser("worker", help="run a measuring worker: one candidate at a time (Ctrl-C stops it)")
    wk.add_argument("--device", default="cpu", help="device kind it measures on: the resource it offers (default cpu)")
    where = wk.add_mutually_exclusive_group(required=True)
    where.add_argument("--scheduler", help="scheduler address, e.g. tcp://127.0.0.1:8786")
    where.add_argument("--scheduler-file", help="the scheduler's JSON file (pool scheduler --scheduler-file)")
    wk.add_argument("--nthreads", type=int, default=1, help="Dask threads (default 1; candidates run one at a time)")
    wk.add_argument("--name", help="worker name (default: chosen by Dask)")
    wk.add_argument("--host", help="interface to listen on; default 127.0.0.1, which a scheduler on "
                                   "another machine cannot reach: then give this machine's address")
    wk.set_defaults(fn=_worker_command)


def _scheduler_command(opts: argparse.Namespace) -> int:
    distributed = _distributed()

    async def serve(stop: asyncio.Event) -> None:
        async with distributed.Scheduler(host=opts.host, port=opts.port, dashboard=False,
                                         scheduler_file=opts.scheduler_file,
                                         allowed_failures=opts.allowed_failures) as scheduler:
            print(f"tensorforge pool scheduler at {scheduler.address}", flush=True)
            print(f"  workers: tensorforge pool worker --device cpu --scheduler {scheduler.address}", flush=True)
            await _until(stop, scheduler.finished())
    return _serve(serve, "scheduler")


def _worker_command(opts: argparse.Namespace) -> int:
    distributed = _distributed()
    if opts.nthreads < 1:
        raise SystemExit(f"--nthreads must be >= 1, got {opts.nthreads}")
    host = opts.host or _default_worker_host(opts.scheduler)
    where = {"scheduler_file": opts.scheduler_file} if opts.scheduler_file else {"scheduler_ip": opts.scheduler}

    async def serve(stop: asyncio.Event) -> None:
        async with distributed.Worker(**where, nthreads=opts.nthreads, resources={opts.device: 1}, name=opts.name,
                                      host=host, dashboard=False) as worker:
            print(f"tensorforge pool worker {worker.name} ({opts.device}) at {worker.address}, "
                  f"scheduler {worker.scheduler.address}", flush=True)
            await _until(stop, worker.finished())
            # leave without waiting for a candidate being measured (the scheduler gives it to
            # another worker), then end the measuring processes
            await worker.close(executor_wait=False, reason="tensorforge pool worker stopped")
            _close_runners()
    return _serve(serve, "worker")


def _close_runners() -> None:
    with _RUNNERS_LOCK:
        runners = [r for r, _ in _RUNNERS.values()]
        _RUNNERS.clear()
    for runner in runners:
        runner.close()


def _default_worker_host(scheduler: str | None) -> str:
    """127.0.0.1 for a scheduler on this machine; a remote one needs an address it can reach."""
    if scheduler is None:
        return "127.0.0.1"
    from distributed.comm import get_address_host

    try:
        host = get_address_host(scheduler if "://" in scheduler else f"tcp://{scheduler}")
    except ValueError as err:
        raise SystemExit(f"--scheduler {scheduler!r} is not an address like tcp://127.0.0.1:8786 ({err})") from None
    if host in ("localhost", "::1") or host.startswith("127."):
        return "127.0.0.1"
    raise SystemExit(f"the scheduler {scheduler} is on another machine: give --host, an address of this machine "
                     "that it can reach (0.0.0.0 listens on every interface)")


async def _until(stop: asyncio.Event, finished) -> None:
    """Wait until the server finishes or `stop` is set (Ctrl-C, SIGTERM)."""
    waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(finished)]
    _, rest = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    for w in rest:
        w.cancel()


STOP_WITHIN_S = 2.0    # after SIGINT or SIGTERM the process is gone within this time


def _serve(serve, what: str) -> int:
    """Run `serve(stop)` in an event loop; SIGINT and SIGTERM set `stop`, so the server closes
    cleanly (a worker tells the scheduler it is leaving).

    A signal must end the process even while the server is still starting, e.g. a worker that
    retries a scheduler that is not there (Dask retries forever, inside the `async with`, where
    `stop` is not yet awaited): then the serving task is cancelled.  Whatever closing still
    runs gets until STOP_WITHIN_S after the signal; then the process leaves without waiting."""
    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        task = asyncio.ensure_future(serve(stop))
        stopped = asyncio.ensure_future(stop.wait())
        await asyncio.wait([task, stopped], return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            stopped.cancel()
            task.result()
            return
        deadline = loop.time() + STOP_WITHIN_S - 0.3
        _exit_later(STOP_WITHIN_S - 0.1, what)
        # a server that started closes itself on `stop`; one still starting is cancelled
        await asyncio.wait([task], timeout=max(0.1, (deadline - loop.time()) / 2))
        if not task.done():
            task.cancel()
            await asyncio.wait([task], timeout=max(0.1, deadline - loop.time()))

    try:
        asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):       # a second Ctrl-C while closing
        pass
    print(f"tensorforge pool {what} stopped", flush=True)
    return 0


def _exit_later(seconds: float, what: str) -> None:
    """A backstop: end the process after `seconds` if closing has not finished by then."""
    def leave() -> None:
        # measuring processes end with this one (measure._die_with_parent)
        print(f"tensorforge pool {what} stopped (closing took too long)", flush=True)
        os._exit(0)
    timer = threading.Timer(seconds, leave)
    timer.daemon = True
    timer.start()


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m tensorforge.autotune.pool scheduler|worker ...` (the same as `tensorforge pool`)."""
    parser = argparse.ArgumentParser(prog="python -m tensorforge.autotune.pool",
                                     description="A Dask pool of measuring workers for tensorforge's auto-tuner.")
    add_pool_subcommands(parser)
    opts = parser.parse_args(argv)
    return opts.fn(opts)


if __name__ == "__main__":
    # run the module's own copy (not __main__'s): the tasks use its cache of runners
    from tensorforge.autotune.pool import main as _main
    raise SystemExit(_main())
